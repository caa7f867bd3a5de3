#!/bin/sh
# Stands in for "engine command <program>": records its argv and environment
# (NUL-separated) in $FLEET_TEST_RECORD_DIR, then execs the fake engine,
# which is the test binary itself.
set -e
printf '%s\0' "$@" >"$FLEET_TEST_RECORD_DIR/script-$$.argv"
env -0 >"$FLEET_TEST_RECORD_DIR/script-$$.env"
exec env FLEET_TEST_FAKE_ENGINE=1 "$FLEET_TEST_BINARY" "$@"
