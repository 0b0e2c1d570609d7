#!/usr/bin/env bash
# Launch throughput: N trivial runs (`true {i}`) through `drover run --foreground` (the engine in
# this process), through plain `drover run` (the path a user types: it starts a daemon for the
# store and follows the experiment to its end), through the daemon (`drover serve` + `drover
# submit`, until every run is stored as succeeded) and through task-spooler, with the same
# parallelism P, measured in this one script. Folders are on the machine's real disk: under the
# project's build folder (not /tmp, which may be tmpfs), or under $BENCH_DIR.
#
#   bench/launch_throughput.sh [-p P] [-n N] [-r ROUNDS] [--only SIDE[,SIDE...]] [--keep]
#
# P defaults to 2, N to 1000, ROUNDS to 5. --keep leaves the folder (named on stderr) instead of
# deleting it at the end, so that the next invocation does not measure this one's cleanup. Each
# round measures every side once, in an order rotated from round to round, and nothing is
# deleted until the end: on ext4 creating an inode costs more while recently deleted ones are
# near (the allocator skips them one by one), so a side measured right after another's cleanup
# would pay for it. The figure per side is its median
# over the rounds. The drover binary is $DROVER_BIN, else ./build/drover.
# Prints one summary line with the ratios against task-spooler beside the targets (drover run
# --foreground 2x, plain drover run 1.5x, the daemon 1.5x); exits non-zero when a run failed or
# drover did not record every run and attempt (not when a target is missed).
set -euo pipefail

P=2
N=1000
ROUNDS=5
ONLY=""
KEEP=0
usage() {
  echo "usage: $0 [-p PARALLELISM] [-n RUNS] [-r ROUNDS] [--only SIDE[,SIDE...]] [--keep]" >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) P="${2:?-p needs a number}"; shift 2 ;;
    -n) N="${2:?-n needs a number}"; shift 2 ;;
    -r) ROUNDS="${2:?-r needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs run, plain, daemon or tsp (or several, joined with commas)}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
