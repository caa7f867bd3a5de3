#!/usr/bin/env bash
# The user's path: build Caddy with xcaddy and this checkout, and check that
# the module is in the binary:
#   xcaddy build v2.11.9 --with github.com/caddy-mlc/caddy-mlc/caddymlc \
#     --replace github.com/caddy-mlc/caddy-mlc=<checkout>
# (--with names the plugin package, --replace points its module, the repo
# root, at the checkout; "--with <package>=<checkout>" would replace the
# package's path, which is not a module.)
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd)
gobin=$(go env GOPATH)/bin
if [ ! -x "$gobin/xcaddy" ]; then
  go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Fill the module cache with what the xcaddy build needs: the same main
# package in a scratch module, resolved once through the proxy (which also
# checks every module against the checksum database).
mkdir -p "$out/warm"
cat >"$out/warm/main.go" <<'GO'
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }
GO
(
  cd "$out/warm"
  go mod init caddy 2>/dev/null
  go mod edit -replace "github.com/caddy-mlc/caddy-mlc=$checkout"
  go get github.com/caddyserver/caddy/v2@v2.11.9 2>&1 | grep -v '^go: ' || true
  go mod tidy
)
# The module is not published, so nothing must look it up in the module
# proxy (this workplace's proxy answers 403 for unknown modules, which Go
# treats as fatal rather than falling back to the replacement). Everything
# else comes from the module cache filled (and checked against the
# checksum database) just above; with the proxy off the database cannot be
# reached again, hence GOSUMDB=off.
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod
(cd "$out" && XCADDY_SKIP_CLEANUP=0 "$gobin/xcaddy" build v2.11.9 \
  --output "$out/caddy" \
  --with github.com/caddy-mlc/caddy-mlc/caddymlc \
  --replace "github.com/caddy-mlc/caddy-mlc=$checkout")
"$out/caddy" list-modules | tee "$out/modules.txt" | grep -E '^(http.handlers.mlc_router|mlc)$'
grep -qx 'http.handlers.mlc_router' "$out/modules.txt"
"$out/caddy" mlc-engine --help >/dev/null 2>&1 || "$out/caddy" help mlc-engine | head -3
echo "xcaddy build: ok"
