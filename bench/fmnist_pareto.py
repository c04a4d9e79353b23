#!/usr/bin/python3
"""A real two-objective study: hyperpack-trainer's MLP on Fashion-MNIST, validation accuracy
against model size, hyperpack against Optuna 3.1's NSGA-II and MOTPE on the same trials.

Each trial is one run of hyperpack-trainer (libtorch, one CPU thread): an MLP 784-w1-w2-10 trained
on the first 6,000 Fashion-MNIST training images for 2 epochs (a tenth held out for validation),
with the trial's learning rate, widths, batch size and dropout. Its objectives are val_accuracy
(maximised; the last epoch's) and params, the MLP's weight and bias count, 784 w1 + w1 + w1 w2 +
w2 + 10 w2 + 10 (minimised), which the trial program prints before it trains.

Methods, the same space, budget and seeds:
  hyperpack  `hyperpack run` on the study file this script writes (objectives: val_accuracy
             maximize, params minimize; the default tuner gp with tuner.seed), one trial at a time;
  nsga2      Optuna's NSGAIISampler (its default population of 50: at 30 trials, its random first
             generation), asking and telling in this process, the trial run as a subprocess;
  motpe      Optuna's TPESampler (MOTPE with several directions; 10 random startup trials).

Measure: the hypervolume of the completed trials' (1 - val_accuracy, log10 params) among the first
N, against the reference point (1, 6) (every MLP here has under 10^6 parameters), medians over
seeds. log10 because model sizes span two decades: a linear scale would give all the area to the
largest models.

Usage (with hyperpack-trainer built; any build of it: a trainer-only build is enough):
  /usr/bin/python3 bench/fmnist_pareto.py run --trainer PATH [--hyperpack build/cli/hyperpack]
      [--seeds 3] [--budget 30] [--methods hyperpack,nsga2,motpe] [--out FILE.json]
  /usr/bin/python3 bench/fmnist_pareto.py table FILE.json [...]
  /usr/bin/python3 bench/fmnist_pareto.py eval TRAINER lr=.. w1=.. w2=.. batch_size=.. dropout=..
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

SPACE = {  # name: (kind, low, high, log) or ("categorical", values)
    "lr": ("float", 1e-3, 0.5, True),
    "w1": ("int", 8, 512, True),
    "w2": ("int", 8, 256, True),
    "batch_size": ("categorical", [32, 64, 128, 256]),
    "dropout": ("float", 0.0, 0.5, False),
}
REFERENCE = (1.0, 6.0)


def mlp_params(w1, w2):
    return 784 * w1 + w1 + w1 * w2 + w2 + 10 * w2 + 10


def evaluate(trainer, p):
    """Prints the trial's metrics as hyperpack reads them: params first, then the trainer's."""
    print(json.dumps({"params": mlp_params(int(p["w1"]), int(p["w2"]))}), flush=True)
    args = [trainer, "--model", "mlp", "--mlp-widths", f"{int(p['w1'])},{int(p['w2'])}",
            "--lr", str(p["lr"]), "--batch-size", str(int(p["batch_size"])),
            "--dropout", str(p["dropout"]), "--epochs", "2", "--train-samples", "6000",
            "--test=false", "--threads", "1", "--seed", "0"]
    env = {k: v for k, v in os.environ.items() if k != "HYPERPACK_PARAMS_FILE"}
    return subprocess.run(args, env=env).returncode


def last_accuracy(output):
    acc = None
    for line in output.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if isinstance(m, dict) and isinstance(m.get("val_accuracy"), (int, float)):
            acc = float(m["val_accuracy"])
    return acc


def hypervolume_2d(points, ref):
    pts = sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1])
    hv, best_y = 0.0, ref[1]
    for x, y in pts:
        if y < best_y:
            hv += (ref[0] - x) * (best_y - y)
            best_y = y
    return hv


def point(acc, params):
    return (1.0 - acc, math.log10(params)) if acc is not None and params else None


def study_yaml(name, seed, budget, trainer):
    lines = [f"name: {name}", "objectives:", "  - {metric: val_accuracy, direction: maximize}",
             "  - {metric: params, direction: minimize}", "search_space:"]
    for n, spec in SPACE.items():
        if spec[0] == "categorical":
            lines.append(f"  {n}: {{type: categorical, values: {spec[1]}}}")
        else:
            log = ", log: true" if spec[3] else ""
            lines.append(f"  {n}: {{type: {spec[0]}, low: {spec[1]}, high: {spec[2]}{log}}}")
    args = " ".join(f"{n}={{{n}}}" for n in SPACE)
    lines += [f"trial: {{command: \"/usr/bin/python3 {os.path.abspath(__file__)} eval {trainer} "
              f"{args}\", warm: false}}",
              f"tuner: {{seed: {seed}}}", f"budget: {{max_trials: {budget}}}"]
    return "\n".join(lines) + "\n"


def run_hyperpack(hyperpack, trainer, seed, budget, work):
    name = f"fmnist-pareto-s{seed}"
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(study_yaml(name, seed, budget, trainer))
    db = os.path.join(work, name + ".db")
    subprocess.run([hyperpack, "run", path, "--storage", db, "--progress", "quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([hyperpack, "trials", name, "--json", "--storage", db], check=True,
                         capture_output=True, text=True).stdout
    points = []
    for t in sorted(json.loads(out), key=lambda t: t["trial"]):
        v = t.get("values") or {}
        ok = t.get("state") == "completed"
        points.append(point(v.get("val_accuracy"), v.get("params")) if ok else None)
    return points


def run_optuna(method, trainer, seed, budget):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = (optuna.samplers.NSGAIISampler(seed=seed) if method == "nsga2"
               else optuna.samplers.TPESampler(seed=seed))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    dists = {}
    for n, spec in SPACE.items():
        if spec[0] == "categorical":
            dists[n] = optuna.distributions.CategoricalDistribution(spec[1])
        elif spec[0] == "int":
            dists[n] = optuna.distributions.IntDistribution(spec[1], spec[2], log=spec[3])
        else:
            dists[n] = optuna.distributions.FloatDistribution(spec[1], spec[2], log=spec[3])
    points = []
    for _ in range(budget):
        trial = study.ask(dists)
        args = [f"{n}={v}" for n, v in trial.params.items()]
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "eval", trainer] + args,
                             capture_output=True, text=True)
        acc = last_accuracy(out.stdout)
        params = mlp_params(trial.params["w1"], trial.params["w2"])
        if out.returncode != 0 or acc is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            points.append(None)
        else:
            study.tell(trial, [acc, params])
            points.append(point(acc, params))
    return points


def cmd_run(a):
    methods = a.methods.split(",")
    results = {"budget": a.budget, "runs": []}
    if a.out and os.path.exists(a.out):
        with open(a.out) as f:
            results = json.load(f)
    with tempfile.TemporaryDirectory() as work:
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            for m in methods:
                start = time.time()
                pts = (run_hyperpack(a.hyperpack, a.trainer, seed, a.budget, work)
                       if m == "hyperpack" else run_optuna(m, a.trainer, seed, a.budget))
                results["runs"].append({"method": m, "seed": seed, "points": pts})
                hv = hypervolume_2d([p for p in pts if p], REFERENCE)
                print(f"{m:10s} seed {seed}: HV {hv:.4f} ({time.time() - start:.0f} s)",
                      file=sys.stderr, flush=True)
                if a.out:
                    with open(a.out, "w") as f:
                        json.dump(results, f)


def cmd_table(a):
    runs = []
    budget = 0
    for path in a.files:
        with open(path) as f:
            r = json.load(f)
        runs += r["runs"]
        budget = max(budget, r["budget"])
    checkpoints = sorted({budget // 2, budget})
    print(f"| method | seeds | " + " | ".join(f"HV@{n}" for n in checkpoints) + " |")
    print("|---|---|" + "---|" * len(checkpoints))
    for m in sorted({r["method"] for r in runs}):
        mine = [r for r in runs if r["method"] == m]
        cells = []
        for n in checkpoints:
            hvs = [hypervolume_2d([p for p in r["points"][:n] if p], REFERENCE) for r in mine]
            cells.append(f"{statistics.median(hvs):.4f} ({min(hvs):.4f}-{max(hvs):.4f})")
        print(f"| {m} | {len(mine)} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--trainer", required=True)
    r.add_argument("--hyperpack", default="build/cli/hyperpack")
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--first-seed", type=int, default=0)
    r.add_argument("--budget", type=int, default=30)
    r.add_argument("--methods", default="hyperpack,nsga2,motpe")
    r.add_argument("--out")
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    e = sub.add_parser("eval")
    e.add_argument("trainer")
    e.add_argument("assignments", nargs="+")
    a = ap.parse_args()
    if a.cmd == "run":
        a.hyperpack = os.path.abspath(a.hyperpack)
        a.trainer = os.path.abspath(a.trainer)
        cmd_run(a)
    elif a.cmd == "table":
        cmd_table(a)
    else:
        p = {}
        for kv in a.assignments:
            k, v = kv.split("=", 1)
            p[k] = float(v)
        sys.exit(evaluate(a.trainer, p))


if __name__ == "__main__":
    main()
