#!/usr/bin/env bash
# Launch throughput: N trivial runs (`true`) through `drover run` and through task-spooler, with
# the same parallelism P, each from a fresh temp dir, measured in this one script.
#
#   bench/launch_throughput.sh [-p P] [-n N] [--only drover|tsp]
#
# P defaults to 2, N to 1000. The drover binary is $DROVER_BIN, else ./build/drover.
# Prints one summary line; exits non-zero when a run failed or drover did not record every run
# and attempt.
set -euo pipefail

P=2
N=1000
ONLY=""
usage() { echo "usage: $0 [-p PARALLELISM] [-n RUNS] [--only drover|tsp]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) P="${2:?-p needs a number}"; shift 2 ;;
    -n) N="${2:?-n needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs drover or tsp}"; shift 2 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
[[ "$P" =~ ^[1-9][0-9]*$ ]] || { echo "-p wants a positive number, got '$P'" >&2; exit 2; }
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "-n wants a positive number, got '$N'" >&2; exit 2; }
case "$ONLY" in ""|drover|tsp) ;; *) usage ;; esac

DROVER_BIN="${DROVER_BIN:-./build/drover}"
ROOT="$(mktemp -d "${TMPDIR:-/tmp}/drover-bench.XXXXXX")"
TSP_STARTED=0
cleanup() {
  if [[ $TSP_STARTED == 1 ]]; then
    TS_SOCKET="$ROOT/tsp/socket" tsp -K >/dev/null 2>&1 || true
  fi
  rm -rf "$ROOT"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$N" -v s="$1" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }'; }

# Runs SQL against drover's store, with the sqlite3 CLI or, lacking it, Python's sqlite3 module.
query() {
  local db="$1" sql="$2"
  if command -v sqlite3 >/dev/null; then
    sqlite3 "$db" "$sql"
  else
    /usr/bin/python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$db" "$sql"
  fi
}

FAILED=0
DROVER_S=""
TSP_S=""

run_drover() {
  if [[ ! -x "$DROVER_BIN" ]]; then
    echo "drover binary not found at $DROVER_BIN; build it or set DROVER_BIN" >&2
    exit 2
  fi
  local bin dir spec store
  bin="$(cd "$(dirname "$DROVER_BIN")" && pwd)/$(basename "$DROVER_BIN")"
  dir="$ROOT/drover"
  spec="$dir/bench.yaml"
  store="$dir/store"
  mkdir -p "$dir/work" "$store"
  {
    echo "name: bench"
    echo 'command: "true {i}"'
    echo "workdir: $dir/work"
    echo "params:"
    printf '  i: [%s]\n' "$(seq -s ', ' 0 $((N - 1)))"
    echo "max_parallel: $P"
    echo "resources: {gpus: 0, cpus: 1}"
  } >"$spec"

  local t0 t1
  t0="$(now)"
  if ! "$bin" --store "$store" run "$spec" --cpus "$P" --quiet; then
    echo "drover run failed (see above)" >&2
    FAILED=1
  fi
  t1="$(now)"
  DROVER_S="$(elapsed "$t0" "$t1")"

  local succeeded="none" attempts="none"
  if [[ -f "$store/drover.db" ]]; then
    succeeded="$(query "$store/drover.db" "select count(*) from runs where state='succeeded'")" ||
      succeeded="unreadable"
    attempts="$(query "$store/drover.db" "select count(*) from attempts")" || attempts="unreadable"
  fi
  echo "drover: $N runs in ${DROVER_S}s = $(rate "$DROVER_S") runs/s" \
       "(store: $succeeded succeeded runs, $attempts attempts)"
  if [[ "$succeeded" != "$N" || "$attempts" != "$N" ]]; then
    echo "drover recorded $succeeded succeeded runs and $attempts attempts; expected $N and $N" >&2
    FAILED=1
  fi
}

run_tsp() {
  command -v tsp >/dev/null || {
    echo "tsp not found: apt-get install task-spooler" >&2
    exit 2
  }
  local dir="$ROOT/tsp"
  mkdir -p "$dir/out"
  # A private server: its own socket, output files in the temp dir, every finished job kept so
  # the listing can be checked at the end.
  export TS_SOCKET="$dir/socket" TMPDIR="$dir/out" TS_MAXFINISHED=$((N + 1000))
  local t0 t1 last i
  t0="$(now)"
  tsp -S "$P"  # the first call starts the server
  TSP_STARTED=1
  for ((i = 0; i < N; i++)); do
    last="$(tsp true "$i")"
  done
  # Jobs start in order, so once the last one has ended at most P-1 others are still running:
  # wait on it (blocking, no CPU), then poll the listing until nothing is queued or running.
  tsp -w "$last" >/dev/null || true
  while tsp -l | awk 'NR > 1 && ($2 == "queued" || $2 == "running" || $2 == "allocating") { busy = 1 }
                      END { exit !busy }'; do
    sleep 0.01
  done
  t1="$(now)"
  TSP_S="$(elapsed "$t0" "$t1")"

  local ok
  ok="$(tsp -l | awk 'NR > 1 && $2 == "finished" && $4 == "0"' | wc -l)"
  echo "tsp:    $N runs in ${TSP_S}s = $(rate "$TSP_S") runs/s ($ok finished with exit 0)"
  if [[ "$ok" != "$N" ]]; then
    echo "tsp finished $ok jobs with exit 0; expected $N" >&2
    FAILED=1
  fi
  tsp -K >/dev/null 2>&1 || true
  TSP_STARTED=0
  unset TS_SOCKET TS_MAXFINISHED
}

echo "launch throughput: $N runs of 'true', parallelism $P, $(nproc) CPUs, $(uname -sr)"
[[ "$ONLY" == "tsp" ]] || run_drover
[[ "$ONLY" == "drover" ]] || run_tsp

if [[ -n "$DROVER_S" && -n "$TSP_S" ]]; then
  ratio="$(awk -v d="$DROVER_S" -v t="$TSP_S" 'BEGIN { printf "%.2f", (d > 0 ? t / d : 0) }')"
  echo "summary: drover $(rate "$DROVER_S") runs/s, tsp $(rate "$TSP_S") runs/s," \
       "drover/tsp throughput ratio ${ratio} (N=$N, P=$P)$([[ $FAILED == 0 ]] || echo ' INVALID: a check failed')"
fi
exit "$FAILED"
