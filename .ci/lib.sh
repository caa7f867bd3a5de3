# shellcheck shell=bash
# Helpers for the CI scripts (sourced, run from the repository root): the
# README's commands, and the processes CI starts.

# readme_block NAME prints the fenced block that follows the line
# "<!-- ci: NAME -->" in README.md, and fails if there is none.
readme_block() {
  local block
  block=$(awk -v marker="<!-- ci: $1 -->" '
    $0 == marker { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    armed && !inside { exit }
    inside { print }
  ' README.md)
  [ -n "$block" ] || { echo "README.md: no block after <!-- ci: $1 -->" >&2; return 1; }
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
