#!/usr/bin/env python3
"""A PyTorch training script to start from, written by `drover init`.

It trains a small MLP on a synthetic classification task (made here from --seed, no download)
and runs on CPU as written, in seconds; on a GPU it uses mixed precision. It shows what a
script under drover usually wants:

- seeds fixed (Python, NumPy, torch, CUDA) and cuDNN made deterministic;
- mixed precision (autocast + GradScaler) only where CUDA exists, plain float32 on CPU;
- gradient clipping (--clip, 0 = off);
- checkpoints every --checkpoint-every steps and on SIGTERM (drover.Checkpointer), resumed at
  start, so a preempted or retried run continues where it stopped, its curve too;
- metrics as drover.log lines (loss, lr, grad_norm, val_loss, val_acc; x axis = step);
- hyper-parameters recorded (drover.torch.autolog: the flags and the model's arguments).

    python3 train.py --epochs 5 --lr 3e-3          # anywhere (drover's client on PYTHONPATH)
    drover plan "lr 1e-4 to 1e-2, 3 values, 2 seeds" # drover.yaml next to it is the recipe

Replace make_data() and Mlp with your own; keep the rest.
"""
import argparse
import contextlib
import math
import os
import random
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import drover  # under drover its client is on PYTHONPATH
    import drover.torch
except ImportError:
    sys.exit("train.py: drover's Python client is not importable: run under drover, or "
             "pip install <drover>/python, or set PYTHONPATH=<drover>/python")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=128, help="width of the hidden layers")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm; 0 = no clipping")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=4096, help="size of the synthetic data set")
    p.add_argument("--log-every", type=int, default=10, help="log the loss every N steps")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="save a checkpoint every N steps (and always on SIGTERM and at the end)")
    p.add_argument("--no-resume", action="store_true",
                   help="start over even if a checkpoint exists (later saves replace it)")
    p.add_argument("--cpu", action="store_true", help="stay on CPU even when CUDA is there")
    args = p.parse_args()
    for name in ("batch_size", "epochs", "hidden", "samples", "log_every", "checkpoint_every"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if not args.lr > 0 or args.clip < 0 or not 0 <= args.dropout < 1:
        p.error("--lr must be > 0, --clip >= 0 and --dropout in [0, 1)")
    return args


def fix_seeds(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)  # harmless without CUDA
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def make_data(seed, n, features=32, classes=4, informative=8, clusters=4):
    """A synthetic task in the manner of sklearn's make_classification: each class is a few
    Gaussian clusters around corners of a hypercube in `informative` dimensions, the other
    dimensions are noise. Returns (x_train, y_train, x_val, y_val) as tensors, 80% / 20%."""
    rng = np.random.default_rng(seed)
    corners = rng.choice([-1.0, 1.0], size=(classes * clusters, informative))
    y = rng.integers(0, classes, n)
    cluster = y * clusters + rng.integers(0, clusters, n)
    x = np.concatenate([corners[cluster] * 1.5 + rng.standard_normal((n, informative)),
                        rng.standard_normal((n, features - informative))], axis=1)
    x = x.astype(np.float32)[:, rng.permutation(features)]
    n_val = n // 5
    x, y = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val]


class Mlp(nn.Module):
    def __init__(self, features, classes, hidden=128, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def grad_scaler(enabled):
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def epoch_order(seed, epoch, n):
    """The order of the training examples in an epoch: from (seed, epoch) alone, so a run
    resumed in the middle of an epoch sees the same batches as one that was never stopped."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100003 + epoch))


@torch.no_grad()
def evaluate(model, x, y, device, autocast, batch_size=1024):
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch_size):
        xb, yb = x[i:i + batch_size].to(device), y[i:i + batch_size].to(device)
        with autocast():
            logits = model(xb)
        loss += F.cross_entropy(logits.float(), yb, reduction="sum").item()
        correct += (logits.argmax(1) == yb).sum().item()
    model.train()
    return loss / len(y), correct / len(y)


def main():
    drover.torch.autolog()  # records the flags below and the model's constructor arguments
    args = parse_args()
    fix_seeds(args.seed)

    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    use_amp = device.type == "cuda"
    # Mixed precision on CUDA only; on CPU a context that does nothing.
    autocast = ((lambda: torch.autocast("cuda", dtype=torch.float16)) if use_amp
                else contextlib.nullcontext)

    x_train, y_train, x_val, y_val = make_data(args.seed, args.samples)
    model = Mlp(x_train.shape[1], int(y_train.max()) + 1, hidden=args.hidden,
                dropout=args.dropout).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = math.ceil(len(y_train) / args.batch_size)
    total_steps = args.epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    scaler = grad_scaler(use_amp)

    # Saves model, optimizer, scheduler, scaler and every random generator's state into
    # $DROVER_CHECKPOINT_DIR (./checkpoints outside drover). On SIGTERM (drover preempting the
    # run) the next ckpt.step() saves and exits with status 143.
    ckpt = drover.Checkpointer(model=model, optimizer=optimizer, scheduler=scheduler,
                               scaler=scaler, every=args.checkpoint_every)
    start = 0 if args.no_resume else ckpt.resume()  # the step after the saved one
    if start > 0 and "DROVER_CHECKPOINT_DIR" not in os.environ:
        print(f"train.py: resuming at step {start} from ./checkpoints (--no-resume starts over)",
              file=sys.stderr)

    model.train()
    order = None
    for step in range(start, total_steps):
        epoch, i = divmod(step, steps_per_epoch)
        if order is None or i == 0:
            order = epoch_order(args.seed, epoch, len(y_train))
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        xb, yb = x_train[idx].to(device), y_train[idx].to(device)

        with autocast():
            loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        grad_norm = (nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                     if args.clip > 0 else None)
        scaler.step(optimizer)  # skipped when the fp16 gradients overflowed
        scaler.update()
        scheduler.step()

        if not math.isfinite(loss.item()):
            drover.alert("the loss is %s at step %d" % (loss.item(), step), level="error",
                         key="loss-not-finite")
        if step % args.log_every == 0:
            metrics = {"loss": loss.item(), "lr": scheduler.get_last_lr()[0]}
            if grad_norm is not None:
                metrics["grad_norm"] = grad_norm.item()
            drover.log(step=step, **metrics)
        if i == steps_per_epoch - 1:
            val_loss, val_acc = evaluate(model, x_val, y_val, device, autocast)
            drover.log(step=step, epoch=epoch + 1, val_loss=val_loss, val_acc=val_acc)
        ckpt.step(step)  # every --checkpoint-every steps, or at once after SIGTERM (then exits)

    if total_steps > 0 and ckpt.last_saved_step != total_steps - 1:
        ckpt.save_now(total_steps - 1)  # the end, so a retry after this does not train again


if __name__ == "__main__":
    main()
