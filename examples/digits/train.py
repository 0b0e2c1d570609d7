#!/usr/bin/env python3
"""Train a small classifier on sklearn's bundled 8x8 digits (no download), on CPU.

Prints one JSON line per epoch on stdout, which drover stores as metrics:
    {"epoch": 1, "loss": 0.61, "val_loss": 0.32, "val_acc": 0.91}

Checkpoints (drover.Checkpointer): model, optimizer and random generators are saved into
$DROVER_CHECKPOINT_DIR (./checkpoints outside drover) every --checkpoint-every epochs and when
SIGTERM arrives (then it exits with status 143); a run started again resumes after the saved
epoch, so a preempted run's curve continues from the saved step. --no-resume starts over.

--oom-above N makes any batch size above N fail the way a GPU that is too small does: a real
torch.cuda.OutOfMemoryError at the first forward pass, uncaught, so drover's OOM recovery
(halve the batch, double --grad-accum) can be tried on a machine without a GPU.
"""
import argparse
import gzip
import importlib.util
import os
import sys

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import drover  # under drover it is on PYTHONPATH; pip install ./python puts it anywhere
except ImportError:  # run from a checkout without installing: use the repo's client by path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import drover
from drover.torch import TrainingMonitor


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--monitor-every", type=int, default=10,
                   help="log the gradient norm (and CUDA memory) every N optimizer steps; 0 = off")
    p.add_argument("--oom-above", type=int, default=0,
                   help="pretend the GPU holds at most this batch size (0 = off)")
    p.add_argument("--grad-accum", type=int, default=1,
                   help="accumulate gradients over this many micro-batches per step")
    p.add_argument("--checkpoint-every", type=int, default=1,
                   help="save a checkpoint every N epochs (and on SIGTERM)")
    p.add_argument("--no-resume", action="store_true",
                   help="start over even if a checkpoint exists")
    args = p.parse_args()
    if args.batch_size < 1 or args.epochs < 1 or args.grad_accum < 1 or args.checkpoint_every < 1:
        p.error("--batch-size, --epochs, --grad-accum and --checkpoint-every must be at least 1")
    return args


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def load_digits():
    """sklearn's bundled digits as (images, targets). Read from its CSV file directly when it is
    where sklearn keeps it: importing sklearn costs half a second per run, a third of a short
    trial's time in a search."""
    spec = importlib.util.find_spec("sklearn")
    path = os.path.join(os.path.dirname(spec.origin), "datasets", "data", "digits.csv.gz") if spec else ""
    if os.path.exists(path):
        with gzip.open(path, "rt") as f:
            data = np.loadtxt(f, delimiter=",")
        return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits as sklearn_digits
    digits = sklearn_digits()
    return digits.images, digits.target


def load_split(seed):
    """The digits as (N, 1, 8, 8) floats in [0, 1]; 80% train, 20% validation, shuffled by seed."""
    images, target = load_digits()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_val = len(y) // 5
    val, train = order[:n_val], order[n_val:]
    return x[train], y[train], x[val], y[val]


def check_memory(args):
    if args.oom_above > 0 and args.batch_size > args.oom_above:
        need_mib = args.batch_size * 64 * 4 * 1024 / 2**20  # what a bigger model might ask for
        raise torch.cuda.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {need_mib:.2f} MiB "
            f"(batch {args.batch_size} above the limit of {args.oom_above} set by --oom-above)")


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    if "DROVER_PARAMS" in os.environ:
        print(f"drover params: {os.environ['DROVER_PARAMS']}", file=sys.stderr, flush=True)

    monitor = TrainingMonitor(every=args.monitor_every) if args.monitor_every > 0 else None
    x_train, y_train, x_val, y_val = load_split(args.seed)
    model = Mlp() if args.model == "mlp" else Cnn()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    # Saved every --checkpoint-every epochs and on SIGTERM; resume() puts back the model, the
    # optimizer, the step counter and the random generators (so the epochs' shuffles continue
    # as if never stopped) and returns the epoch after the saved one (1 without a checkpoint).
    counters = {"global_step": 0}
    ckpt = drover.Checkpointer(model=model, optimizer=opt, extra=counters,
                               every=args.checkpoint_every)
    first_epoch = 1 if args.no_resume else ckpt.resume(start=1)
    global_step = counters["global_step"]
    for epoch in range(first_epoch, args.epochs + 1):
        model.train()
        perm = torch.randperm(len(y_train))
        total_loss, seen = 0.0, 0
        opt.zero_grad()
        batches = range(0, len(perm), args.batch_size)
        for i, start in enumerate(batches):
            if ckpt.stop_requested and args.checkpoint_every == 1:
                # Stopped mid-epoch (a prune, a preemption): the last epoch's checkpoint is on
                # disk already, so stop now rather than finish an epoch nobody will use.
                sys.exit(143)
            idx = perm[start:start + args.batch_size]
            check_memory(args)  # the "allocation" for this batch
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            # Scale so that N accumulated micro-batches give the gradient of one N-times batch.
            (loss / args.grad_accum).backward()
            if (i + 1) % args.grad_accum == 0 or i + 1 == len(batches):
                if monitor:
                    monitor.step(global_step, model=model)  # gradient norm, CUDA memory
                global_step += 1
                opt.step()
                opt.zero_grad()
            total_loss += loss.item() * len(idx)
            seen += len(idx)

        model.eval()
        with torch.no_grad():
            logits = model(x_val)
            val_loss = F.cross_entropy(logits, y_val).item()
            val_acc = (logits.argmax(1) == y_val).float().mean().item()
        drover.log(step=epoch, loss=round(total_loss / seen, 6), val_loss=round(val_loss, 6),
                   val_acc=round(val_acc, 6))
        counters["global_step"] = global_step
        ckpt.step(epoch)  # every --checkpoint-every epochs; after SIGTERM: save, exit 143


if __name__ == "__main__":
    main()
