#!/usr/bin/python3
"""Multi-objective tuning: hyperpack's tuner against Optuna 3.1's NSGA-II, MOTPE and random search.

Five test problems, written here from their published definitions, every objective minimised:
  zdt1, zdt2, zdt3  Zitzler, Deb & Thiele (2000) at 6 variables in [0, 1], 2 objectives;
                    reference point (1.1, 11): f1 <= 1 and f2 <= g <= 10 everywhere in the box.
  dtlz2             Deb, Thiele, Laumanns & Zitzler (2002), 3 objectives, 6 variables in [0, 1]
                    (k = 4 distance variables); reference (2.2, 2.2, 2.2): every f_i <= 1 + g <= 2.
  c2dtlz2           Jain & Deb (2014)'s C2-DTLZ2 at 2 objectives, 6 variables (k = 5): DTLZ2 and
                    one constraint, g1 = min(min_i[(f_i - 1)^2 + sum_{j!=i} f_j^2 - r^2],
                    sum_i (f_i - 1/sqrt(2))^2 - r^2) <= 0, with r = 0.2 (the paper gives 0.4 for
                    three objectives and 0.5 beyond; at two, 0.5 leaves the whole front feasible,
                    0.2 cuts it into three arcs). A feasible point has every f_i <= 1.2:
                    reference (1.32, 1.32).
Each reference point is 1.1 x the largest value an objective can take (over the feasible points),
so that every trial counts; a point outside the box would contribute nothing.

Hypervolume (computed here, exactly: a sweep in 2-D, slicing along the last objective above) of
the feasible, completed trials among the first N, at N = budget/2 and budget (50 and 100 by
default), raw and as a percentage of the true front's hypervolume: analytic for zdt1
(12.1 - 1/3), zdt2 (12.1 - 2/3) and dtlz2 (2.2^3 - pi/6: the box less the unit ball's octant);
for zdt3 and c2dtlz2 by a dense sampling of the true front (10^5 points; the three arcs of the
unit circle within r of (1, 0), (0, 1) and (1, 1)/sqrt(2)). Medians over seeds.

Methods: `hyperpack` runs each study through its CLI (`hyperpack run`, its default tuner with
`tuner.seed`, objectives and constraints as metrics: c2dtlz2's is {metric: g1, max: 0}); each
trial is a process, the trial program `eval`, which prints its metrics as one JSON line.
`nsga2` (NSGAIISampler, its default population of 50: the first 50 trials are random),
`motpe` (TPESampler, which in Optuna 3.1 is MOTPE when the study has several directions:
10 random startup trials, independent per-parameter Parzen estimators, the "below" set chosen
by non-domination rank and hypervolume contribution), `random` (RandomSampler, the floor) and
`hyperpack-optuna` (hyperpack's tuner inside Optuna: hyperpack.optuna.GPSampler, the Python
module, PYTHONPATH=build/python) ask and tell in this process with the same problem functions. On c2dtlz2 NSGA-II and MOTPE get
the constraint through `constraints_func` (both support it in 3.1, experimentally: feasible
before infeasible, infeasible ordered by violation), and GPSampler too; random search ignores it. One at a time:
max_parallel 1 and Optuna sequentially. With --parallel 8: max_parallel 8 against Optuna asking
8 trials, evaluating them, telling them (no constant liar: 3.1 has none for several objectives).

Usage (with a python that has Optuna 3.1 and numpy, e.g. /usr/bin/python3):
  /usr/bin/python3 bench/multi_objective.py run [--problems all] [--seeds 5] [--first-seed 0]
      [--budget 100] [--methods hyperpack,nsga2,motpe,random] [--parallel 1[,8]]
      [--out multi_objective.json] [--hyperpack build/cli/hyperpack] [--jobs 1]
  /usr/bin/python3 bench/multi_objective.py table FILE.json [FILE.json ...]  # markdown, merged
  /usr/bin/python3 bench/multi_objective.py eval PROBLEM NAME=VALUE ...      # the trial program
  /usr/bin/python3 bench/multi_objective.py study PROBLEM [--seed 0] [--budget 100] [--parallel 1]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

# ---- the problems (pure Python: `eval` runs once per trial and should start fast) -----------


def zdt(h):
    def f(x):
        f1 = x[0]
        g = 1.0 + 9.0 * sum(x[1:]) / (len(x) - 1)
        return {"f1": f1, "f2": g * h(f1, g)}
    return f


def dtlz2_objectives(x, m):
    g = sum((v - 0.5) ** 2 for v in x[m - 1:])
    out = []
    for i in range(m):
        v = 1.0 + g
        for j in range(m - 1 - i):
            v *= math.cos(x[j] * math.pi / 2)
        if i > 0:
            v *= math.sin(x[m - 1 - i] * math.pi / 2)
        out.append(v)
    return out


def dtlz2(x):
    return {f"f{i + 1}": v for i, v in enumerate(dtlz2_objectives(x, 3))}


def c2dtlz2(x, r=0.2):
    f = dtlz2_objectives(x, 2)
    m = len(f)
    terms = [(f[i] - 1.0) ** 2 + sum(f[j] ** 2 for j in range(m) if j != i) - r * r
             for i in range(m)]
    terms.append(sum((v - 1.0 / math.sqrt(m)) ** 2 for v in f) - r * r)
    return {"f1": f[0], "f2": f[1], "g1": min(terms)}


def zdt3_front(n=100001):
    return [(a, 1.0 - math.sqrt(a) - a * math.sin(10 * math.pi * a))
            for a in (i / (n - 1) for i in range(n))]


def c2dtlz2_front(n=33334, r=0.2):
    w = 2.0 * math.asin(r / 2.0)  # the angle whose chord on the unit circle is r
    arcs = [(0.0, w), (math.pi / 4 - w, math.pi / 4 + w), (math.pi / 2 - w, math.pi / 2)]
    return [(math.cos(t), math.sin(t)) for lo, hi in arcs
            for t in (lo + (hi - lo) * i / (n - 1) for i in range(n))]


# name: (function, variables, objectives, constraints (metric, "max"/"min", bound), reference,
#        true front's hypervolume: a number or a function of the reference giving it)
PROBLEMS = {
    "zdt1": (zdt(lambda f1, g: 1.0 - math.sqrt(f1 / g)), 6, ["f1", "f2"], [], (1.1, 11.0),
             12.1 - 1.0 / 3.0),
    "zdt2": (zdt(lambda f1, g: 1.0 - (f1 / g) ** 2), 6, ["f1", "f2"], [], (1.1, 11.0),
             12.1 - 2.0 / 3.0),
    "zdt3": (zdt(lambda f1, g: 1.0 - math.sqrt(f1 / g) - f1 / g * math.sin(10 * math.pi * f1)),
             6, ["f1", "f2"], [], (1.1, 11.0), lambda ref: hypervolume(zdt3_front(), ref)),
    "dtlz2": (dtlz2, 6, ["f1", "f2", "f3"], [], (2.2, 2.2, 2.2), 2.2 ** 3 - math.pi / 6),
    "c2dtlz2": (c2dtlz2, 6, ["f1", "f2"], [("g1", "max", 0.0)], (1.32, 1.32),
                lambda ref: hypervolume(c2dtlz2_front(), ref)),
}


def evaluate(problem, params):
    fn, dims = PROBLEMS[problem][:2]
    return fn([float(params[f"x{i}"]) for i in range(dims)])


def violations(problem, metrics):
    """Per constraint, how far it is broken (> 0) or met (<= 0): Optuna's convention."""
    return [metrics[m] - b if kind == "max" else b - metrics[m]
            for m, kind, b in PROBLEMS[problem][3]]


