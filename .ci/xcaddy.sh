#!/usr/bin/env bash
# The user's path: the README's xcaddy block as written (build Caddy with
# this checkout through xcaddy, list its modules), then a check that the
# binary has the modules.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/lib.sh
block=$(doc_block README.md xcaddy)
echo "$block"
out=$(eval "$block")
echo "$out"
for module in admin.api.mlc http.handlers.mlc_router mlc \
  http.handlers.mlc_router.selection_policies.{least_loaded,prefix_aware,round_robin}; do
  grep -qx "$module" <<<"$out" || { echo "FAIL: $module is not in the xcaddy build"; exit 1; }
done
./caddy help mlc-engine >/dev/null || { echo "FAIL: no mlc-engine subcommand"; exit 1; }
echo "xcaddy build: ok"
