#!/usr/bin/env bash
# Daemon API under load, and idle: `drover serve` holding N queued runs answering C concurrent
# clients (wrk) for D seconds, then a fresh idle daemon's RSS and CPU sampled every second for D
# seconds, each from a fresh temp dir, measured in this one script.
#
#   bench/api_load.sh [-d SECONDS] [-c CONNECTIONS] [-n RUNS] [-t WRK_THREADS] [--only load|idle]
#
# D defaults to 30, C to 50, N to 5000, wrk threads to 2. The drover binary is $DROVER_BIN,
# else ./build/drover. Needs wrk (installed with apt-get when missing) and the sqlite3 CLI (it
# falls back to /usr/bin/python3's sqlite3 module). Prints the figures beside their targets;
# exits non-zero when a check fails (a non-2xx answer, a socket error, a run count that is off),
# not when a target is missed.
set -euo pipefail

D=30
C=50
N=5000
T=2
ONLY=""
usage() {
  echo "usage: $0 [-d SECONDS] [-c CONNECTIONS] [-n RUNS] [-t WRK_THREADS] [--only load|idle]" >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    -d) D="${2:?-d needs a number}"; shift 2 ;;
    -c) C="${2:?-c needs a number}"; shift 2 ;;
    -n) N="${2:?-n needs a number}"; shift 2 ;;
    -t) T="${2:?-t needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs load or idle}"; shift 2 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
for v in "$D" "$C" "$N" "$T"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "-d, -c, -n and -t want positive numbers, got '$v'" >&2; exit 2; }
done
((N > 8)) || { echo "-n wants more than 8 runs (8 run on the 8 fake GPUs), got $N" >&2; exit 2; }
((T <= C)) || T="$C"
case "$ONLY" in ""|load|idle) ;; *) usage ;; esac

# Targets, printed next to the figures.
P99_TARGET_MS=50
RSS_TARGET_MIB=30
CPU_TARGET_PCT=1

DROVER_BIN="${DROVER_BIN:-./build/drover}"
if [[ ! -x "$DROVER_BIN" ]]; then
  echo "drover binary not found at $DROVER_BIN; build it or set DROVER_BIN" >&2
  exit 2
fi
BIN="$(cd "$(dirname "$DROVER_BIN")" && pwd)/$(basename "$DROVER_BIN")"
LUA="$(cd "$(dirname "$0")" && pwd)/api_load.lua"
[[ -f "$LUA" ]] || { echo "missing $LUA" >&2; exit 2; }

if [[ -z "$ONLY" || "$ONLY" == load ]] && ! command -v wrk >/dev/null; then
  echo "wrk not found; installing it with apt-get" >&2
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y wrk >&2 ||
    { $SUDO apt-get update >&2 && $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y wrk >&2; } ||
    { echo "could not install wrk (apt-get install wrk)" >&2; exit 2; }
fi

ROOT="$(mktemp -d "${TMPDIR:-/tmp}/drover-apiload.XXXXXX")"
DAEMON_PID=""
DAEMON_STORE=""

# Runs SQL against a store, with the sqlite3 CLI or, lacking it, Python's sqlite3 module; one
# value per line.
query() {
  local db="$1" sql="$2"
  if command -v sqlite3 >/dev/null; then
    sqlite3 "$db" "$sql"
  else
    /usr/bin/python3 -c 'import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(*row, sep="|")' "$db" "$sql"
  fi
}

# SIGTERM to the daemon, wait for it (up to 20 s, then SIGKILL); then SIGKILL the process group
# of every attempt the store still has open: by design a stopped daemon leaves its runs running
# for the next one to adopt.
stop_daemon() {
  [[ -n "$DAEMON_PID" ]] || return 0
  local i
  kill -TERM "$DAEMON_PID" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    echo "daemon $DAEMON_PID still up 20 s after SIGTERM; SIGKILL" >&2
    kill -KILL "$DAEMON_PID" 2>/dev/null || true
  fi
  wait "$DAEMON_PID" 2>/dev/null || true
  if [[ -f "$DAEMON_STORE/drover.db" ]]; then
    local pid
    for pid in $(query "$DAEMON_STORE/drover.db" "select pid from attempts where ended=0 and pid>0" 2>/dev/null); do
      kill -KILL -- "-$pid" 2>/dev/null || true
    done
  fi
  DAEMON_PID=""
  DAEMON_STORE=""
}

