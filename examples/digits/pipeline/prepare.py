#!/usr/bin/env python3
"""Prepare sklearn's 8x8 digits once for the pipeline: scaled to [0, 1] and split 60/20/20 into
train, validation and a held-out test set, written to OUT/digits.npz."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train import load_digits  # noqa: E402  (the same reader as the single-run example)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    images, target = load_digits()
    x = (images / 16.0).astype(np.float32)[:, None, :, :]
    order = np.random.default_rng(args.seed).permutation(len(target))
    n = len(order) // 5
    test, val, train = order[:n], order[n:2 * n], order[2 * n:]
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, "digits.npz"), x_train=x[train], y_train=target[train],
             x_val=x[val], y_val=target[val], x_test=x[test], y_test=target[test])
    print(f"prepared {len(train)} train, {len(val)} validation, {len(test)} test images", flush=True)


if __name__ == "__main__":
    main()
