#!/usr/bin/env bash
# The openb packing comparison (bench/README.md, "Scheduling"; docs/scheduling.md, "Packing"):
# Alibaba's openb pods placed onto its 1,213 GPU nodes, none leaving, until the first pod that
# cannot be placed, by first-fit, best-fit and drover's scheduler (sched::Decide), in the trace's
# order and in N shuffled orders, through `drover sim --format openb --json`. Prints a Markdown
# table.
#
#   bench/openb.sh [--seeds 10] [--trace PODS.csv] [--nodes NODES.csv]
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=../shared/data/traces/openb_pod_list_default.csv
NODES=../shared/data/traces/openb_node_list_gpu_node.csv
SEEDS=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) SEEDS="${2:?}"; shift 2 ;;
    --trace) TRACE="${2:?}"; shift 2 ;;
    --nodes) NODES="${2:?}"; shift 2 ;;
    *) echo "usage: $0 [--seeds N] [--trace PODS.csv] [--nodes NODES.csv]" >&2; exit 2 ;;
  esac
done
DROVER_BIN="${DROVER_BIN:-./build/drover}"
[[ -f "$TRACE" ]] || { echo "no pod list $TRACE" >&2; exit 1; }
[[ -f "$NODES" ]] || { echo "no node list $NODES" >&2; exit 1; }
start=$(date +%s.%N)
out=$("$DROVER_BIN" sim --format openb --trace "$TRACE" --nodes "$NODES" --packer all \
      --seeds "$SEEDS" --json)
end=$(date +%s.%N)
/usr/bin/python3 - "$out" "$start" "$end" <<'PY'
import json, sys
out, start, end = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"{out['pods']} GPU pods ({100 * out['gpu_requested_milli'] / out['gpu_capacity_milli']:.1f}% "
      f"of the GPUs asked for) on {out['nodes']} nodes, {out['gpus']} GPUs; "
      f"{out['seeds']} shuffled orders (seeds 1-{out['seeds']}); wall {end - start:.1f} s\n")
print("| packer | order | pods placed | GPU unallocated | GPU fragmented (FGD) | first pod not placed |")
print("|---|---|---|---|---|---|")
def pod(p):
    if p is None:
        return "none"
    share = "whole" if p["gpu_milli"] == 1000 else f"{p['gpu_milli']}m"
    return (f"#{p['id']}: {p['gpus']} GPU {share}, {p['cpu_milli'] / 1000:.3g} CPU, "
            f"{p['memory_mib'] / 1024:.3g} GiB")
def spread(s, pct=True):
    k = 100 if pct else 1
    d = 2 if pct else 0
    return (f"{k * s['mean']:.{d}f}{'%' if pct else ''} ± {k * s['sd']:.{d}f} "
            f"({k * s['min']:.{d}f}-{k * s['max']:.{d}f})")
for p in out["packers"]:
    t = p["trace_order"]
    print(f"| {p['packer']} | trace | {t['pods_placed']} | {100 * t['unallocated_share']:.2f}% | "
          f"{100 * t['fragmented_share']:.2f}% | {pod(t['failed_pod'])} |")
    s = p["shuffled"]
    if s["runs"]:
        gpus = sum(1 for r in s["runs"] if r["failed_pod"] and r["failed_pod"]["gpu_milli"] == 1000)
        print(f"| | shuffled x{len(s['runs'])} | {spread(s['pods_placed'], False)} | "
              f"{spread(s['unallocated_share'])} | {spread(s['fragmented_share'])} | "
              f"a whole-GPU pod in {gpus} of {len(s['runs'])} |")
PY
