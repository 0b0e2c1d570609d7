#!/usr/bin/env bash
# Launch throughput: N trivial runs (`true`) through `drover run` (the engine in the foreground),
# through the daemon (`drover serve` + `drover submit`, until every run is stored as succeeded)
# and through task-spooler, with the same parallelism P, each from a fresh folder, measured in
# this one script. The folders are on the machine's real disk: under the project's build folder
# (not /tmp, which may be tmpfs), or under $BENCH_DIR.
#
#   bench/launch_throughput.sh [-p P] [-n N] [--only run|daemon|tsp]
#
# P defaults to 2, N to 1000. The drover binary is $DROVER_BIN, else ./build/drover.
# Prints one summary line with the ratios against task-spooler and the targets (drover run 2x,
# the daemon 1.5x); exits non-zero when a run failed or drover did not record every run and
# attempt (not when a target is missed).
set -euo pipefail

P=2
N=1000
ONLY=""
usage() { echo "usage: $0 [-p PARALLELISM] [-n RUNS] [--only run|daemon|tsp]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) P="${2:?-p needs a number}"; shift 2 ;;
    -n) N="${2:?-n needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs run, daemon or tsp}"; shift 2 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
[[ "$P" =~ ^[1-9][0-9]*$ ]] || { echo "-p wants a positive number, got '$P'" >&2; exit 2; }
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "-n wants a positive number, got '$N'" >&2; exit 2; }
case "$ONLY" in ""|run|daemon|tsp) ;; drover) ONLY=run ;; *) usage ;; esac

