#!/usr/bin/env bash
# Time to first render of the web UI (bench/README.md, "Web UI"), Chromium's own timing:
#   1. the experiment page of a sweep with RUNS runs (default 10,000): navigation start to the
#      runs table's first paint (performance mark drover:table-rendered);
#   2. the run page of a run whose loss has POINTS points (default 1,000,000): navigation start to
#      the curve's first draw (drover:chart-rendered).
# Each is loaded N times (default 7) in a fresh page; the median and the worst are printed.
#
#   bench/web_render.sh [-r RUNS] [-p POINTS] [-n N]
#
# Needs build/drover, build/web_fixture (built here when missing), tests/web/node_modules
# (scripts/setup.sh) and /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=10000
POINTS=1000000
N=7
while [[ $# -gt 0 ]]; do
  case "$1" in
    -r) RUNS="${2:?-r needs a number}"; shift 2 ;;
    -p) POINTS="${2:?-p needs a number}"; shift 2 ;;
    -n) N="${2:?-n needs a number}"; shift 2 ;;
    *) echo "usage: $0 [-r RUNS] [-p POINTS] [-n N]" >&2; exit 2 ;;
  esac
done
for v in "$RUNS" "$POINTS" "$N"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "RUNS, POINTS and N are positive numbers" >&2; exit 2; }
done

DROVER_BIN="${DROVER_BIN:-./build/drover}"
FIXTURE_BIN="${FIXTURE_BIN:-./build/web_fixture}"
[[ -x "$FIXTURE_BIN" ]] || cmake --build build --target web_fixture >/dev/null
[[ -d tests/web/node_modules/playwright-core ]] || { echo "run scripts/setup.sh first (npm ci in tests/web)" >&2; exit 1; }
ROOT="$(mktemp -d "${TMPDIR:-/tmp}/drover-web-bench.XXXXXX")"
SERVE_PID=""
cleanup() {
  [[ -n "$SERVE_PID" ]] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  rm -rf "$ROOT"
}
trap cleanup EXIT

echo "== filling a store: $RUNS runs, one run of $POINTS points"
ids=$("$FIXTURE_BIN" "$ROOT/store" "$RUNS" "$POINTS")
echo "$ids"
exp_id=$(sed -E 's/.*"sweep_experiment": ([0-9]+).*/\1/' <<<"$ids")
run_id=$(sed -E 's/.*"long_run": ([0-9]+).*/\1/' <<<"$ids")

port=$((20000 + RANDOM % 20000))
"$DROVER_BIN" --store "$ROOT/store" serve --listen "127.0.0.1:$port" --fake-gpus 2x16GiB \
  >"$ROOT/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 100); do
  grep -q "listening" "$ROOT/serve.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "listening" "$ROOT/serve.log" || { cat "$ROOT/serve.log" >&2; exit 1; }

node bench/web_render.mjs "http://127.0.0.1:$port" "$(cat "$ROOT/store/token")" "$exp_id" "$run_id" "$N"
