#!/usr/bin/env bash
# Every scheduling policy side by side on one trace window (bench/README.md, "Scheduling"), next
# to SRTF with oracle durations and the lower bound, through `drover sim --json`.
#
#   bench/sim.sh [--from 2017-10-02] [--to 2017-10-16] [--cluster 56x8] [--trace FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=../shared/data/traces/philly-2017-sep-oct.csv
FROM=2017-10-02
TO=2017-10-16
CLUSTER=56x8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --from) FROM="${2:?}"; shift 2 ;;
    --to) TO="${2:?}"; shift 2 ;;
    --cluster) CLUSTER="${2:?}"; shift 2 ;;
    --trace) TRACE="${2:?}"; shift 2 ;;
    *) echo "usage: $0 [--from DATE] [--to DATE] [--cluster NxG] [--trace FILE]" >&2; exit 2 ;;
  esac
done
DROVER_BIN="${DROVER_BIN:-./build/drover}"
[[ -f "$TRACE" ]] || { echo "no trace $TRACE" >&2; exit 1; }
echo "jobs submitted $FROM..$TO of $TRACE on $CLUSTER"
printf '%-16s %7s %9s %9s %10s %9s %8s %6s %11s %9s %6s %8s\n' policy jobs avg_jct_h p99_jct_h avg_queue_h slowdown makespan util preemptions ftf_w/b jain wall_s
run() {
  local name="$1"; shift
  local start end out
  start=$(date +%s.%N)
  out=$("$DROVER_BIN" sim --trace "$TRACE" --from "$FROM" --to "$TO" --cluster "$CLUSTER" --json "$@")
  end=$(date +%s.%N)
  /usr/bin/python3 - "$name" "$out" "$start" "$end" <<'PY'
import json, sys
name, out, start, end = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"{name:16} {out['jobs']:7d} {out['avg_jct_s']/3600:9.2f} {out['p99_jct_s']/3600:9.1f} "
      f"{out['avg_queue_s']/3600:10.3f} {out['mean_bounded_slowdown']:9.2f} "
      f"{out['makespan_s']/3600:7.0f}h {out['utilization']:6.3f} {out['preemptions']:11d} "
      f"{out['fairness_max_over_min']:9.2f} {out['fairness_jain']:6.3f} {end-start:8.1f}")
if name == "srtf-oracle":
    print(f"{'lower bound':16} {out['jobs']:7d} {out['lower_bound_avg_jct_s']/3600:9.2f}")
PY
}
for p in fifo priority las srtf gittins default; do run "$p" --policy "$p"; done
run srtf-oracle --policy srtf --oracle
