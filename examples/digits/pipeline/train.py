#!/usr/bin/env python3
"""Train one config on the prepared digits (DATA/digits.npz) and save the model to OUT/model.pt.
Prints one JSON line per epoch, which drover stores as metrics."""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train import Cnn, Mlp  # noqa: E402  (the single-run example's models)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    d = np.load(os.path.join(args.data, "digits.npz"))
    x, y = torch.from_numpy(d["x_train"]), torch.from_numpy(d["y_train"]).long()
    xv, yv = torch.from_numpy(d["x_val"]), torch.from_numpy(d["y_val"]).long()
    model = Mlp() if args.model == "mlp" else Cnn()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(args.seed)
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(y), generator=g)
        total = 0.0
        for i in range(0, len(y), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        model.eval()
        with torch.no_grad():
            out = model(xv)
            val_loss = F.cross_entropy(out, yv).item()
            val_acc = (out.argmax(1) == yv).float().mean().item()
        print(json.dumps({"epoch": epoch, "loss": round(total / len(y), 6),
                          "val_loss": round(val_loss, 6), "val_acc": round(val_acc, 6)}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    torch.save({"model": args.model, "state": model.state_dict()}, os.path.join(args.out, "model.pt"))


if __name__ == "__main__":
    main()
