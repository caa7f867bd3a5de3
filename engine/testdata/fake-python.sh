#!/bin/sh
# Stands in for python3 in "engine mlc" tests: "-c <script>" runs the fake
# NVSHMEM uid helper, "-m mlc_llm serve <args>" the fake engine. Both are the
# test binary itself.
case "$1" in
-c) exec env FLEET_TEST_FAKE_UID_HELPER=1 "$FLEET_TEST_BINARY" "$@" ;;
-m) exec env FLEET_TEST_FAKE_ENGINE=1 "$FLEET_TEST_BINARY" "$@" ;;
esac
echo "fake-python: unexpected arguments: $*" >&2
exit 2