def point(problem, metrics):
    """The objective vector of a feasible trial, None for an infeasible one."""
    if any(v > 0 for v in violations(problem, metrics)):
        return None
    return [float(metrics[o]) for o in PROBLEMS[problem][2]]


def true_hypervolume(problem, cache={}):
    if problem not in cache:
        hv, ref = PROBLEMS[problem][5], PROBLEMS[problem][4]
        cache[problem] = hv(ref) if callable(hv) else hv
    return cache[problem]


# ---- hypervolume -----------------------------------------------------------------------------

def hypervolume(points, ref):
    """The volume dominated by `points` and bounded by `ref` (minimisation), exactly."""
    pts = sorted(tuple(p) for p in points if all(a < r for a, r in zip(p, ref)))
    if not pts:
        return 0.0
    if len(ref) == 1:
        return ref[0] - pts[0][0]
    if len(ref) == 2:  # sweep along f1: each point that lowers the running minimum of f2
        hv, low = 0.0, ref[1]
        for x, y in pts:
            if y < low:
                hv += (ref[0] - x) * (low - y)
                low = y
        return hv
    # slices along the last objective: between consecutive levels, the (d-1)-volume of the
    # points at or below the level
    pts.sort(key=lambda p: p[-1])
    hv = 0.0
    for i, p in enumerate(pts):
        top = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if top > p[-1]:
            hv += (top - p[-1]) * hypervolume([q[:-1] for q in pts[:i + 1]], ref[:-1])
    return hv


def hv_at(problem, points, n):
    return hypervolume([p for p in points[:n] if p is not None], PROBLEMS[problem][4])


