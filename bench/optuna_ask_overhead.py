#!/usr/bin/python3
"""The time of one ask in Optuna: hyperpack.optuna.GPSampler against Optuna's TPESampler.

    PYTHONPATH=build/python /usr/bin/python3 bench/optuna_ask_overhead.py [--trials 100,300]
        [--asks 10] [--repeats 3] [--json]

Under any Optuna release (`PYTHONPATH=build/python $(../shared/tools/optuna-python 5.0) ...` for
5.0); where the release has its own GPSampler (4.2 on), it is timed too.

For each history size N: a study in memory holding N completed trials of a six-parameter space
(three floats, one on a log scale; an int on a log scale; an int; a categorical of four), drawn
at random with seed 0, their values a smooth function of them; then --asks more trials, each asked
(study.ask() and the six suggest_* calls, where a sampler does its work) and told. The time of one
ask is the median over those asks and over --repeats fresh studies; both samplers see the same
histories. A table, or one JSON object per sampler and size.
"""

import argparse
import json
import math
import random
import statistics
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


def suggest(trial):
    return {
        "lr": trial.suggest_float("lr", 1e-5, 1e-1, log=True),
        "dropout": trial.suggest_float("dropout", 0.0, 0.5),
        "wd": trial.suggest_float("wd", 0.0, 0.1),
        "batch": trial.suggest_int("batch", 16, 512, log=True),
        "layers": trial.suggest_int("layers", 1, 8),
        "opt": trial.suggest_categorical("opt", ["sgd", "adam", "adamw", "rmsprop"]),
    }


def value(p):
    return ((math.log10(p["lr"]) + 3) ** 2 + (p["dropout"] - 0.2) ** 2 + p["wd"]
            + math.log2(p["batch"] / 64) ** 2 / 8 + (p["layers"] - 3) ** 2 / 16
            + (0 if p["opt"] == "adamw" else 0.5))


def history(n):
    rng = random.Random(0)
    out = []
    for _ in range(n):
        p = {"lr": 10 ** rng.uniform(-5, -1), "dropout": rng.uniform(0, 0.5),
             "wd": rng.uniform(0, 0.1), "batch": int(round(2 ** rng.uniform(4, 9))),
             "layers": rng.randint(1, 8), "opt": rng.choice(["sgd", "adam", "adamw", "rmsprop"])}
        out.append(p)
    return out


DISTRIBUTIONS = {
    "lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
    "dropout": optuna.distributions.FloatDistribution(0.0, 0.5),
    "wd": optuna.distributions.FloatDistribution(0.0, 0.1),
    "batch": optuna.distributions.IntDistribution(16, 512, log=True),
    "layers": optuna.distributions.IntDistribution(1, 8),
    "opt": optuna.distributions.CategoricalDistribution(["sgd", "adam", "adamw", "rmsprop"]),
}


def ask_times(make_sampler, n, asks, seed):
    study = optuna.create_study(sampler=make_sampler(seed))
    for p in history(n):
        study.add_trial(optuna.trial.create_trial(params=p, distributions=DISTRIBUTIONS,
                                                  value=value(p)))
    times = []
    for _ in range(asks):
        start = time.perf_counter()
        trial = study.ask()
        p = suggest(trial)
        times.append(time.perf_counter() - start)
        study.tell(trial, value(p))
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", default="100,300")
    ap.add_argument("--asks", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import hyperpack.optuna
    samplers = {
        "hyperpack GPSampler": lambda seed: hyperpack.optuna.GPSampler(seed=seed),
        "Optuna TPESampler": lambda seed: optuna.samplers.TPESampler(seed=seed),
    }
    if hasattr(optuna.samplers, "GPSampler"):
        samplers[f"Optuna {optuna.__version__} GPSampler"] = (
            lambda seed: optuna.samplers.GPSampler(seed=seed))
    rows = []
    for n in (int(x) for x in args.trials.split(",")):
        for name, make in samplers.items():
            times = []
            for r in range(args.repeats):
                times += ask_times(make, n, args.asks, r)
            rows.append({"sampler": name, "trials": n, "median_ms": 1e3 * statistics.median(times),
                         "max_ms": 1e3 * max(times), "asks": len(times)})
            if args.json:
                print(json.dumps(rows[-1]), flush=True)
    if not args.json:
        print("| sampler | history | one ask, median | max |")
        print("|---|---|---|---|")
        for r in rows:
            print(f"| {r['sampler']} | {r['trials']} | {r['median_ms']:.1f} ms | {r['max_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
