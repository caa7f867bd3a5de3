#!/usr/bin/env bash
# The user's path: build Caddy with xcaddy and this checkout, and check that
# the module is in the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd)
gobin=$(go env GOPATH)/bin
if [ ! -x "$gobin/xcaddy" ]; then
  go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$out" && XCADDY_SKIP_CLEANUP=0 "$gobin/xcaddy" build v2.11.9 \
  --output "$out/caddy" \
  --with "github.com/caddy-mlc/caddy-mlc/caddymlc=$checkout")
"$out/caddy" list-modules | tee "$out/modules.txt" | grep -E '^(http.handlers.mlc_router|mlc)$'
grep -qx 'http.handlers.mlc_router' "$out/modules.txt"
"$out/caddy" mlc-engine --help >/dev/null 2>&1 || "$out/caddy" help mlc-engine | head -3
echo "xcaddy build: ok"