cleanup() {
  stop_daemon
  rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts `drover serve` on a free loopback port over STORE (extra flags after it); sets
# DAEMON_PID, PORT and TOKEN once daemon.json names the process.
start_daemon() {
  local store="$1"; shift
  stop_daemon  # a previous phase that stopped early
  mkdir -p "$store"
  "$BIN" --store "$store" serve --listen 127.0.0.1:0 "$@" >"$store.log" 2>&1 &
  DAEMON_PID=$!
  DAEMON_STORE="$store"
  local i json=""
  for ((i = 0; i < 200; i++)); do
    if [[ -s "$store/daemon.json" && -s "$store/token" ]]; then
      json="$(cat "$store/daemon.json")"
      [[ "$json" == *"\"pid\":$DAEMON_PID"* ]] && break
    fi
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.05
  done
  if [[ "$json" != *"\"pid\":$DAEMON_PID"* ]]; then
    echo "drover serve did not come up (log: $(cat "$store.log"))" >&2
    exit 1
  fi
  PORT="$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' <<<"$json")"
  TOKEN="$(cat "$store/token")"
}

FAILED=0
fail() { echo "CHECK FAILED: $*" >&2; FAILED=1; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v < t ? "met" : "MISSED") }'; }

LOAD_SUMMARY=""
IDLE_SUMMARY=""

