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
# go-nvml loads NVML through cgo: a build without it cannot see the GPUs.
go version -m ./caddy | grep -qE '^[[:space:]]+build[[:space:]]+CGO_ENABLED=1$' ||
  { go version -m ./caddy | grep CGO_ENABLED; echo "FAIL: the xcaddy build is not CGO_ENABLED=1"; exit 1; }
./caddy help mlc-engine >/dev/null || { echo "FAIL: no mlc-engine subcommand"; exit 1; }
echo "xcaddy build: ok"
