#!/usr/bin/env python3
"""Softmax regression on Fashion-MNIST with NumPy: a user's own training script as a trial.

It reads its hyperparameters from flags, trains with mini-batch SGD (optionally with momentum) or
AdamW, and prints one JSON line of metrics per epoch on stdout, which is all hyperpack needs:

    {"epoch": 1, "train_loss": 0.61, "val_loss": 0.55, "val_accuracy": 0.81}

Data: the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), or
--data-dir. Exit codes: 0 done, 2 bad arguments or data.
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic number)")
    dtype, ndim = data[2], data[3]
    if dtype != 0x08:
        raise ValueError(f"{path}: expected unsigned bytes (type 0x08), got 0x{dtype:02x}")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {int(np.prod(dims))} values for shape {dims}, got {body.size}")
    return body.reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{data_dir}: no {stem}[.gz]; install dataset-fashion-mnist or pass --data-dir")


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    return x, y


def softmax_loss(w, b, x, y, weight_decay=0.0):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), y] + 1e-12).mean()
    return loss, p


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lr", type=float, required=True, help="learning rate")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    ap.add_argument("--momentum", type=float, default=0.0, help="sgd only")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--train-samples", type=int, default=10000, help="train on the first N images")
    ap.add_argument("--val-samples", type=int, default=5000, help="validate on N held-out training images")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.lr <= 0 or args.batch_size < 1 or args.epochs < 1:
        ap.error("--lr must be > 0, --batch-size and --epochs >= 1")
    return args


def step(args, state, w, b, gw, gb):
    """One optimizer step on w and b (in place) from their gradients."""
    if args.optimizer == "sgd":
        gw = gw + args.weight_decay * w
        state["vw"] = args.momentum * state["vw"] + gw
        state["vb"] = args.momentum * state["vb"] + gb
        w -= args.lr * state["vw"]
        b -= args.lr * state["vb"]
        return
    state["t"] += 1
    t, b1, b2 = state["t"], 0.9, 0.999
    w *= 1 - args.lr * args.weight_decay
    for p_, g_, m, v in ((w, gw, "mw", "vw"), (b, gb, "mb", "vb")):
        state[m] = b1 * state[m] + (1 - b1) * g_
        state[v] = b2 * state[v] + (1 - b2) * g_ * g_
        mhat = state[m] / (1 - b1 ** t)
        vhat = state[v] / (1 - b2 ** t)
        p_ -= args.lr * mhat / (np.sqrt(vhat) + 1e-8)


def main():
    args = parse_args()
    try:
        x, y = load(args.data_dir, "train")
    except (OSError, ValueError) as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 2
    n_val = min(args.val_samples, 10000)
    n_train = min(args.train_samples, x.shape[0] - n_val)
    # The validation images are the last ones of the training file, never trained on.
    x_val, y_val = x[-n_val:], y[-n_val:]
    x_tr, y_tr = x[:n_train], y[:n_train]

    rng = np.random.default_rng(args.seed)
    w = np.zeros((784, 10), dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    state = {"vw": np.zeros_like(w), "vb": np.zeros_like(b), "mw": np.zeros_like(w), "mb": np.zeros_like(b), "t": 0}
    onehot = np.eye(10, dtype=np.float32)

    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(n_train)
        total, batches = 0.0, 0
        for start in range(0, n_train, args.batch_size):
            idx = order[start:start + args.batch_size]
            xb, yb = x_tr[idx], y_tr[idx]
            loss, p = softmax_loss(w, b, xb, yb)
            g = (p - onehot[yb]) / xb.shape[0]
            step(args, state, w, b, xb.T @ g, g.sum(axis=0))
            total += float(loss)
            batches += 1
        val_loss, p = softmax_loss(w, b, x_val, y_val)
        acc = float((p.argmax(axis=1) == y_val).mean())
        print(json.dumps({"epoch": epoch, "train_loss": total / batches, "val_loss": float(val_loss),
                          "val_accuracy": acc}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