DROVER_BIN="${DROVER_BIN:-./build/drover}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${BENCH_DIR:-$HERE/build/bench-tmp}"
mkdir -p "$BASE"
ROOT="$(mktemp -d "$BASE/drover-bench.XXXXXX")"
FS="$(stat -f -c %T "$ROOT")"
TSP_STARTED=0
DAEMON_PID=""
cleanup() {
  if [[ $TSP_STARTED == 1 ]]; then
    TS_SOCKET="$ROOT/tsp/socket" tsp -K >/dev/null 2>&1 || true
  fi
  [[ -z "$DAEMON_PID" ]] || kill "$DAEMON_PID" 2>/dev/null || true
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
DAEMON_S=""
TSP_S=""

# The spec both drover sides run: N runs of `true {i}`, P at a time, in an empty workdir.
write_spec() {
  local dir="$1"
  mkdir -p "$dir/work"
  {
    echo "name: bench"
    echo 'command: "true {i}"'
    echo "workdir: $dir/work"
    echo "params:"
    printf '  i: [%s]\n' "$(seq -s ', ' 0 $((N - 1)))"
    echo "max_parallel: $P"
    echo "resources: {gpus: 0, cpus: 1}"
  } >"$dir/bench.yaml"
}

# Checks the store holds N succeeded runs and N attempts; prints "<succeeded> <attempts>".
check_store() {
  local store="$1" succeeded="none" attempts="none"
  if [[ -f "$store/drover.db" ]]; then
    succeeded="$(query "$store/drover.db" "select count(*) from runs where state='succeeded'")" ||
      succeeded="unreadable"
    attempts="$(query "$store/drover.db" "select count(*) from attempts")" || attempts="unreadable"
  fi
  echo "$succeeded $attempts"
}

drover_bin() {
  if [[ ! -x "$DROVER_BIN" ]]; then
    echo "drover binary not found at $DROVER_BIN; build it or set DROVER_BIN" >&2
    exit 2
  fi
  echo "$(cd "$(dirname "$DROVER_BIN")" && pwd)/$(basename "$DROVER_BIN")"
}

run_daemon() {
  local bin dir store
  bin="$(drover_bin)"
  dir="$ROOT/daemon"
  store="$dir/store"
  write_spec "$dir"
  mkdir -p "$store"
  local t0 t1
  t0="$(now)"
  "$bin" --store "$store" serve --listen 127.0.0.1:0 --cpus "$P" >"$dir/serve.log" 2>&1 &
  DAEMON_PID=$!
  local i
  for ((i = 0; i < 400; i++)); do
    [[ -s "$store/daemon.json" ]] && grep -q "\"pid\":$DAEMON_PID" "$store/daemon.json" && break
    sleep 0.01
  done
  if ! "$bin" --store "$store" submit "$dir/bench.yaml" >/dev/null; then
    echo "drover submit failed (see above)" >&2
    FAILED=1
  fi
  # Until every run is stored as succeeded (or failed): the daemon's own record, read as any
  # script would read it.
  local done_runs=0
  for ((i = 0; i < 30000; i++)); do
    done_runs="$(query "$store/drover.db" "select count(*) from runs where state in ('succeeded','failed','cancelled')" 2>/dev/null || echo 0)"
    [[ "$done_runs" == "$N" ]] && break
    sleep 0.02  # each look is a sqlite3 process: look often enough, not so often it slows the daemon
  done
  t1="$(now)"
  DAEMON_S="$(elapsed "$t0" "$t1")"
  kill "$DAEMON_PID" 2>/dev/null || true
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=""
  local counts succeeded attempts
  counts="$(check_store "$store")"
  succeeded="${counts% *}"
  attempts="${counts#* }"
  echo "daemon: $N runs in ${DAEMON_S}s = $(rate "$DAEMON_S") runs/s" \
       "(store: $succeeded succeeded runs, $attempts attempts)"
  if [[ "$succeeded" != "$N" || "$attempts" != "$N" ]]; then
    echo "the daemon recorded $succeeded succeeded runs and $attempts attempts; expected $N and $N" >&2
    FAILED=1
  fi
}

run_drover() {
  local bin dir spec store
  bin="$(drover_bin)"
  dir="$ROOT/drover"
  spec="$dir/bench.yaml"
  store="$dir/store"
  write_spec "$dir"
  mkdir -p "$store"

  local t0 t1
  t0="$(now)"
  if ! "$bin" --store "$store" run "$spec" --cpus "$P" --quiet; then
    echo "drover run failed (see above)" >&2
    FAILED=1
  fi
  t1="$(now)"
  DROVER_S="$(elapsed "$t0" "$t1")"

  local counts succeeded attempts
  counts="$(check_store "$store")"
  succeeded="${counts% *}"
  attempts="${counts#* }"
  echo "run:    $N runs in ${DROVER_S}s = $(rate "$DROVER_S") runs/s" \
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

echo "launch throughput: $N runs of 'true', parallelism $P, $(nproc) CPUs, $(uname -sr)," \
     "folders on $FS ($BASE)"
[[ -n "$ONLY" && "$ONLY" != "run" ]] || run_drover
[[ -n "$ONLY" && "$ONLY" != "daemon" ]] || run_daemon
[[ -n "$ONLY" && "$ONLY" != "tsp" ]] || run_tsp

ratio() { awk -v d="$1" -v t="$TSP_S" 'BEGIN { printf "%.2f", (d > 0 ? t / d : 0) }'; }
if [[ -n "$TSP_S" && ( -n "$DROVER_S" || -n "$DAEMON_S" ) ]]; then
  line="summary ($FS): tsp $(rate "$TSP_S") runs/s"
  [[ -z "$DROVER_S" ]] || line+="; drover run $(rate "$DROVER_S") runs/s = $(ratio "$DROVER_S")x tsp (target 2x)"
  [[ -z "$DAEMON_S" ]] || line+="; daemon $(rate "$DAEMON_S") runs/s = $(ratio "$DAEMON_S")x tsp (target 1.5x)"
  echo "$line (N=$N, P=$P)$([[ $FAILED == 0 ]] || echo ' INVALID: a check failed')"
fi
exit "$FAILED"
