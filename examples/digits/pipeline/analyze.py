#!/usr/bin/env python3
"""Compare every validated config: a table on stdout and a bar chart (OUT/comparison.svg).
Gathers its inputs from $DROVER_INPUTS: one entry per validate run, with its params and metrics."""
import argparse
import html
import json
import os


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    with open(os.environ["DROVER_INPUTS"]) as f:
        runs = json.load(f)
    rows = sorted(((r["metrics"].get("test_acc", 0.0), r["params"], r["run"]) for r in runs),
                  key=lambda t: -t[0])
    for acc, params, run in rows:
        print(f"run {run:>4}  {params.get('model', ''):>4}  lr={params.get('lr', '')!s:<7} "
              f"test_acc={acc:.4f}", flush=True)
    width, bar = 420, 24
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bar * len(rows) + 20}">']
    for i, (acc, params, run) in enumerate(rows):
        label = html.escape(f"{params.get('model', '')} lr={params.get('lr', '')}")
        svg.append(f'<rect x="150" y="{10 + i * bar}" width="{int(acc * 250)}" height="{bar - 6}" fill="#4a7"/>')
        svg.append(f'<text x="5" y="{24 + i * bar}" font-size="12">{label}</text>')
        svg.append(f'<text x="{155 + int(acc * 250)}" y="{24 + i * bar}" font-size="12">{acc:.3f}</text>')
    svg.append("</svg>")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "comparison.svg"), "w") as f:
        f.write("\n".join(svg) + "\n")
    best = rows[0]
    print(json.dumps({"step": 1, "best_test_acc": best[0]}), flush=True)


if __name__ == "__main__":
    main()