for v in "$P" "$N" "$ROUNDS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "-p, -n and -r want positive numbers, got '$v'" >&2; exit 2; }
done
SIDES=(run plain daemon tsp)
if [[ -n "$ONLY" ]]; then
  # One side, or several joined with commas (--only plain,daemon,tsp: the ratios need tsp).
  SIDES=()
  IFS=, read -r -a picked <<<"$ONLY"
  for side in "${picked[@]}"; do
    case "$side" in run|plain|daemon|tsp) ;; drover) side=run ;; *) usage ;; esac
    [[ " ${SIDES[*]} " == *" $side "* ]] || SIDES+=("$side")
  done
  [[ ${#SIDES[@]} -gt 0 ]] || usage
fi

DROVER_BIN="${DROVER_BIN:-./build/drover}"
if [[ " ${SIDES[*]} " != " tsp " && ! -x "$DROVER_BIN" ]]; then
  echo "drover binary not found at $DROVER_BIN; build it or set DROVER_BIN" >&2
  exit 2
fi
BIN="$(cd "$(dirname "$DROVER_BIN")" && pwd)/$(basename "$DROVER_BIN")"
if [[ " ${SIDES[*]} " == *" tsp "* ]] && ! command -v tsp >/dev/null; then
  echo "tsp not found; installing task-spooler with apt-get" >&2
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y task-spooler >&2 ||
    { $SUDO apt-get update >&2 && $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y task-spooler >&2; } ||
    { echo "could not install task-spooler (apt-get install task-spooler)" >&2; exit 2; }
fi
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${BENCH_DIR:-$HERE/build/bench-tmp}"
mkdir -p "$BASE"
# On ext4, mark the base folder as the top of a hierarchy (the Orlov allocator's TOPDIR): each
# invocation's folder then goes to a block group of its own, so the inodes an earlier invocation
# deleted (which ext4 without a journal skips one by one for minutes when it allocates) do not
# slow this one down. Every side gets the same; elsewhere chattr fails and nothing changes.
chattr +T "$BASE" 2>/dev/null || true
ROOT="$(mktemp -d "$BASE/drover-bench.XXXXXX")"
FS="$(stat -f -c %T "$ROOT")"
TSP_SOCKET=""
DAEMON_PID=""
PLAIN_STORE=""
# Plain `drover run` must start its daemon: an inherited DROVER_FOREGROUND would keep the engine
# in its own process (the run side), and DROVER_FAKE_GPUS would change the daemon's pool.
unset DROVER_FOREGROUND DROVER_FAKE_GPUS
cleanup() {
  [[ -z "$TSP_SOCKET" ]] || TS_SOCKET="$TSP_SOCKET" tsp -K >/dev/null 2>&1 || true
  [[ -z "$DAEMON_PID" ]] || kill "$DAEMON_PID" 2>/dev/null || true
  [[ -z "$PLAIN_STORE" ]] || "$BIN" --store "$PLAIN_STORE" daemon stop >/dev/null 2>&1 || true
  if ((KEEP)); then
    echo "kept $ROOT" >&2
  else
    rm -rf "$ROOT"
  fi
}
trap cleanup EXIT

# Waits $1 microseconds without starting a process (a read with a timeout on a pipe nobody writes
# to; printf -v and $EPOCHREALTIME are builtins too): the daemon side's waits must not take CPU
# from the two the daemon needs.
exec {PAUSE_FD}<> <(:)
pause_us() {
  local secs
  printf -v secs '%d.%06d' $(($1 / 1000000)) $(($1 % 1000000))
  read -r -t "$secs" -u "$PAUSE_FD" || true
}
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
declare -A SECONDS_OF  # "<side> <round>" -> seconds

# The spec both drover sides run: N runs of `true {i}`, P at a time, in an empty workdir.
write_spec() {
  local dir="$1"
  mkdir -p "$dir/work" "$dir/store"
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

# Fails the invocation unless the store holds N succeeded runs and N attempts.
check_store() {
  local side="$1" store="$2" succeeded="none" attempts="none"
  if [[ -f "$store/drover.db" ]]; then
    succeeded="$(query "$store/drover.db" "select count(*) from runs where state='succeeded'")" ||
      succeeded="unreadable"
    attempts="$(query "$store/drover.db" "select count(*) from attempts")" || attempts="unreadable"
  fi
  STORED="$succeeded succeeded runs, $attempts attempts"
  if [[ "$succeeded" != "$N" || "$attempts" != "$N" ]]; then
    echo "$side recorded $STORED; expected $N and $N" >&2
    FAILED=1
  fi
}

side_run() {
  local dir="$1" t0 t1
  write_spec "$dir"
  t0=$EPOCHREALTIME
  if ! "$BIN" --store "$dir/store" run "$dir/bench.yaml" --cpus "$P" --quiet --foreground; then
    echo "drover run failed (see above)" >&2
    FAILED=1
  fi
  t1=$EPOCHREALTIME
  TOOK="$(elapsed "$t0" "$t1")"
  check_store "drover run" "$dir/store"
}

# The path a user types: plain `drover run` (no --foreground) finds no daemon for the fresh
# store, starts one (detached, logging to the store's serve.log), submits the spec to it and
# follows the experiment until every run has ended, then returns. Timed from the command's start
# to its return. The daemon it started outlives it (it would exit after 5 minutes idle): stopped
# with `drover daemon stop` after the clock has stopped, so no later side shares the CPUs with it.
side_plain() {
  local dir="$1" t0 t1
  write_spec "$dir"
  PLAIN_STORE="$dir/store"
  t0=$EPOCHREALTIME
  if ! "$BIN" --store "$dir/store" run "$dir/bench.yaml" --cpus "$P" --quiet; then
    echo "plain drover run failed (see above and $dir/store/serve.log)" >&2
    FAILED=1
  fi
  t1=$EPOCHREALTIME
  TOOK="$(elapsed "$t0" "$t1")"
  if ! "$BIN" --store "$dir/store" daemon stop >/dev/null; then
    echo "drover daemon stop failed for $dir/store" >&2
    FAILED=1
  fi
  PLAIN_STORE=""
  check_store "plain drover run" "$dir/store"
}

side_daemon() {
  local dir="$1" store="$1/store" t0 t1 i done_runs=0 json
  write_spec "$dir"
  t0=$EPOCHREALTIME
  "$BIN" --store "$store" serve --listen 127.0.0.1:0 --cpus "$P" >"$dir/serve.log" 2>&1 &
  DAEMON_PID=$!
  # Ready once daemon.json names this daemon. Looked for and waited with bash builtins only: a
  # process per look (grep, sleep) would take CPU from the two the daemon needs.
  for ((i = 0; i < 4000; i++)); do
    json=""
    [[ ! -s "$store/daemon.json" ]] || IFS= read -r -d '' json <"$store/daemon.json" || true
    [[ "$json" == *"\"pid\":$DAEMON_PID"* ]] && break
    pause_us 2000
  done
  if ! "$BIN" --store "$store" submit "$dir/bench.yaml" >/dev/null 2>&1; then
    echo "drover submit failed (see $dir/serve.log)" >&2
    FAILED=1
  fi
  # Until every run is stored as ended: the daemon's own record, read as any script would, through
  # one sqlite3 process kept open (a process per look, with the date, awk and sleep around it,
  # took about a tenth of the CPU the daemon needs). Looks are spaced by the pace between the last
  # two (the next at half the time the rest should take at that pace, between 5 and 200 ms): a
  # dozen or so in all, the last within 5 ms of the end, as tsp's side waits (blocked on its last
  # job, then a look every 10 ms).
  if command -v sqlite3 >/dev/null; then
    coproc LOOK { exec sqlite3 "$store/drover.db" 2>/dev/null; }
  else
    coproc LOOK { exec /usr/bin/python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for sql in sys.stdin:
    print(db.execute(sql).fetchone()[0], flush=True)' "$store/drover.db" 2>/dev/null; }
  fi
  local last_t=0 last_d=0 t w
  for ((i = 0; i < 30000; i++)); do
    done_runs=0
    echo "select count(*) from runs where state in ('succeeded', 'failed', 'cancelled');" \
      >&"${LOOK[1]}" && IFS= read -r -t 10 done_runs <&"${LOOK[0]}" || done_runs=0
    [[ "$done_runs" == "$N" ]] && break
    t="${EPOCHREALTIME/./}"
    w=20000
    if ((last_t > 0 && done_runs > last_d && t > last_t)); then
      w=$(((N - done_runs) * (t - last_t) / (done_runs - last_d) / 2))
    fi
    ((w < 5000)) && w=5000
    ((w > 200000)) && w=200000
    last_t=$t
    last_d=$done_runs
    pause_us "$w"
  done
  t1=$EPOCHREALTIME
  TOOK="$(elapsed "$t0" "$t1")"
  kill "$LOOK_PID" 2>/dev/null || true
  wait "$LOOK_PID" 2>/dev/null || true
  kill "$DAEMON_PID" 2>/dev/null || true
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=""
  check_store "the daemon" "$store"
}

side_tsp() {
  local dir="$1" t0 t1 last i ok
  mkdir -p "$dir/out"
  # A private server: its own socket, output files in the bench folder, every finished job kept
  # so the listing can be checked at the end.
  TSP_SOCKET="$dir/socket"
  export TS_SOCKET="$TSP_SOCKET" TMPDIR="$dir/out" TS_MAXFINISHED=$((N + 1000))
  t0=$EPOCHREALTIME
  tsp -S "$P"  # the first call starts the server
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
  t1=$EPOCHREALTIME
  TOOK="$(elapsed "$t0" "$t1")"
  ok="$(tsp -l | awk 'NR > 1 && $2 == "finished" && $4 == "0"' | wc -l)"
  STORED="$ok finished with exit 0"
  if [[ "$ok" != "$N" ]]; then
    echo "tsp finished $ok jobs with exit 0; expected $N" >&2
    FAILED=1
  fi
  tsp -K >/dev/null 2>&1 || true
  TSP_SOCKET=""
  unset TS_SOCKET TS_MAXFINISHED TMPDIR
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "launch throughput: $N runs of 'true', parallelism $P, $ROUNDS rounds, $(nproc) CPUs," \
     "$(uname -sr), folders on $FS ($BASE)"
for ((r = 0; r < ROUNDS; r++)); do
  n=${#SIDES[@]}
  for ((k = 0; k < n; k++)); do
    side="${SIDES[$(((k + r) % n))]}"
    "side_$side" "$ROOT/$side-$r"
    SECONDS_OF["$side $r"]="$TOOK"
    printf '  round %d %-6s %4d runs in %6ss = %7s runs/s (%s)\n' "$((r + 1))" "$side" "$N" \
      "$TOOK" "$(rate "$TOOK")" "$STORED"
  done
done

declare -A MEDIAN
for side in "${SIDES[@]}"; do
  all=()
  for ((r = 0; r < ROUNDS; r++)); do all+=("${SECONDS_OF["$side $r"]}"); done
  MEDIAN[$side]="$(median "${all[@]}")"
done
ratio() { awk -v d="$1" -v t="${MEDIAN[tsp]}" 'BEGIN { printf "%.2f", (d > 0 ? t / d : 0) }'; }
line="summary ($FS, medians of $ROUNDS):"
for side in "${SIDES[@]}"; do line+=" $side $(rate "${MEDIAN[$side]}") runs/s;"; done
if [[ -n "${MEDIAN[tsp]:-}" ]]; then
  [[ -z "${MEDIAN[run]:-}" ]] || line+=" run --foreground $(ratio "${MEDIAN[run]}")x tsp (target 2x);"
  [[ -z "${MEDIAN[plain]:-}" ]] || line+=" plain $(ratio "${MEDIAN[plain]}")x tsp (target 1.5x);"
  [[ -z "${MEDIAN[daemon]:-}" ]] || line+=" daemon $(ratio "${MEDIAN[daemon]}")x tsp (target 1.5x);"
fi
echo "${line%;} (N=$N, P=$P)$([[ $FAILED == 0 ]] || echo ' INVALID: a check failed')"
exit "$FAILED"
