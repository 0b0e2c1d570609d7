#!/usr/bin/env bash
# What a container costs a run (docs/containers.md), in one invocation on one machine:
#   bare     N x `podman run --rm --network none IMAGE true`, two at a time (xargs -P2), the
#            floor any tool that starts a container per run pays
#   local    N trivial runs (`true`) through `drover run` on the host, two CPU slots
#   drover   the same N runs with container: {image: IMAGE}: each its own container, end to end
#            (image pinned at submit, working copy, logs, exit, record)
# Reported: wall time and per run for each; the start-up cost a container adds per run
# (drover - local) / N; and drover / bare (target <= 1.5). Then the same one at a time
# (max_parallel: 1 and xargs -P1, N/4 runs): the latency a container adds to each run's start.
#   scripts/podman-local.sh install && scripts/podman-local.sh images   # as root
#   bench/container_overhead.sh [-n RUNS] [-r ROUNDS]
# The store is on the real disk (build/bench-tmp), as users run it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
drover="${DROVER_BIN:-$here/build/drover}"
image=localhost/drover-bb:test
n=200
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    *) echo "usage: $0 [-n RUNS] [-r ROUNDS]" >&2; exit 2 ;;
  esac
done
podman image exists "$image" ||
  { echo "no $image: scripts/podman-local.sh images (as root)" >&2; exit 1; }
base="${BENCH_DIR:-$here/build/bench-tmp}/containers-$$"
mkdir -p "$base"
trap 'rm -rf "$base"' EXIT
now() { date +%s.%N; }

bare() {  # $1: how many at a time, $2: runs
  local t0 t1
  t0=$(now)
  seq "$2" | xargs -P"$1" -I{} podman run --rm --network none "$image" true
  t1=$(now)
  echo "$t1 - $t0" | bc
}

through_drover() {  # $1: local | container, $2: round, $3: max_parallel (0: none), $4: runs
  local dir="$base/$1-$2-$3" t0 t1 extra="" n="$4"
  mkdir -p "$dir/code"
  [[ $1 == container ]] && extra="container: {image: $image}"
  cat > "$dir/spec.yaml" <<SPEC
name: overhead-$1
workdir: code
command: ["true"]
max_parallel: $3
params: {i: [$(seq -s, 1 "$n")]}
$extra
SPEC
  t0=$(now)
  "$drover" run "$dir/spec.yaml" --store "$dir/store" --cpus 2 --foreground >/dev/null 2>"$dir/err" ||
    { cat "$dir/err" >&2; exit 1; }
  t1=$(now)
  local done
  done=$(sqlite3 "$dir/store/drover.db" "select count(*) from runs where state='succeeded'")
  [[ $done == "$n" ]] || { echo "only $done of $n runs succeeded ($1)" >&2; exit 1; }
  echo "$t1 - $t0" | bc
}

table() {  # $1: at a time (2 or 1), $2: runs
  echo "$2 runs, $1 at a time"
  printf '%-6s %10s %10s %10s %12s %10s\n' round bare_s local_s drover_s added_ms/run ratio
  for r in $(seq "$rounds"); do
    b=$(bare "$1" "$2")
    l=$(through_drover local "$r" $(($1 == 1 ? 1 : 0)) "$2")
    c=$(through_drover container "$r" $(($1 == 1 ? 1 : 0)) "$2")
    added=$(echo "scale=1; ($c - $l) * 1000 / $2" | bc)
    ratio=$(echo "scale=2; $c / $b" | bc)
    printf '%-6s %10.2f %10.2f %10.2f %12s %10s\n' "$r" "$b" "$l" "$c" "$added" "$ratio"
  done
}
table 2 "$n"
table 1 $((n / 4))
echo "per run: bare_s / runs and drover_s / runs; target drover/bare <= 1.5"
