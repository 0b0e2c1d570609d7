#!/usr/bin/env bash
# Runs every libFuzzer harness in fuzz/ for SECONDS each (default 600), two at a time, from its
# seed corpus in fuzz/corpus/<name>/ plus what earlier runs found (build-debug/fuzz/corpus/<name>/),
# and prints per harness: executions, coverage (libFuzzer's edge count) and features, and whether
# it crashed. Needs the debug preset built: cmake --preset debug && cmake --build --preset debug
#   scripts/fuzz.sh [SECONDS] [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
names=("$@")
if ((${#names[@]} == 0)); then
  names=(spec recipe_plan protocol mcp metric_lines trace config)
fi
out=build-debug/fuzz/logs
mkdir -p "$out"
run_one() {
  local name=$1 bin=build-debug/fuzz/fuzz_$1
  [[ -x $bin ]] || { echo "$name: $bin is missing; build the debug preset first" >&2; return 1; }
  mkdir -p "build-debug/fuzz/corpus/$name"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="build-debug/fuzz/fuzz_$name-" \
    "build-debug/fuzz/corpus/$name" "fuzz/corpus/$name" >"$out/$name.log" 2>&1 && echo ok >"$out/$name.rc" \
    || echo "crashed (exit $?)" >"$out/$name.rc"
}
pids=()
for name in "${names[@]}"; do
  run_one "$name" &
  pids+=($!)
  if ((${#pids[@]} == 2)); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
printf '%-14s %12s %10s %10s  %s\n' harness executions coverage features result
for name in "${names[@]}"; do
  log=$out/$name.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -oE '(INITED|DONE|#[0-9]+).* cov: [0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' | grep -o '[0-9]*' || echo '?')
  ft=$(grep -oE ' ft: [0-9]+' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  printf '%-14s %12s %10s %10s  %s\n' "$name" "$execs" "$cov" "$ft" "$(cat "$out/$name.rc")"
done
