#!/usr/bin/env bash
# The "Checking a fleet before traffic" block of docs/operations.md as
# written, on the binary the README's main job builds, line by line: every
# line must succeed; no engine that `mlc-check --start` started may outlive
# it (its config's engine ports are free again), nor any process that the
# Caddy the block starts in the background outlives its `kill $!`.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/lib.sh
use_work_dir

build_main_job

# answers PORT succeeds if something accepts connections on 127.0.0.1:PORT.
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

block=$(doc_block docs/operations.md check)
grep -q -- '--start' <<<"$block" || fail "the check block has no mlc-check --start"
[ "$(tail -1 <<<"$block")" = 'kill $!' ] || fail "the check block does not end with kill \$!"
caddy=""
while IFS= read -r line; do
  echo "\$ $line"
  case "$line" in
    'kill $!')
      [ -n "$caddy" ] || fail "kill \$! with no Caddy in the background"
      : >"$work/ours"
      descendants "$caddy" >>"$work/ours"
      [ -s "$work/ours" ] || fail "no engine under the Caddy"
      eval "$line"
      wait "$caddy" || fail "the Caddy exited with status $?"
      wait_gone "$work/ours" || fail "processes outlived the Caddy that started them"
      ;;
    *' &')
      eval "${line%&} >'$work/caddy.log' 2>&1 &"
      caddy=$!
      ;;
    *)
      eval "$line" || fail "exit status $?: $line"
      if [[ $line == *--start* ]]; then
        config=$(grep -o -- '--config [^ ]*' <<<"$line" | cut -d' ' -f2)
        for port in $(sed -n 's/^[[:space:]]*endpoint [^:]*:\([0-9]*\).*/\1/p' "$config"); do
          ! answers "$port" || fail "an engine still answers on port $port after: $line"
        done
      fi
      ;;
  esac
done <<<"$block"
echo "check: ok"
