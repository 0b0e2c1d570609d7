#!/usr/bin/env python3
"""Score a trained model (CKPT/model.pt) on the held-out test split of DATA/digits.npz."""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train import Cnn, Mlp  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    saved = torch.load(os.path.join(args.ckpt, "model.pt"))
    model = Mlp() if saved["model"] == "mlp" else Cnn()
    model.load_state_dict(saved["state"])
    model.eval()
    d = np.load(os.path.join(args.data, "digits.npz"))
    x, y = torch.from_numpy(d["x_test"]), torch.from_numpy(d["y_test"]).long()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    print(json.dumps({"step": 1, "test_acc": round(acc, 6)}), flush=True)


if __name__ == "__main__":
    main()
