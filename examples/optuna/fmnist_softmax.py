#!/usr/bin/python3
"""An Optuna study on hyperpack's tuner: softmax regression on Fashion-MNIST, pruned by epoch.

The objective is what an Optuna user already has; the one line that is hyperpack's is the
sampler. Run it from the repository's root after scripts/quickstart (which builds the module):

    PYTHONPATH=build/python /usr/bin/python3 examples/optuna/fmnist_softmax.py [--trials 20]

(or with the .deb installed, without PYTHONPATH). Data: Debian's dataset-fashion-mnist. It prints
one line a trial and then the best trial's parameters.
"""
import argparse
import os
import sys

import numpy as np
import optuna

import hyperpack.optuna

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fmnist_softmax"))
from train import load, softmax_loss  # noqa: E402  (the NumPy trainer of examples/fmnist_softmax)


def make_objective(x_tr, y_tr, x_val, y_val, epochs):
    onehot = np.eye(10, dtype=np.float32)

    def objective(trial):
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        batch = trial.suggest_int("batch_size", 16, 512, log=True)
        momentum = trial.suggest_float("momentum", 0.0, 0.95)
        weight_decay = trial.suggest_float("weight_decay", 1e-6, 1e-2, log=True)
        rng = np.random.default_rng(trial.number)
        w = np.zeros((784, 10), dtype=np.float32)
        b = np.zeros(10, dtype=np.float32)
        vw, vb = np.zeros_like(w), np.zeros_like(b)
        for epoch in range(1, epochs + 1):
            order = rng.permutation(len(x_tr))
            for start in range(0, len(x_tr), batch):
                idx = order[start:start + batch]
                _, p = softmax_loss(w, b, x_tr[idx], y_tr[idx])
                g = (p - onehot[y_tr[idx]]) / len(idx)
                vw = momentum * vw + x_tr[idx].T @ g + weight_decay * w
                vb = momentum * vb + g.sum(axis=0)
                w -= lr * vw
                b -= lr * vb
            val_loss, _ = softmax_loss(w, b, x_val, y_val)
            val_loss = float(val_loss) if np.isfinite(val_loss) else float("inf")
            trial.report(val_loss, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return val_loss

    return objective


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-samples", type=int, default=10000)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    try:
        x, y = load(args.data_dir, "train")
    except (OSError, ValueError) as e:
        print(f"fmnist_softmax.py: {e}", file=sys.stderr)
        return 2
    x_val, y_val = x[-5000:], y[-5000:]  # held out: never trained on
    x_tr, y_tr = x[:args.train_samples], y[:args.train_samples]

    study = optuna.create_study(
        sampler=hyperpack.optuna.GPSampler(seed=0),  # the one line that is hyperpack's
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1))
    study.optimize(make_objective(x_tr, y_tr, x_val, y_val, args.epochs), n_trials=args.trials)
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    print(f"{len(study.trials)} trials ({pruned} pruned); best val_loss {study.best_value:.4f} "
          f"(trial {study.best_trial.number}): {study.best_params}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
