#!/usr/bin/env bash
# 200 trivial runs through drover on Slurm against the same 200 jobs submitted with plain
# `sbatch --wrap` and polled with one squeue a second (what a careful script does), on the same
# cluster in the same invocation: drover's end-to-end time as a ratio of plain sbatch's, and the
# Slurm commands drover issued per run (sbatch, squeue, sacct, scancel; the probe job included).
#   scripts/slurm-local.sh start     # as root: the one-node test cluster (tests/slurm/README.md)
#   bench/slurm_throughput.sh [-n RUNS] [-r ROUNDS]
# The store is on the real disk (build/bench-tmp), as users run it. Target: ratio <= 1.1.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
drover="${DROVER_BIN:-$here/build/drover}"
n=200
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    *) echo "usage: $0 [-n RUNS] [-r ROUNDS]" >&2; exit 2 ;;
  esac
done
sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|allocated' ||
  { echo "no Slurm answers here: scripts/slurm-local.sh start (as root)" >&2; exit 1; }
base="${BENCH_DIR:-$here/build/bench-tmp}/slurm-$$"
mkdir -p "$base"
trap 'rm -rf "$base"' EXIT
now() { date +%s.%N; }
idle() {  # waits until Slurm runs nothing, so one side does not measure the other's tail
  while [[ -n "$(squeue -h -o %i 2>/dev/null)" ]]; do sleep 0.2; done
}

plain() {  # submits n jobs, then polls squeue once a second until none of them is listed live
  local dir="$base/plain-$1" ids=() t0 t1
  mkdir -p "$dir"
  t0=$(now)
  for i in $(seq 0 $((n - 1))); do
    ids+=("$(sbatch --parsable --job-name="plain-$i" -o "$dir/%j.out" --wrap "true $i")")
  done
  local list
  list=$(IFS=,; echo "${ids[*]}")
  while squeue -h -t PENDING,RUNNING,COMPLETING -j "$list" -o %i 2>/dev/null | grep -q .; do
    sleep 1
  done
  t1=$(now)
  awk "BEGIN {print $t1 - $t0}"
}

through_drover() {
  local dir="$base/drover-$1" t0 t1
  mkdir -p "$dir/code"
  local values
  values=$(seq -s, 0 $((n - 1)))
  cat > "$dir/spec.yaml" <<YAML
name: trivial
workdir: code
executor: {kind: slurm}
command: "true {i}"
params: {i: [$values]}
YAML
  t0=$(now)
  "$drover" run "$dir/spec.yaml" --store "$dir/store" --quiet --foreground > "$dir/out.txt" 2>&1
  t1=$(now)
  awk "BEGIN {print $t1 - $t0}"
}

echo "# $n trivial runs, $rounds rounds, store on $(df --output=source "$base" | tail -1)"
printf '%-6s %12s %12s %8s\n' round plain_s drover_s ratio
for r in $(seq 1 "$rounds"); do
  idle
  p=$(plain "$r")
  idle
  d=$(through_drover "$r")
  printf '%-6s %12.2f %12.2f %8.2f\n' "$r" "$p" "$d" "$(awk "BEGIN {print $d / $p}")"
done
# The Slurm commands drover runs, counted by a PATH of wrappers in front of Slurm's own, in one
# more run of its own (a wrapper costs a shell per command, so it is not timed).
idle
wrap="$base/wrap"
mkdir -p "$wrap"
: > "$base/calls"
for c in sbatch squeue sacct scancel; do
  real=$(command -v "$c")
  printf '#!/bin/sh\necho %s >> %s\nexec %s "$@"\n' "$c" "$base/calls" "$real" > "$wrap/$c"
  chmod +x "$wrap/$c"
done
PATH="$wrap:$PATH" through_drover count > /dev/null
calls=$(wc -l < "$base/calls")
echo "drover's Slurm commands: $calls for $n runs ($(awk "BEGIN {print $calls / $n}") per run):" \
  "$(sort "$base/calls" | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')"
