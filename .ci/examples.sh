#!/usr/bin/env bash
# The README's commands as written, on the binary the README's main job
# builds: every built-in example at once (each with the commands in its
# header: the engines and redis-server it starts by hand, its Caddys, its
# curls; checked through its own admin endpoint), then the main job through
# the README's "Using it" block with the curl and openai npm clients beside
# it. All of them share the machine, which checks that their ports do not
# clash. Then no process that Caddy started may outlive it.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/lib.sh
use_work_dir

# The main job is built here and run below.
build_main_job

# completes CMD runs a curl command and succeeds if it printed a completion.
completes() {
  local out
  out=$(eval "$1") && grep -q '"object":"text_completion"' <<<"$out"
}

# counted ADMIN succeeds if the metrics on an admin endpoint count a
# completion that ended well.
counted() {
  local metrics
  metrics=$(curl -sf "$1/metrics") && grep '^caddy_mlc_requests_total{.*outcome="ok"}' <<<"$metrics"
}

# all_ready ADMIN prints the engine states on an admin endpoint and succeeds
# if every engine is ready.
all_ready() {
  local states
  states=$(curl -sf "$1/mlc/engines" | grep -o '"state":"[^"]*"' | sort -u)
  echo "$states"
  [ "$states" = '"state":"ready"' ]
}

# header_commands FILE prints the commands in a Caddyfile's header
# comment (the lines "#   <command>").
header_commands() { sed -n 's/^#   //p' "$1"; }

# Every example that runs built-in engines.
caddies=()   # the examples' Caddys
engines=()   # engines started by hand (for the external example)
declare -A admin_of
for file in examples/*.Caddyfile; do
  grep -q '^[[:space:]]*engine mlc' "$file" && continue
  name=$(basename "$file" .Caddyfile)
  # An example with a package of its own (a selection policy from outside
  # the core) needs a Caddy built with that package, not ./caddy: its
  # tests adapt the Caddyfile and serve through the policy in process
  # (go test ./examples/<name>).
  [ -d "examples/$name" ] && continue
  # An address may be an environment placeholder with a default
  # ({$MLC_ADMIN:2919}, for replicas of one file): the default is it.
  admin_of[$name]=$(sed -n 's/^[[:space:]]*admin \(.*\)$/\1/p' "$file" | sed 's/{\$[A-Za-z_]*:\([^}]*\)}/\1/g')
  [ -n "${admin_of[$name]}" ] || fail "$file has no admin endpoint"
  replica=0
  while IFS= read -r cmd; do
    case "$cmd" in
      "./caddy mlc-engine "*"&"|"redis-server "*"&")
        echo "\$ $cmd"
        eval "${cmd%&} >>'$work/$name-engines.log' 2>&1 &"
        engines+=("$!") ;;
      "./caddy run --config $file"|*" ./caddy run --config $file &")
        # Replicas of one file, their ports in the environment, and
        # the one in the foreground: all in the background here.
        echo "\$ ${cmd%&} &"
        eval "${cmd%&} >'$work/$name-$replica.log' 2>&1 &"
        caddies+=("$!")
        replica=$((replica + 1)) ;;
    esac
  done < <(header_commands "$file")
done

for file in examples/*.Caddyfile; do
  name=$(basename "$file" .Caddyfile)
  [ -n "${admin_of[$name]:-}" ] || continue
  echo
  echo "# $file"
  mapfile -t curls < <(header_commands "$file" | grep '^curl ')
  [ "${#curls[@]}" -gt 0 ] || fail "$file shows no curl command"
  # The first is a completion: it completes once Caddy, its engines and
  # (for TLS) its certificate are ready.
  retry 120 completes "${curls[0]}" || fail "$name: ${curls[0]}"
  for cmd in "${curls[@]}"; do
    echo "\$ $cmd"
    out=$(eval "$cmd") || fail "$name: $cmd"
    echo "$out"
    case "$cmd" in
      *"/v1/completions"*) grep -q '"object":"text_completion"' <<<"$out" || fail "$name: not a completion" ;;
      "curl -sI http://"*) # The redirect keeps the HTTPS port.
        grep -qi '^location: https://localhost:8443/' <<<"$out" || fail "$name: redirect drops the port" ;;
    esac
  done
  admin=${admin_of[$name]}
  retry 20 counted "$admin" || fail "$name: no caddy_mlc_requests_total on $admin/metrics"
  # One ready engine serves the completion; the others (an external one
  # is ready once a health check has seen it) follow.
  retry 60 all_ready "$admin" || fail "$name: engines not all ready on $admin/mlc/engines"
  echo "$name: ok (metrics and engines on $admin)"
done

# The main job, through the README's "Using it" block: everything before
# its "kill $!" now (it starts Caddy in the background), the kill at the end.
echo
echo "# the README's \"Using it\" block"
using=$(doc_block README.md using)
[ "$(head -1 <<<"$using")" = "$main_run &" ] || fail "\"Using it\" does not start the main job ($main_run &)"
stop=$(grep -x 'kill \$!' <<<"$using") || fail "\"Using it\" does not end with kill \$!"
[ "$(tail -1 <<<"$using")" = "$stop" ] || fail "\"Using it\" does not end with kill \$!"
echo "$using"
eval "$(sed '$d' <<<"$using")" 2>"$work/main.log"
main=$!
echo
clients='BASE=http://localhost:8000 bash examples/curl.sh'
grep -qF "$clients" README.md || fail "the README does not show: $clients"
echo "\$ $clients"
eval "$clients"
(cd "$work" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund openai@4 >/dev/null)
cp examples/openai-client.mjs "$work/"
(cd "$work" && BASE=http://localhost:8000 node openai-client.mjs)

# What Caddy started, recorded while it runs.
: >"$work/ours"
for pid in "$main" "${caddies[@]}"; do descendants "$pid" >>"$work/ours"; done
[ -s "$work/ours" ] || fail "no engine under any Caddy"
for pid in "${engines[@]}"; do echo "$pid $(start_time "$pid")" >>"$work/ours"; done
echo "$(( ${#caddies[@]} + 1 )) Caddys, $(wc -l <"$work/ours") processes under them or started by hand"

eval "$stop"
wait "$main" || fail "the main job exited with status $?"
for pid in "${caddies[@]}"; do
  kill "$pid"
  wait "$pid" || fail "a Caddy exited with status $?"
done
for pid in "${engines[@]}"; do
  kill "$pid"
  wait "$pid" || true   # killed by SIGTERM
done
wait_gone "$work/ours" || fail "processes outlived the Caddy that started them"
echo "examples: ok"
