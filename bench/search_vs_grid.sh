#!/usr/bin/env bash
# Search against grid at the same budget: on drover init's template and on the digits example,
# the default search (sampler auto) with the documented pruning (docs/search.md, "Early
# stopping": median, judged from epoch 3 on the template and from epoch 1 on digits) against a grid of the same number of runs over the same space (the search
# samples the box whose corners and edges the grid's values mark), for 5 seeds each (the search's
# seed and the training seed; the grid's points stay, its training seed changes). Each experiment runs
# through `drover run --foreground` on CPU, 2 runs at a time, in a store on the machine's real
# disk (under the project's build folder, or $BENCH_DIR). Measured per experiment: the best
# objective reached and the CPU time of the experiment (user + system of drover and every run,
# from /usr/bin/time).
#
#   bench/search_vs_grid.sh [-s SEEDS] [--only init|digits] [--keep]
#
# Prints one line per experiment and a summary per workload: the mean best of each side, the
# mean CPU seconds, and whether the search met its target (mean best >= the grid's, at no more
# CPU). Exits non-zero when an experiment failed to run (not when a target is missed). The drover
# binary is $DROVER_BIN, else ./build/drover; PyTorch comes from /usr/bin/python3.
set -euo pipefail

SEEDS=5
ONLY=""
KEEP=0
# The pruning docs/search.md documents for each workload; another may be tried through the
# environment (PRUNE_INIT='{rule: median}'), as may another sampler (SAMPLER=tpe); the figures in
# bench/README.md are the defaults'.
SAMPLER=${SAMPLER:-auto}
PRUNE_INIT=${PRUNE_INIT:-"{rule: median, min_steps: 3, reduction: 3}"}
PRUNE_DIGITS=${PRUNE_DIGITS:-"{rule: median, min_steps: 1, max_steps: 9, reduction: 3}"}
while [[ $# -gt 0 ]]; do
  case "$1" in
    -s) SEEDS="${2:?-s needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs init or digits}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [-s SEEDS] [--only init|digits] [--keep]" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
DROVER=${DROVER_BIN:-$ROOT/build/drover}
PY=/usr/bin/python3
[[ -x $DROVER ]] || { echo "no drover at $DROVER: build it (scripts/setup.sh)" >&2; exit 2; }
"$PY" -c 'import torch, sklearn' 2>/dev/null || { echo "$PY cannot import torch and sklearn" >&2; exit 2; }
BASE=${BENCH_DIR:-$ROOT/build/bench}
mkdir -p "$BASE"
DIR=$(mktemp -d "$BASE/search-vs-grid.XXXXXX")
[[ $KEEP == 1 ]] && echo "search_vs_grid: keeping $DIR" >&2 || trap 'rm -rf "$DIR"' EXIT
echo "search_vs_grid: $(findmnt -no FSTYPE -T "$DIR" 2>/dev/null || echo '?') at $DIR; drover $("$DROVER" --version 2>/dev/null | head -1)" >&2

# One experiment: prints "BEST CPU_SECONDS RUNS PRUNED".
run_one() {
  local project=$1 spec=$2 name=$3
  local store="$DIR/store-$name"
  /usr/bin/time -o "$DIR/$name.time" -f "%U %S" "$DROVER" run "$spec" --store "$store" \
      --foreground --quiet --cpus 2 >"$DIR/$name.out" 2>"$DIR/$name.err" || {
    echo "search_vs_grid: $name failed; see $DIR/$name.err" >&2
    tail -5 "$DIR/$name.err" >&2
    return 1
  }
  local cpu
  cpu=$(tail -1 "$DIR/$name.time" | awk '{printf "%.1f", $1 + $2}')
  "$DROVER" compare "$name" --store "$store" --json >"$DIR/$name.json"
  "$PY" - "$DIR/$name.json" "$cpu" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
runs = c.get("runs", [])
scores = [r.get("score") for r in runs if r.get("state") == "succeeded" and isinstance(r.get("score"), (int, float))]
pruned = sum(1 for r in runs if r.get("state") == "pruned")
print(f"{max(scores) if scores else float('nan'):.4f} {sys.argv[2]} {len(runs)} {pruned}")
EOF
}

# drover init's template: 10 epochs, val_acc once an epoch with the epoch beside it.
init_specs() {
  local seed=$1 project="$DIR/init"
  if [[ ! -d $project ]]; then
    "$DROVER" init "$project" >/dev/null
    # Its own repository: under the build folder the project's .gitignore would leave it out of
    # the code snapshot.
    git -C "$project" init -q
  fi
  local cmd="$PY train.py --lr {lr} --hidden {hidden} --dropout {dropout} --epochs {epochs} --seed {seed}"
  cat >"$project/search-$seed.yaml" <<EOF
name: init-search-$seed
command: $cmd
params:
  lr: {log_uniform: [1e-3, 3e-2]}
  hidden: {int_log: [64, 256]}
  dropout: {uniform: [0.0, 0.3]}
  epochs: 10
  seed: $seed
search: {trials: 16, parallel: 2, seed: $seed, sampler: ${SAMPLER}}
prune: ${PRUNE_INIT}
objective: {metric: val_acc, mode: max}
resources: {gpus: 0, cpus: 1}
EOF
  cat >"$project/grid-$seed.yaml" <<EOF
name: init-grid-$seed
command: $cmd
params:
  lr: [0.001, 0.003, 0.01, 0.03]
  hidden: [64, 256]
  dropout: [0.0, 0.3]
  epochs: 10
  seed: $seed
max_parallel: 2
objective: {metric: val_acc, mode: max}
resources: {gpus: 0, cpus: 1}
EOF
  echo "$project"
}

# The digits example (its train.py's step is the epoch): 9 epochs, rungs at 1 and 3.
digits_specs() {
  local seed=$1 project="$DIR/digits"
  if [[ ! -d $project ]]; then
    cp -r "$ROOT/examples/digits" "$project"
    git -C "$project" init -q
  fi
  local cmd="$PY train.py --model {model} --lr {lr} --batch-size {batch_size} --epochs 9 --monitor-every 0 --seed {seed}"
  cat >"$project/search-$seed.yaml" <<EOF
name: digits-search-$seed
command: $cmd
params:
  model: {choice: [mlp, cnn]}
  lr: {log_uniform: [1e-3, 1e-1]}
  batch_size: {int_log: [32, 128]}
  seed: $seed
search: {trials: 16, parallel: 2, seed: $seed, sampler: ${SAMPLER}}
prune: ${PRUNE_DIGITS}
objective: {metric: val_acc, mode: max, summary: best}
resources: {gpus: 0, cpus: 1}
EOF
  cat >"$project/grid-$seed.yaml" <<EOF
name: digits-grid-$seed
command: $cmd
params:
  model: [mlp, cnn]
  lr: [0.001, 0.01, 0.03, 0.1]
  batch_size: [32, 128]
  seed: $seed
max_parallel: 2
objective: {metric: val_acc, mode: max, summary: best}
resources: {gpus: 0, cpus: 1}
EOF
  echo "$project"
}

status=0
for workload in init digits; do
  [[ -z $ONLY || $ONLY == "$workload" ]] || continue
  : >"$DIR/$workload.results"
  for ((seed = 1; seed <= SEEDS; seed++)); do
    project=$("${workload}_specs" "$seed")
    for side in search grid; do
      name="$workload-$side-$seed"
      if line=$(cd "$project" && run_one "$project" "$side-$seed.yaml" "$name"); then
        echo "$workload $side $seed $line" | tee -a "$DIR/$workload.results"
      else
        status=1
      fi
    done
  done
  "$PY" - "$DIR/$workload.results" "$workload" <<'EOF'
import sys, math, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
side = {s: [r for r in rows if r[1] == s] for s in ("search", "grid")}
def mean(xs): return st.mean(xs) if xs else float("nan")
best = {s: mean([float(r[3]) for r in side[s] if not math.isnan(float(r[3]))]) for s in side}
cpu = {s: mean([float(r[4]) for r in side[s]]) for s in side}
pruned = mean([int(r[6]) for r in side["search"]])
met = best["search"] >= best["grid"] and cpu["search"] <= cpu["grid"]
print(f"{sys.argv[2]}: search mean best {best['search']:.4f} at {cpu['search']:.0f} s CPU "
      f"({pruned:.1f} of 16 trials pruned on average); grid {best['grid']:.4f} at "
      f"{cpu['grid']:.0f} s CPU; {len(side['search'])} seeds; target "
      f"(search >= grid at no more CPU) {'met' if met else 'MISSED'}")
EOF
done
exit $status