def checkpoints(budget):
    return sorted({max(1, budget // 2), budget})


# ---- the methods -----------------------------------------------------------------------------

def study_name(problem, seed, parallel):
    return f"{problem}-s{seed}-p{parallel}"


def study_yaml(problem, seed, budget, parallel):
    _, dims, objectives, constraints, _, _ = PROBLEMS[problem]
    lines = [f"name: {study_name(problem, seed, parallel)}", "objectives:"]
    lines += [f"  - {{metric: {o}, direction: minimize}}" for o in objectives]
    if constraints:
        lines.append("constraints:")
        lines += [f"  - {{metric: {m}, {kind}: {b!r}}}" for m, kind, b in constraints]
    lines.append("search_space:")
    lines += [f"  x{i}: {{type: float, low: 0.0, high: 1.0}}" for i in range(dims)]
    args = " ".join(f"x{i}={{x{i}}}" for i in range(dims))
    lines += [f"trial: {{command: \"{sys.executable} {os.path.abspath(__file__)} eval "
              f"{problem} {args}\"}}",
              f"tuner: {{seed: {seed}}}",
              f"budget: {{max_trials: {budget}, max_parallel: {parallel}}}"]
    return "\n".join(lines) + "\n"


def hyperpack_point(problem, trial):
    """A trial of `hyperpack trials --json` as a point (None: not completed, or infeasible).
    Its metrics come from "values"; where they are missing, from "params" through the problem."""
    if trial.get("state", "completed") not in ("completed", "complete"):
        return None
    _, _, objectives, constraints, _, _ = PROBLEMS[problem]
    values = trial.get("values")
    needed = objectives + [m for m, _, _ in constraints]
    if isinstance(values, dict) and all(values.get(m) is not None for m in needed):
        metrics = {m: float(values[m]) for m in needed}
    elif isinstance(trial.get("params"), dict):
        metrics = evaluate(problem, trial["params"])
    else:
        return None
    return point(problem, metrics)


def run_hyperpack(hyperpack, problem, seed, budget, parallel, work):
    base = os.path.join(work, study_name(problem, seed, parallel))
    with open(base + ".yaml", "w") as f:
        f.write(study_yaml(problem, seed, budget, parallel))
    subprocess.run([hyperpack, "run", base + ".yaml", "--storage", base + ".db",
                    "--progress", "quiet"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([hyperpack, "trials", study_name(problem, seed, parallel), "--json",
                          "--storage", base + ".db"], check=True, capture_output=True,
                         text=True).stdout
    trials = sorted(json.loads(out), key=lambda t: t.get("trial", 0))
    return [hyperpack_point(problem, t) for t in trials][:budget]


def run_optuna(method, problem, seed, budget, parallel):
    import warnings
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")  # ExperimentalWarning for constraints_func
    _, dims, objectives, constraints, _, _ = PROBLEMS[problem]
    cons = (lambda t: t.user_attrs["violations"]) if constraints else None
    if method == "nsga2":
        sampler = optuna.samplers.NSGAIISampler(seed=seed, constraints_func=cons)
    elif method == "motpe":
        sampler = optuna.samplers.TPESampler(seed=seed, constraints_func=cons)
    elif method == "random":
        sampler = optuna.samplers.RandomSampler(seed=seed)
    elif method == "hyperpack-optuna":
        import hyperpack.optuna  # the Python module: PYTHONPATH=build/python
        sampler = hyperpack.optuna.GPSampler(seed=seed, constraints_func=cons)
    else:
        raise SystemExit(f"unknown method {method}")
    study = optuna.create_study(directions=["minimize"] * len(objectives), sampler=sampler)
    space = {f"x{i}": optuna.distributions.FloatDistribution(0.0, 1.0) for i in range(dims)}
    points = []
    while len(points) < budget:
        batch = [study.ask(space) for _ in range(min(parallel, budget - len(points)))]
        for trial in batch:
            metrics = evaluate(problem, trial.params)
            if constraints:
                trial.set_user_attr("violations", violations(problem, metrics))
            study.tell(trial, [metrics[o] for o in objectives])
            points.append(point(problem, metrics))
    return points


def one(job):
    method, problem, seed, parallel, budget, hyperpack, work = job
    start = time.time()
    if method == "hyperpack":
        points = run_hyperpack(hyperpack, problem, seed, budget, parallel, work)
    else:
        points = run_optuna(method, problem, seed, budget, parallel)
    return {"method": method, "problem": problem, "seed": seed, "parallel": parallel,
            "points": points, "seconds": time.time() - start,
            "hv": {str(n): hv_at(problem, points, n) for n in checkpoints(budget)}}


def run(args):
    from concurrent.futures import ProcessPoolExecutor, as_completed
    problems = list(PROBLEMS) if args.problems == "all" else args.problems.split(",")
    methods = args.methods.split(",")
    work = tempfile.mkdtemp(prefix="multi-objective-")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(m, p, s, par, args.budget, args.hyperpack, work)
            for par in (int(x) for x in str(args.parallel).split(","))
            for p in problems for s in seeds for m in methods]
    results, start = [], time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        for i, done in enumerate(as_completed([pool.submit(one, j) for j in jobs])):
            r = done.result()
            results.append(r)
            hv = ", ".join(f"HV@{n} {v:.4f}" for n, v in r["hv"].items())
            print(f"[{i + 1}/{len(jobs)}] {r['method']:9s} {r['problem']:8s} seed {r['seed']} "
                  f"x{r['parallel']}: {hv} ({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump({"budget": args.budget, "results": results}, f)
    print(f"wrote {args.out} ({time.time() - start:.0f} s)", file=sys.stderr)


# ---- the table -------------------------------------------------------------------------------

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2.0


def table(files):
    results, budget = [], None
    for path in files:
        with open(path) as f:
            data = json.load(f)
        budget = data["budget"] if budget is None else min(budget, data["budget"])
        results += data["results"]
    ns = checkpoints(budget)
    methods = sorted({r["method"] for r in results},
                     key=lambda m: (m != "hyperpack", m))
    for parallel in sorted({r["parallel"] for r in results}):
        print(f"\n### max_parallel {parallel}: median hypervolume over seeds "
              f"(% of the true front's)\n")
        print("| problem | reference | true HV | method | seeds | "
              + " | ".join(f"HV@{n} | rank@{n}" for n in ns) + " |")
        print("|" + "---|" * (5 + 2 * len(ns)))
        ranks = {}
        for problem in [p for p in PROBLEMS if any(r["problem"] == p for r in results)]:
            true = true_hypervolume(problem)
            med = {}
            for m in methods:
                rs = [r for r in results if r["method"] == m and r["problem"] == problem
                      and r["parallel"] == parallel]
                if rs:
                    med[m] = ([median([hv_at(problem, r["points"], n) for r in rs]) for n in ns],
                              len(rs))
            for m, (hvs, k) in med.items():
                rank = [1 + sum(o[0][j] > hvs[j] for o in med.values()) for j in range(len(ns))]
                ranks[(m, problem)] = rank
                cells = " | ".join(f"{v:.4g} ({100 * v / true:.1f}%) | {rk}/{len(med)}"
                                   for v, rk in zip(hvs, rank))
                ref = ", ".join(f"{v:g}" for v in PROBLEMS[problem][4])
                print(f"| {problem} | ({ref}) | {true:.4g} | {m} | {k} | {cells} |")
        if any(m == "hyperpack" for m, _ in ranks):
            per = ", ".join(f"{p} {'/'.join(map(str, rk))}"
                            for (m, p), rk in ranks.items() if m == "hyperpack")
            print(f"\nhyperpack's rank at {'/'.join(map(str, ns))} trials: {per}")


# ---- the command line ------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--problems", default="all")
    r.add_argument("--seeds", type=int, default=5)
    r.add_argument("--first-seed", type=int, default=0,
                   help="the seeds run: first-seed .. first-seed + seeds - 1")
    r.add_argument("--budget", type=int, default=100)
    r.add_argument("--methods", default="hyperpack,nsga2,motpe,random")
    r.add_argument("--parallel", default="1",
                   help="trials at a time (hyperpack's max_parallel, Optuna's batch); a list: 1,8")
    r.add_argument("--hyperpack", default=os.path.abspath("build/cli/hyperpack"))
    r.add_argument("--jobs", type=int, default=1, help="studies run at once")
    r.add_argument("--out", default="multi_objective.json")
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    e = sub.add_parser("eval")
    e.add_argument("problem", choices=list(PROBLEMS))
    e.add_argument("params", nargs="*", help="x0=VALUE x1=VALUE ...")
    s = sub.add_parser("study", help="print the study file `run` gives hyperpack")
    s.add_argument("problem", choices=list(PROBLEMS))
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--budget", type=int, default=100)
    s.add_argument("--parallel", type=int, default=1)
    a = p.parse_args()
    if a.command == "run":
        a.hyperpack = os.path.abspath(a.hyperpack)
        run(a)
    elif a.command == "table":
        table(a.files)
    elif a.command == "study":
        sys.stdout.write(study_yaml(a.problem, a.seed, a.budget, a.parallel))
    else:
        params = dict(kv.split("=", 1) for kv in a.params)
        print(json.dumps(evaluate(a.problem, params)), flush=True)


if __name__ == "__main__":
    main()
