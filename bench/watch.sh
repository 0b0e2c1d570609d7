#!/usr/bin/env bash
# Watching costs, measured in one run (bench/README.md, "Watching"):
#   1. detector cost: metric points per second one core checks (watch_bench detectors);
#   2. metric ingestion through the daemon: R runs at once (default 8), each printing L JSON lines
#      of two metrics (default 50,000) as fast as Python can, through `drover serve` (tail, parse,
#      detectors, SQLite), timed from the first attempt's start to the last one's end as the store
#      records them; against
#   3. the raw SQLite insert rate of the same rows (watch_bench raw-sqlite) in the same run.
#
#   bench/watch.sh [-r RUNS] [-l LINES]
#
# Needs build/drover and build/watch_bench (cmake --build build --target watch_bench).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=8
LINES=50000
while [[ $# -gt 0 ]]; do
  case "$1" in
    -r) RUNS="${2:?-r needs a number}"; shift 2 ;;
    -l) LINES="${2:?-l needs a number}"; shift 2 ;;
    *) echo "usage: $0 [-r RUNS] [-l LINES]" >&2; exit 2 ;;
  esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$LINES" =~ ^[1-9][0-9]*$ ]] || { echo "RUNS and LINES are positive numbers" >&2; exit 2; }

DROVER_BIN="${DROVER_BIN:-./build/drover}"
BENCH_BIN="${BENCH_BIN:-./build/watch_bench}"
[[ -x "$BENCH_BIN" ]] || cmake --build build --target watch_bench >/dev/null
ROOT="$(mktemp -d "${TMPDIR:-/tmp}/drover-watch-bench.XXXXXX")"
SERVE_PID=""
cleanup() {
  [[ -n "$SERVE_PID" ]] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  rm -rf "$ROOT"
}
trap cleanup EXIT

echo "== detectors (one core)"
"$BENCH_BIN" detectors 2000000

echo "== ingestion through the daemon: $RUNS runs x $LINES lines x 2 metrics"
mkdir -p "$ROOT/code"
cat >"$ROOT/code/emit.py" <<'EOF'
import sys
n = int(sys.argv[1])
w = sys.stdout.write
for i in range(n):
    w('{"step": %d, "loss": %.6f, "acc": %.6f}\n' % (i, 1.0 / (i + 1), i * 1e-6))
EOF
params=$(seq -s, 1 "$RUNS")
cat >"$ROOT/spec.yaml" <<EOF
name: ingest
workdir: code
command: /usr/bin/python3 emit.py $LINES {i}
params: {i: [$params]}
resources: {gpus: 0, cpus: 1}
EOF
"$DROVER_BIN" serve --store "$ROOT/store" --listen 127.0.0.1:0 --cpus "$RUNS" \
  >"$ROOT/serve.out" 2>"$ROOT/serve.err" &
SERVE_PID=$!
for _ in $(seq 200); do [[ -s "$ROOT/store/daemon.json" ]] && break; sleep 0.05; done
"$DROVER_BIN" submit "$ROOT/spec.yaml" --store "$ROOT/store" >/dev/null
DB="$ROOT/store/drover.db"
while :; do
  left=$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE state NOT IN ('succeeded','failed','cancelled')")
  [[ "$left" == 0 ]] && break
  sleep 0.1
done
read -r points span_ms failed < <(sqlite3 -separator ' ' "$DB" \
  "SELECT (SELECT count(*) FROM metrics),
          (SELECT max(ended_ms) - min(started_ms) FROM attempts),
          (SELECT count(*) FROM runs WHERE state != 'succeeded')")
expected=$((RUNS * LINES * 2))
if [[ "$failed" != 0 || "$points" != "$expected" ]]; then
  echo "ingestion: $failed runs failed, $points of $expected points stored" >&2
  exit 1
fi
ingest_rate=$(awk -v p="$points" -v ms="$span_ms" 'BEGIN { printf "%.0f", p / (ms / 1000) }')
echo "{\"points\": $points, \"seconds\": $(awk -v ms="$span_ms" 'BEGIN { printf "%.3f", ms / 1000 }'), \"points_per_s\": $ingest_rate}"

echo "== raw SQLite inserts of the same rows"
raw=$("$BENCH_BIN" raw-sqlite "$ROOT/raw.db" "$RUNS" "$LINES")
echo "$raw"
raw_rate=$(sed -E 's/.*"rows_per_s": ([0-9]+).*/\1/' <<<"$raw")
awk -v a="$ingest_rate" -v b="$raw_rate" \
  'BEGIN { printf "ingestion / raw SQLite = %.2f (target >= 0.5)\n", a / b }'
