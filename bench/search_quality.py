#!/usr/bin/python3
"""drover's samplers against Optuna's on the same functions, in one run (bench/README.md,
"Search quality").

    bench/search_quality.py [--seeds 40] [--trials 100] [--quick]

Needs Debian's python3-optuna (3.1) and `cmake --build build --target search_bench`. Prints the
mean and median best value after 50 and after `--trials` trials for every function and sampler,
over seeds 0-19 (the figures issue 15 asks for) and over all the seeds (0-39 by default), the time
to propose one config after 100 and 1,000 finished trials, and whether the targets of issue 15
hold, judged over all the seeds; exits 1 when a target is missed. Why 40: two close samplers (
drover's TPE and Optuna's) trade places from one set of 20 seeds to the next, because a run's
best falls in one of a few basins (bench/README.md, "Search quality").

Functions (minimised): Branin (2 continuous), Hartmann-6 (6 continuous), Hartmann-6 with
Gaussian noise of sd 0.1 (the sampler sees the noisy value; the figure is the noiseless value of
the trial that looked best, the one a user would pick), and a mixed space (continuous, log,
integer and a 4-way choice). Each is written here and in bench/search_bench.cc; the script checks
that both give the same values before it compares anything.
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.environ.get("SEARCH_BENCH", os.path.join(ROOT, "build", "search_bench"))


def branin(p):
    x1, x2 = p["x1"], p["x2"]
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


H_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
       [17, 8, 0.05, 10, 0.1, 14]]
H_P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
       [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
       [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
       [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]
H_ALPHA = [1.0, 1.2, 3.0, 3.2]


def hartmann6(p):
    total = 0.0
    for i in range(4):
        inner = sum(H_A[i][j] * (p["x%d" % (j + 1)] - H_P[i][j]) ** 2 for j in range(6))
        total += H_ALPHA[i] * math.exp(-inner)
    return -total


MIXED_SHIFT = {"a": (1.5, 0.5), "b": (-1.0, 0.0), "c": (0.0, 1.0), "d": (2.0, 0.25)}


def mixed(p):
    s, o = MIXED_SHIFT[p["c"]]
    return (p["x"] - s) ** 2 + (math.log10(p["y"]) + 1) ** 2 + 0.05 * (p["n"] - 11) ** 2 + o


def suggest_branin(t):
    return {"x1": t.suggest_float("x1", -5, 10), "x2": t.suggest_float("x2", 0, 15)}


def suggest_hartmann(t):
    return {"x%d" % j: t.suggest_float("x%d" % j, 0, 1) for j in range(1, 7)}


def suggest_mixed(t):
    return {"x": t.suggest_float("x", -5, 5), "y": t.suggest_float("y", 1e-3, 10, log=True),
            "n": t.suggest_int("n", 1, 32), "c": t.suggest_categorical("c", ["a", "b", "c", "d"])}


# name -> (function, suggest, noise sd)
FUNCTIONS = {
    "branin": (branin, suggest_branin, 0.0),
    "hartmann6": (hartmann6, suggest_hartmann, 0.0),
    "noisy_hartmann6": (hartmann6, suggest_hartmann, 0.1),
    "mixed": (mixed, suggest_mixed, 0.0),
}
NUMERIC = ["branin", "hartmann6", "noisy_hartmann6"]


def optuna_sampler(kind, seed):
    if kind == "optuna-tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if kind == "optuna-tpe-mv":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    return optuna.samplers.RandomSampler(seed=seed)


def run_optuna(kind, name, trials, seed):
    f, suggest, noise = FUNCTIONS[name]
    rng = random.Random(1000 + seed)
    study = optuna.create_study(sampler=optuna_sampler(kind, seed))
    best_seen, best_true, curve = math.inf, math.inf, []
    for _ in range(trials):
        t = study.ask()
        p = suggest(t)
        truth = f(p)
        seen = truth + noise * rng.gauss(0, 1)
        study.tell(t, seen)
        if seen < best_seen:
            best_seen, best_true = seen, truth
        curve.append(best_true)
    return curve


def run_drover(kind, name, trials, seeds):
    out = subprocess.run([BENCH, "quality", name, kind, str(trials), str(seeds)], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line)["best"] for line in out.splitlines()]


def check_same_functions():
    points = {
        "branin": {"x1": 1.3, "x2": 4.2},
        "hartmann6": {"x%d" % j: 0.1 * j for j in range(1, 7)},
        "mixed": {"x": 0.7, "y": 0.03, "n": 5, "c": "d"},
    }
    for name, p in points.items():
        ours = float(subprocess.run([BENCH, "eval", name, json.dumps(p)], check=True,
                                    capture_output=True, text=True).stdout)
        theirs = FUNCTIONS[name][0](p)
        if abs(ours - theirs) > 1e-9 * max(1.0, abs(theirs)):
            sys.exit("search_quality: %s differs: C++ %r, Python %r" % (name, ours, theirs))


def time_optuna(name, finished, repeats):
    f, suggest, _ = FUNCTIONS[name]
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    rnd = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    for _ in range(finished):  # the history: random trials, told at once
        t = rnd.ask()
        rnd.tell(t, f(suggest(t)))
    study.add_trials(rnd.trials)
    start = time.perf_counter()
    for _ in range(repeats):
        suggest(study.ask())
    return (time.perf_counter() - start) / repeats * 1000


def time_drover(name, kind, finished, repeats):
    out = subprocess.run([BENCH, "time", name, kind, str(finished), str(repeats)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="5 seeds, 50 trials, no timing at 1,000")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.trials = 5, 50
    if not os.access(BENCH, os.X_OK):
        sys.exit("search_quality: %s is missing; cmake --build build --target search_bench" % BENCH)
    check_same_functions()
    checkpoints = sorted({50, args.trials})
    samplers = ["drover-auto", "drover-tpe", "drover-random", "optuna-tpe", "optuna-tpe-mv",
                "optuna-random"]
    results = {}  # (function, sampler) -> list of curves
    for name in FUNCTIONS:
        for kind in samplers:
            t0 = time.perf_counter()
            if kind.startswith("drover-"):
                curves = run_drover(kind[len("drover-"):], name, args.trials, args.seeds)
            else:
                curves = [run_optuna(kind, name, args.trials, s) for s in range(args.seeds)]
            results[(name, kind)] = curves
            print("  %-16s %-14s %6.1fs" % (name, kind, time.perf_counter() - t0),
                  file=sys.stderr)

    def table(seeds):
        print("Best value found (minimised), mean / median over seeds 0-%d" % (seeds - 1))
        print()
        print("| function | trials | " + " | ".join(samplers) + " |")
        print("|" + "---|" * (len(samplers) + 2))
        stats = {}
        for name in FUNCTIONS:
            for n in checkpoints:
                cells = []
                for kind in samplers:
                    finals = [c[n - 1] for c in results[(name, kind)][:seeds]]
                    stats[(name, n, kind)] = (statistics.mean(finals), statistics.median(finals))
                    cells.append("%.4f / %.4f" % stats[(name, n, kind)])
                print("| %s | %d | %s |" % (name, n, " | ".join(cells)))
        print()
        return stats

    if args.seeds > 20:
        table(20)
    stats = table(args.seeds)
    failures, welch = [], []
    for name in FUNCTIONS:
        for n in checkpoints:
            base = stats[(name, n, "optuna-tpe")]
            for ours in ["drover-auto", "drover-tpe"]:
                # "No worse": neither the mean nor the median above Optuna's default TPE's.
                if stats[(name, n, ours)][0] > base[0] or stats[(name, n, ours)][1] > base[1]:
                    failures.append("%s on %s at %d trials: %.4f / %.4f against Optuna TPE's "
                                    "%.4f / %.4f" % (ours, name, n, *stats[(name, n, ours)], *base))
            # "Clearly better" where the space is numeric: at 50 trials (the budgets GP is
            # chosen for) the mean is better by at least two standard errors of the
            # difference (Welch's t >= 2); at every budget mean and median are better
            # (checked above). Shown for every function.
            ours_f = [c[n - 1] for c in results[(name, "drover-auto")]]
            base_f = [c[n - 1] for c in results[(name, "optuna-tpe")]]
            se = math.sqrt(statistics.variance(ours_f) / len(ours_f) +
                           statistics.variance(base_f) / len(base_f))
            t = (statistics.mean(base_f) - statistics.mean(ours_f)) / se if se > 0 else 0
            welch.append("%s at %d trials: t = %.1f" % (name, n, t))
            if name in NUMERIC and n == 50 and t < 2:
                failures.append("drover-auto on %s at %d trials is not clearly better than "
                                "Optuna TPE (Welch t = %.1f)" % (name, n, t))
    print("drover auto against Optuna TPE over all %d seeds, Welch's t of the means (positive: "
          "drover better): " % args.seeds + "; ".join(welch))
    print()
    print("Time to propose one config (ms), after N finished trials")
    print()
    print("| function | N | drover tpe | drover auto (what it picks) | Optuna TPE | Optuna / drover tpe |")
    print("|---|---|---|---|---|---|")
    sizes = [100] if args.quick else [100, 1000]
    for name in ["hartmann6", "mixed"]:
        for n in sizes:
            repeats = 20 if n <= 100 else 5
            ours = time_drover(name, "tpe", n, repeats)
            auto = time_drover(name, "auto", n, repeats)
            theirs = time_optuna(name, n, repeats)
            ratio = theirs / ours["ms_per_proposal"]
            print("| %s | %d | %.3f | %.3f (%s) | %.2f | %.0fx |" % (
                name, n, ours["ms_per_proposal"], auto["ms_per_proposal"], auto["sampler"],
                theirs, ratio))
            if ratio < 20:
                failures.append("proposal time on %s after %d trials: %.1fx Optuna's, target 20x"
                                % (name, n, ratio))
    print()
    if failures:
        print("Targets missed:")
        for f in failures:
            print("- " + f)
        return 1
    print("All targets met.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