run_load() {
  local dir="$ROOT/load" store spec
  store="$dir/store"
  spec="$dir/apiload.yaml"
  mkdir -p "$dir/work"
  {
    echo "name: apiload"
    echo 'command: "sleep 600"'
    echo "workdir: $dir/work"
    echo "params:"
    printf '  i: [%s]\n' "$(seq -s ', ' 0 $((N - 1)))"
    echo "resources: {gpus: 1}"
  } >"$spec"

  # --cpus 8: each run also takes one CPU slot (the default), and the slot count would otherwise
  # be this machine's CPU count; with 8, the 8 fake GPUs decide, on any machine.
  start_daemon "$store" --fake-gpus 8x80GiB --cpus 8
  local submitted
  submitted="$("$BIN" --store "$store" submit "$spec" 2>&1)" ||
    { fail "drover submit failed: $submitted"; return; }

  local i counts="" want="queued|$((N - 8))
running|8"
  for ((i = 0; i < 300; i++)); do
    counts="$(query "$store/drover.db" "select state, count(*) from runs group by state order by state")"
    [[ "$counts" == "$want" ]] && break
    sleep 0.1
  done
  if [[ "$counts" != "$want" ]]; then
    fail "expected $((N - 8)) queued and 8 running runs, the store has: $(tr '\n' ' ' <<<"$counts")"
    return
  fi
  local api="http://127.0.0.1:$PORT/api/v1" body
  body="$(curl -sf -H "Authorization: Bearer $TOKEN" "$api/experiments/1")" ||
    { fail "GET /experiments/1 failed before the load"; return; }
  [[ "$body" == *"\"queued\":$((N - 8)),"* ]] ||
    { fail "GET /experiments/1 does not count $((N - 8)) queued runs"; return; }
  local rss_before
  rss_before="$(awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status")"

  echo "load: $N runs (8 running, $((N - 8)) queued), $C connections, $T wrk threads, ${D}s"
  local out
  out="$(wrk -t "$T" -c "$C" -d "${D}s" --timeout 10s --latency -s "$LUA" "http://127.0.0.1:$PORT" \
           -- "$TOKEN" "$N" 1 mix 2>&1)" || { echo "$out" >&2; fail "wrk failed"; return; }
  grep -v '^RESULT ' <<<"$out" | sed 's/^/  /'
  local rss_after
  rss_after="$(awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status")"

  local result
  result="$(grep '^RESULT ' <<<"$out" | tail -1)"
  [[ -n "$result" ]] || { fail "wrk printed no RESULT line"; return; }
  get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$result"; }
  local rps p50 p99 max non2xx errs
  rps="$(get rps)"
  p50="$(awk -v u="$(get p50_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
  p99="$(awk -v u="$(get p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
  max="$(awk -v u="$(get max_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
  non2xx="$(get non2xx)"
  errs=$(($(get connect) + $(get read) + $(get write) + $(get timeout)))
  ((non2xx == 0)) || fail "$non2xx answers outside 2xx"
  ((errs == 0)) || fail "$errs socket errors (connect $(get connect), read $(get read), write $(get write), timeout $(get timeout))"
  (($(get requests) > 0)) || fail "no request completed"
  echo "  daemon RSS: $((rss_before / 1024)) MiB before the load, $((rss_after / 1024)) MiB after"
  LOAD_SUMMARY="load: ${rps} req/s, p50 ${p50} ms, p99 ${p99} ms (target < ${P99_TARGET_MS} ms: $(verdict "$p99" "$P99_TARGET_MS")), max ${max} ms, non-2xx ${non2xx}, socket errors ${errs}"
  echo "$LOAD_SUMMARY"
  stop_daemon
}

run_idle() {
  local store="$ROOT/idle/store"
  start_daemon "$store" --fake-gpus 8x80GiB
  sleep 2  # let start-up finish before sampling
  echo "idle: fresh daemon, 8 fake GPUs, nothing queued; RSS and CPU every second for ${D}s"
  local hz pid="$DAEMON_PID"
  hz="$(getconf CLK_TCK)"
  # utime + stime (fields 14 and 15), counted after the ')' that ends the command name.
  ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }'; }
  rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
  local samples="" t0 c0 t1 c1 i
  t0="$(date +%s.%N)"
  c0="$(ticks)"
  for ((i = 0; i < D; i++)); do
    sleep 1
    kill -0 "$pid" 2>/dev/null || { fail "the idle daemon exited"; return; }
    t1="$(date +%s.%N)"
    c1="$(ticks)"
    samples+="$(awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v r="$(rss_kib)" \
                  'BEGIN { printf "%.4f %d", (c1 - c0) / hz / (t1 - t0) * 100, r }')"$'\n'
    t0="$t1"
    c0="$c1"
  done
  local stats
  stats="$(awk 'NF == 2 { n++; cs += $1; if ($1 > cm) cm = $1; rs += $2; if ($2 > rm) rm = $2 }
                END { printf "%.3f %.2f %.1f %.1f", cs / n, cm, rs / n / 1024, rm / 1024 }' <<<"$samples")"
  local cpu_mean cpu_max rss_mean rss_max
  read -r cpu_mean cpu_max rss_mean rss_max <<<"$stats"
  IDLE_SUMMARY="idle: RSS mean ${rss_mean} MiB, max ${rss_max} MiB (target < ${RSS_TARGET_MIB} MiB: $(verdict "$rss_max" "$RSS_TARGET_MIB")); CPU mean ${cpu_mean}%, max ${cpu_max}% (target mean < ${CPU_TARGET_PCT}%: $(verdict "$cpu_mean" "$CPU_TARGET_PCT"); one clock tick is $(awk -v hz="$hz" 'BEGIN { printf "%.0f", 100 / hz }')% of a 1 s sample)"
  echo "$IDLE_SUMMARY"
  stop_daemon
}

echo "daemon API under load and idle: $(nproc) CPUs, $(uname -sr), $BIN"
[[ "$ONLY" == "idle" ]] || run_load
[[ "$ONLY" == "load" ]] || run_idle

echo "summary:"
[[ -z "$LOAD_SUMMARY" ]] || echo "  $LOAD_SUMMARY"
[[ -z "$IDLE_SUMMARY" ]] || echo "  $IDLE_SUMMARY"
[[ $FAILED == 0 ]] || echo "  INVALID: a check failed"
exit "$FAILED"
