#!/usr/bin/python3
"""Optuna 3.1's TPE sampler with its Hyperband pruner on the search space of
examples/fmnist/asha.yaml, training the same MLP in plain PyTorch (bench/pytorch_fmnist.py): the
study an Optuna user would write for what bench/peer_fmnist.sh asks of hyperpack.

    /usr/bin/python3 bench/optuna_fmnist.py --log-dir DIR [--seed 1] [--seconds 900]
        [--workers 2] [--threads 1] [--data-path /usr/share/datasets/fashion-mnist]

The space: learning_rate log-uniform in [1e-3, 0.5], batch_size in {64, 128, 256}, optimizer in
{sgd, adamw}, momentum in [0.5, 0.98] (sgd only), weight_decay log-uniform in [1e-6, 1e-2]; the
data-parallel degree is 1. Each trial trains up to 27 epochs (the cosine schedule spans 27, as the
trainer's --epochs 27), reports its validation accuracy after every epoch and stops when
HyperbandPruner(min_resource=1, max_resource=27, reduction_factor=3) says so; its value is the
last validation accuracy. --workers processes (Optuna's own way to run trials in parallel: one
study in one SQLite file, each process calling optimize) each train one trial at a time on
--threads threads, with the data loaded once per process (subnormal floats flushed to zero, as the
trainer does). TPESampler(seed=seed * 100 + worker).

Every epoch of every trial is one JSON line in DIR/worker-K.jsonl: t (seconds since this program
started), trial, epoch, val_accuracy and, after the 27th epoch, test_accuracy. At --seconds the
workers stop: a trial then in progress ends as pruned and no new one starts.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_fmnist  # noqa: E402  (bench/pytorch_fmnist.py)

EPOCHS = 27


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log-dir", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=900.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-path", default="/usr/share/datasets/fashion-mnist")
    # Internal: a worker's index and the driver's start time.
    p.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def make_study(args, worker):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name="fmnist-%d" % args.seed, direction="maximize",
        storage="sqlite:///" + os.path.join(args.log_dir, "optuna.db"), load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=args.seed * 100 + max(0, worker)),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=EPOCHS,
                                              reduction_factor=3))


def work(args):
    import optuna
    study = make_study(args, args.worker)
    deadline = args.t0 + args.seconds
    train_args = pytorch_fmnist.parse_args(["--epochs", str(EPOCHS), "--threads",
                                            str(args.threads), "--data-path", args.data_path])
    pytorch_fmnist.set_flush_denormals(train_args)
    data = pytorch_fmnist.load_data(train_args)
    log = open(os.path.join(args.log_dir, "worker-%d.jsonl" % args.worker), "a", buffering=1)

    def objective(trial):
        a = argparse.Namespace(**vars(train_args))
        a.lr = trial.suggest_float("learning_rate", 1e-3, 0.5, log=True)
        a.batch_size = trial.suggest_categorical("batch_size", [64, 128, 256])
        a.optimizer = trial.suggest_categorical("optimizer", ["sgd", "adamw"])
        if a.optimizer == "sgd":
            a.momentum = trial.suggest_float("momentum", 0.5, 0.98)
        a.weight_decay = trial.suggest_float("weight_decay", 1e-6, 1e-2, log=True)
        last = {}

        def on_epoch(line):
            now = time.time()
            if now > deadline:
                study.stop()
                raise optuna.TrialPruned()
            row = {"t": now - args.t0, "trial": trial.number, "epoch": line["epoch"],
                   "val_accuracy": line["val_accuracy"]}
            if "test_accuracy" in line:
                row["test_accuracy"] = line["test_accuracy"]
            log.write(json.dumps(row) + "\n")
            last.update(line)
            trial.report(line["val_accuracy"], line["epoch"])
            if trial.should_prune():
                raise optuna.TrialPruned()

        pytorch_fmnist.train(a, 0, 1, 1, data=data, on_epoch=on_epoch)
        return last["val_accuracy"]

    study.optimize(objective, timeout=max(0.0, deadline - time.time()))
    return 0


def main(argv):
    args = parse_args(argv)
    if args.worker >= 0:
        return work(args)
    os.makedirs(args.log_dir, exist_ok=True)
    t0 = time.time()
    make_study(args, -1)  # created once, so that the workers do not race to create it
    workers = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv +
                                ["--worker", str(w), "--t0", repr(t0)])
               for w in range(args.workers)]
    result = 0
    for p in workers:
        try:
            code = p.wait(timeout=max(1.0, t0 + args.seconds + 120 - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            code = p.wait()
        result = result or code
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
