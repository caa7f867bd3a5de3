#!/usr/bin/env bash
# Runs the main job (the README's first command) and the client examples
# against it: curl and the openai npm SDK.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
go build -o "$work/caddy" ./xcaddy
"$work/caddy" run --config Caddyfile >"$work/caddy.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 300); do
  curl -sf localhost:8000/v1/models >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/caddy.log"; exit 1; }
  sleep 0.2
done
# The router answers /v1/models before the engines are ready; a completion
# tells when they are.
for _ in $(seq 1 300); do
  curl -sf localhost:8000/v1/completions -d '{"prompt":"hi","max_tokens":1}' >/dev/null 2>&1 && break
  sleep 0.2
done
bash examples/curl.sh
(cd "$work" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund openai@4 >/dev/null)
cp examples/openai-client.mjs "$work/"
(cd "$work" && BASE=http://localhost:8000 node openai-client.mjs)
kill "$pid"; wait "$pid" || true
# No engine outlives Caddy.
if pgrep -f "caddy mlc-engine" >/dev/null; then echo "engines left running"; exit 1; fi
echo "examples: ok"
