# shellcheck shell=bash
# Helpers for the CI scripts (sourced, run from the repository root): the
# commands of the README and of the pages under docs/, and the processes CI
# starts.

# doc_block FILE NAME prints the fenced block that follows the line
# "<!-- ci: NAME -->" in FILE (README.md, or a page under docs/), and fails
# if FILE has no such block: a block moved to another page must be named
# there by its caller.
doc_block() {
  local block
  [ -f "$1" ] || { echo "$1: no such file (looking for <!-- ci: $2 -->)" >&2; return 1; }
  block=$(awk -v marker="<!-- ci: $2 -->" '
    $0 == marker { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    armed && !inside { exit }
    inside { print }
  ' "$1")
  [ -n "$block" ] || { echo "$1: no block after <!-- ci: $2 -->" >&2; return 1; }
  printf '%s\n' "$block"
}

# readme_top N prints the Nth command of README.md's first fenced block (1:
# the main job, 2: the tests), without its comment.
readme_top() {
  local line
  line=$(awk '/^```/ { if (inside) exit; inside = 1; next } inside { print }' README.md |
    sed -n "$1p" | sed -E 's/[[:space:]]+#.*$//')
  [ -n "$line" ] || { echo "README.md: no command $1 in the first block" >&2; return 1; }
  printf '%s\n' "$line"
}

# start_time PID prints the process's start time (clock ticks after boot),
# which tells it from a later process that reuses the PID. Field 22 of
# /proc/PID/stat, counted after the command name, which may hold spaces.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  awk '{ print $20 }' <<<"${stat##*) }"
}

# descendants PID prints "pid start_time" for every process below PID,
# recursively, from the children lists of all of its threads (a child is
# listed under the thread that forked it).
descendants() {
  local child
  # shellcheck disable=SC2013 # the file is a space-separated list of PIDs
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$child $(start_time "$child")"
    descendants "$child"
  done
}

# alive PID START succeeds while the process PID that started at START runs
# (a zombie has stopped running).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "$(awk '{ print $20 }' <<<"$stat")" = "$2" ] && [ "${stat:0:1}" != Z ]
}

# wait_gone FILE waits up to 20 s until none of the processes listed in FILE
# ("pid start_time" lines) runs, and names those that still do.
wait_gone() {
  local pid start left
  for _ in $(seq 100); do
    left=""
    while read -r pid start; do
      alive "$pid" "$start" && left+=" $pid"
    done <"$1"
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  echo "still running:$left" >&2
  for pid in $left; do ps -o pid=,args= -p "$pid" >&2 || true; done
  return 1
}

# retry N CMD... runs CMD until it succeeds, at most N times, 0.5 s apart,
# with its output (stdout and stderr) shown only for the last try.
retry() {
  local n=$1 i
  shift
  for i in $(seq "$n"); do
    if [ "$i" -eq "$n" ]; then "$@"; return; fi
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
}

# fuzz_target PKG TARGET fuzzes one target for 15 s. Go 1.26's fuzzing
# coordinator can end a duration-bound run with a bare "context deadline
# exceeded" and no failing input (golang/go#75804, fixed in Go 1.27): when a
# run fails that way and wrote nothing under testdata/fuzz, the target is
# fuzzed again for the same number of executions, a count-bound run with no
# deadline to race. Any other failure, or a written input, fails CI.
fuzz_target() {
  local pkg=$1 target=$2 dir out execs
  dir="$(go list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$target"
  local before
  before=$(ls "$dir" 2>/dev/null | sort || true)
  out=$(mktemp)
  if go test -run '^$' -fuzz "^${target}\$" -fuzztime 15s "$pkg" 2>&1 | tee "$out"; then
    rm -f "$out"; return 0
  fi
  if [ "$(ls "$dir" 2>/dev/null | sort)" != "$before" ] ||
    ! grep -A1 -E "^--- FAIL: ${target} " "$out" | grep -qxE '[[:space:]]*context deadline exceeded'; then
    rm -f "$out"; return 1
  fi
  execs=$(grep -oE 'execs: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+' || true)
  rm -f "$out"
  echo "fuzz: $target hit Go's coordinator race (golang/go#75804) with no failing input; again for ${execs:-100000} executions"
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "${execs:-100000}x" "$pkg"
}

# use_work_dir makes $work, a folder for the script's files and logs, and
# on the way out stops the script's jobs still running and removes it.
use_work_dir() {
  work=$(mktemp -d)
  trap stop_jobs_and_clean EXIT
}

stop_jobs_and_clean() {
  local pid
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait || true
  rm -rf "$work"
}

# fail MSG stops the script with MSG and the last lines of each log in
# $work.
fail() {
  local log
  echo "FAIL: $*" >&2
  for log in "$work"/*.log; do
    [ -s "$log" ] && { echo "--- $log (last lines)"; tail -20 "$log"; } >&2
  done
  exit 1
}

# build_main_job runs the build of the README's main job, whose command is
# "<build> && <run>", as written, and leaves its run in $main_run.
build_main_job() {
  local main_job build
  main_job=$(readme_top 1)
  build=${main_job%% && *}
  main_run=${main_job#* && }
  [ "$build" != "$main_job" ] || fail "the README's main job is not '<build> && <run>': $main_job"
  echo "\$ $build"
  eval "$build"
}
