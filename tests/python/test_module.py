"""The Python module: hyperpack.optuna.GPSampler in real Optuna studies, hyperpack.Tuner's
errors, and hyperpack.report in a trial that `hyperpack run` starts. ctest runs it under each
Optuna release users run: Debian's 3.1 (/usr/bin/python3), 4.6 and 5.0 (tests/python/optuna_python);
the few cases that need one release's API say so when skipped."""

import json
import math
import os
import statistics
import subprocess
import sys

import optuna
import pytest

import hyperpack
import hyperpack.optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


def shifted_sphere(trial):
    """A smooth bowl with its floor inside the space: lr 1e-3, layers 3, batch 64, adam."""
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    layers = trial.suggest_int("layers", 1, 8)
    batch = trial.suggest_int("batch", 16, 512, log=True)
    opt = trial.suggest_categorical("opt", ["sgd", "adam", None])
    return ((math.log10(lr) + 3) ** 2 + (layers - 3) ** 2 / 4 + math.log2(batch / 64) ** 2 / 4
            + (0 if opt == "adam" else 1))


def best_after(sampler, n, objective=shifted_sphere, direction="minimize"):
    study = optuna.create_study(sampler=sampler, direction=direction)
    study.optimize(objective, n_trials=n)
    return study


def test_beats_random_search_on_a_smooth_mixed_space():
    gp = [best_after(hyperpack.optuna.GPSampler(seed=s), 30).best_value for s in range(4)]
    rnd = [best_after(optuna.samplers.RandomSampler(seed=s), 30).best_value for s in range(4)]
    assert statistics.median(gp) < statistics.median(rnd), (gp, rnd)
    assert min(gp) < 0.01, gp


def test_a_seed_repeats_the_study_and_every_value_is_in_its_space():
    a = best_after(hyperpack.optuna.GPSampler(seed=7), 15)
    b = best_after(hyperpack.optuna.GPSampler(seed=7), 15)
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    for t in a.trials:
        assert 1e-5 <= t.params["lr"] <= 1e-1
        assert isinstance(t.params["layers"], int) and 1 <= t.params["layers"] <= 8
        assert t.params["opt"] in ("sgd", "adam", None)
    assert len({tuple(sorted(t.params.items(), key=str)) for t in a.trials}) == 15


def test_maximising_a_negated_objective_proposes_what_minimising_it_does():
    up = best_after(hyperpack.optuna.GPSampler(seed=1), 15, lambda t: -shifted_sphere(t),
                    direction="maximize")
    down = best_after(hyperpack.optuna.GPSampler(seed=1), 15)
    assert [t.params for t in up.trials] == [t.params for t in down.trials]
    assert up.best_value == -down.best_value


def test_a_conditional_space_draws_what_is_not_shared_independently():
    def objective(trial):
        kind = trial.suggest_categorical("kind", ["linear", "tree"])
        if kind == "linear":
            c = trial.suggest_float("c", 1e-3, 1e3, log=True)
            return abs(math.log10(c))
        depth = trial.suggest_int("depth", 1, 12)
        step = trial.suggest_float("min_leaf", 0.0, 0.5, step=0.05)
        return 1 + abs(depth - 6) / 6 + step

    study = best_after(hyperpack.optuna.GPSampler(seed=3), 25, objective)
    assert study.best_value < 1.0  # the linear branch, found
    for t in study.trials:
        if "min_leaf" in t.params:
            assert round(t.params["min_leaf"] / 0.05, 6).is_integer()


def test_pruned_trials_are_learned_from_and_the_study_goes_on():
    def objective(trial):
        x = trial.suggest_float("x", -4, 4)
        for step in range(1, 6):
            value = (x - 1) ** 2 + 1 / step
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return value

    study = optuna.create_study(
        sampler=hyperpack.optuna.GPSampler(seed=2),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1))
    study.optimize(objective, n_trials=30)
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.PRUNED in states
    assert study.best_value < 0.3


def test_parallel_threads_get_distinct_proposals():
    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=4))
    study.optimize(shifted_sphere, n_trials=24, n_jobs=2)
    params = [tuple(sorted(t.params.items(), key=str)) for t in study.trials]
    assert len(study.trials) == 24
    assert len(set(params)) == 24


def test_failed_trials_do_not_stop_the_study():
    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        if x > 0.8:
            raise ValueError("diverged")
        return x

    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=5))
    study.optimize(objective, n_trials=20, catch=(ValueError,))
    assert len(study.trials) == 20
    assert study.best_value < 0.1


def zdt1(trial):
    """ZDT1 in 4 dimensions: a convex front f2 = 1 - sqrt(f1) where x1..x3 are 0."""
    x = [trial.suggest_float(f"x{i}", 0, 1) for i in range(4)]
    g = 1 + 9 * sum(x[1:]) / 3
    return x[0], g * (1 - math.sqrt(x[0] / g))


def front_hypervolume(study, ref=(1.1, 11)):
    """The exact hypervolume of the study's best trials (two minimised objectives)."""
    hv, floor = 0.0, ref[1]
    for a, b in sorted(tuple(t.values) for t in study.best_trials):
        if a < ref[0] and b < floor:
            hv += (ref[0] - a) * (floor - b)
            floor = b
    return hv


def test_a_multi_objective_study_finds_more_of_the_front_than_random_search():
    def run(sampler):
        study = optuna.create_study(sampler=sampler, directions=["minimize", "minimize"])
        study.optimize(zdt1, n_trials=30)
        return front_hypervolume(study)
    gp = [run(hyperpack.optuna.GPSampler(seed=s)) for s in range(3)]
    rnd = [run(optuna.samplers.RandomSampler(seed=s)) for s in range(3)]
    assert min(gp) > max(rnd), (gp, rnd)


def test_constraints_func_is_stored_as_optunas_samplers_store_it_and_steers_proposals():
    # x0 + x1 >= 1.2: a corner of the square, about a third of it.
    def constraints(trial):
        return [1.2 - trial.params["x0"] - trial.params["x1"]]
    study = optuna.create_study(
        sampler=hyperpack.optuna.GPSampler(seed=2, constraints_func=constraints),
        directions=["minimize", "minimize"])
    study.optimize(zdt1, n_trials=30)
    held = [t.system_attrs["constraints"][0] <= 0 for t in study.trials]
    assert all(t.system_attrs["constraints"] == constraints(t) for t in study.trials)
    # After the initial design the model keeps most proposals where the constraint holds.
    assert sum(held[10:]) >= 14, held


@pytest.mark.skipif(not hasattr(optuna.trial.Trial, "set_constraint"),
                    reason="Trial.set_constraint came with Optuna 5.0")
def test_constraints_set_in_the_objective_steer_proposals_as_constraints_func_does():
    # The same corner as above, and a second constraint that always holds, both by name.
    def objective(trial):
        values = zdt1(trial)
        trial.set_constraint("sum", 1.2 - trial.params["x0"] - trial.params["x1"])
        trial.set_constraint("slack", -1.0)
        return values
    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=2),
                                directions=["minimize", "minimize"])
    study.optimize(objective, n_trials=30)
    assert all(set(t.constraints) == {"sum", "slack"} for t in study.trials)
    held = [t.constraints["sum"] <= 0 for t in study.trials]
    assert sum(held[10:]) >= 14, held
    # Optuna's own front keeps only trials whose constraints all hold.
    assert study.best_trials and all(t.constraints["sum"] <= 0 for t in study.best_trials)


def test_a_constraint_a_trial_lacks_counts_as_broken():
    # Trials at x <= 0.5 report a constraint that holds; the rest report it broken (+inf), or
    # holding, or never say. Never saying is modelled as broken: the same proposals.
    def proposals(right):
        study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=3))
        def objective(trial):
            x = trial.suggest_float("x", 0, 1)
            said = [x - 0.5] if x <= 0.5 else right
            if said is not None:
                study._storage.set_trial_system_attr(trial._trial_id, "constraints", said)
            return -x
        study.optimize(objective, n_trials=16)
        return [t.params["x"] for t in study.trials]
    silent = proposals(None)
    assert silent == proposals([math.inf])
    assert silent != proposals([-1.0])


@pytest.mark.parametrize("version", ["2.10.1", "6.0.0", "3.0.6"])
def test_a_release_it_was_not_made_for_is_refused_saying_which_are(version):
    code = ("import optuna; optuna.__version__ = %r\n"
            "import hyperpack.optuna" % version)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ)
    assert run.returncode != 0
    assert f"hyperpack.optuna supports Optuna 3.1 to 5.x" in run.stderr, run.stderr
    assert f"this is Optuna {version}" in run.stderr, run.stderr


def test_the_tuner_says_what_is_wrong_with_a_space():
    with pytest.raises(ValueError, match="'x': low must not exceed high"):
        hyperpack.Tuner([{"name": "x", "type": "float", "low": 1, "high": 0}])
    with pytest.raises(ValueError, match="'y': a log scale needs low > 0"):
        hyperpack.Tuner([{"name": "y", "type": "float", "low": 0, "high": 1, "log": True}])
    with pytest.raises(ValueError, match="'x': 'low' must be a number"):
        hyperpack.Tuner([{"name": "x", "type": "float", "low": "zero", "high": 1}])
    with pytest.raises(ValueError, match="type 'complex'"):
        hyperpack.Tuner([{"name": "z", "type": "complex"}])
    tuner = hyperpack.Tuner([{"name": "x", "type": "int", "low": 0, "high": 3}], seed=1)
    with pytest.raises(ValueError):
        tuner.observe({"x": 7}, "completed", 1.0)  # outside the space
    with pytest.raises(ValueError, match="state 'done'"):
        tuner.observe({"x": 1}, "done", 1.0)
    seen = {tuner.propose(1, [])[0]["x"] for _ in range(1)}
    assert seen <= {0, 1, 2, 3}


def test_report_prints_the_line_a_run_reads(tmp_path):
    """A trial program that reports with hyperpack.report, run by `hyperpack run`."""
    import os
    import subprocess

    program = tmp_path / "train.py"
    program.write_text(
        "import sys, hyperpack\n"
        "x = float(sys.argv[1])\n"
        "for step in range(1, 4):\n"
        "    hyperpack.report(step=step, loss=(x - 0.3) ** 2 + 1 / step, lr=x)\n")
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: s\nobjective: {metric: loss, direction: minimize}\n"
        "search_space: {x: {type: float, low: 0, high: 1}}\n"
        f"trial: {{command: \"/usr/bin/python3 {program} {{x}}\"}}\n"
        "budget: {max_trials: 3}\n")
    cli = os.environ["HYPERPACK_CLI"]
    # The trial's python finds this hyperpack package wherever the test was started.
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(hyperpack.__file__)))
    run = subprocess.run([cli, "run", str(study), "--storage", str(tmp_path / "h.db")],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    trials = subprocess.run([cli, "trials", "s", "--json", "--storage", str(tmp_path / "h.db")],
                            capture_output=True, text=True)
    import json
    rows = json.loads(trials.stdout)
    assert [r["state"] for r in rows] == ["completed"] * 3
    for r in rows:
        assert abs(r["value"] - ((r["params"]["x"] - 0.3) ** 2 + 1 / 3)) < 1e-12


def test_report_refuses_what_is_not_a_number():
    import io
    out = io.StringIO()
    hyperpack.report(step=2, loss=float("nan"), file=out)
    assert out.getvalue() == '{"step": 2, "loss": NaN}\n'
    with pytest.raises(TypeError, match="metric 'loss'"):
        hyperpack.report(loss="low")
    with pytest.raises(TypeError, match="step"):
        hyperpack.report(step=1.5, loss=1.0)
    with pytest.raises(TypeError, match="at least one metric"):
        hyperpack.report(step=1)


def test_a_study_in_an_rdb_storage_goes_on_from_what_it_holds(tmp_path):
    """Two processes' worth of work on one SQLite storage: the second sampler learns the first's."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = optuna.create_study(study_name="s", storage=storage,
                                sampler=hyperpack.optuna.GPSampler(seed=8))
    first.optimize(shifted_sphere, n_trials=12, n_jobs=2)
    again = optuna.load_study(study_name="s", storage=storage,
                              sampler=hyperpack.optuna.GPSampler(seed=9))
    again.optimize(shifted_sphere, n_trials=12)
    trials = again.get_trials()
    assert len(trials) == 24
    assert len({tuple(sorted(t.params.items(), key=str)) for t in trials}) == 24
    # The continuation models the first twelve: it starts from the model, not from a new design.
    assert min(t.value for t in trials[12:]) <= min(t.value for t in trials[:12])


def test_the_optuna_example_runs_as_written():
    import os
    import subprocess

    if not os.path.exists("/usr/share/datasets/fashion-mnist"):
        pytest.skip("no Fashion-MNIST: install dataset-fashion-mnist")
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "optuna",
                           "fmnist_softmax.py")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(hyperpack.__file__)))
    run = subprocess.run(["/usr/bin/python3", example, "--trials", "8", "--train-samples", "2000"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("8 trials") and "best val_loss" in last, last


def test_an_enqueued_configuration_runs_and_is_learned_from():
    sampler = hyperpack.optuna.GPSampler(seed=6)
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"lr": 1e-3, "layers": 3, "batch": 64, "opt": "adam"})  # the floor
    study.optimize(shifted_sphere, n_trials=10)
    assert study.trials[0].params["lr"] == 1e-3 and study.best_value == 0.0
    assert len({tuple(sorted(t.params.items(), key=str)) for t in study.trials}) == 10


# ---- hyperpack's own stored studies from Python: load_study, ask, tell, the lifecycle verbs ----

ASKED_STUDY = """name: q
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.0001, high: 0.1, log: true}
  opt: {type: categorical, values: [sgd, adam]}
budget: {max_trials: 10}
"""


def bowl(params):
    return (math.log10(params["lr"]) + 3) ** 2 + (params["opt"] != "adam")


def test_a_study_is_asked_and_told_from_python(tmp_path):
    (tmp_path / "q.yaml").write_text(ASKED_STUDY)
    storage = str(tmp_path / "h.db")
    study = hyperpack.create_study(str(tmp_path / "q.yaml"), storage)
    assert study.name == "q" and study.best_trial is None
    study.add_results([({"lr": 0.05, "opt": "sgd"}, bowl({"lr": 0.05, "opt": "sgd"}))])
    study.enqueue({"lr": 0.002, "opt": "adam"})
    first = study.ask()
    assert first.params == {"lr": 0.002, "opt": "adam"}, "the enqueued configuration goes first"
    study.tell(first, bowl(first.params))
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, bowl(trial.params))
    # Another program sees the same study.
    again = hyperpack.load_study("q", storage)
    trials = again.trials
    assert [t.number for t in trials] == list(range(10))
    assert all(t.state == "completed" for t in trials)
    assert trials[0].value == pytest.approx(bowl({"lr": 0.05, "opt": "sgd"}))
    assert again.best_value == min(t.value for t in trials)
    assert again.best_params == min(trials, key=lambda t: t.value).params
    assert again.best_value < 0.2, "the tuner found the bowl's floor"


def test_an_asked_trial_that_goes_quiet_is_failed_and_asked_again(tmp_path):
    import sqlite3
    (tmp_path / "q.yaml").write_text(ASKED_STUDY + "ask_timeout: 1h\n")
    storage = str(tmp_path / "h.db")
    study = hyperpack.create_study(str(tmp_path / "q.yaml"), storage)
    quiet, alive = study.ask(), study.ask()
    study.heartbeat(alive)
    # Two hours pass for the quiet one: its last sign of life is moved back in the storage rather
    # than waited for.
    db = sqlite3.connect(storage)
    with db:
        db.execute("UPDATE trials SET heartbeat = heartbeat - 7200 WHERE number = ?",
                   (quiet.number,))
    db.close()
    again = study.ask()
    trials = study.trials
    assert trials[quiet.number].state == "failed"
    assert trials[alive.number].state == "running"
    assert again.params == quiet.params, "the quiet trial's configuration is asked again"
    with pytest.raises(RuntimeError, match="no tell or heartbeat"):
        study.tell(quiet, 0.5)
    study.tell(alive, bowl(alive.params))


def test_a_study_with_two_objectives_is_told_each_value_by_metric(tmp_path):
    (tmp_path / "mo.yaml").write_text(
        "name: mo\n"
        "objectives: [{metric: a, direction: minimize}, {metric: b, direction: minimize}]\n"
        "search_space: {x: {type: float, low: 0, high: 1}}\n")
    storage = str(tmp_path / "h.db")
    study = hyperpack.create_study(str(tmp_path / "mo.yaml"), storage)
    for _ in range(6):
        trial = study.ask()
        x = trial.params["x"]
        study.tell(trial, values={"a": x, "b": (1 - x) ** 2})
    trials = hyperpack.load_study("mo", storage).trials
    assert [t.state for t in trials] == ["completed"] * 6
    assert [t.value for t in trials] == [t.params["x"] for t in trials]  # the first objective's
    with pytest.raises(ValueError, match="tell them with --values"):
        study.tell(study.ask(), 0.5)


def test_a_stored_study_says_what_is_wrong(tmp_path):
    (tmp_path / "q.yaml").write_text(ASKED_STUDY)
    storage = str(tmp_path / "h.db")
    study = hyperpack.create_study(str(tmp_path / "q.yaml"), storage)
    with pytest.raises(KeyError, match="no study named 'nope'"):
        hyperpack.load_study("nope", storage)
    with pytest.raises(ValueError, match="'lr'"):
        study.enqueue({"lr": 5.0, "opt": "adam"})
    with pytest.raises(ValueError, match="opt"):
        study.add_results([({"lr": 0.01, "opt": "rmsprop"}, 1.0)])
    with pytest.raises(RuntimeError, match="stop refused: .*has no runner"):
        study.stop()
    assert "kept" in study.update(max_trials=12, time_limit_s=3600, priority=2)
    with pytest.raises(ValueError, match="update: give"):
        study.update()
    trial = study.ask()
    with pytest.raises(ValueError):
        study.tell(trial, float("nan"))
    study.tell(trial, state="failed")
    assert study.trials[0].state == "failed"
    (tmp_path / "bad.yaml").write_text("name: b\nobjective: {metric: loss}\n")
    with pytest.raises(ValueError, match="bad.yaml"):
        hyperpack.create_study(str(tmp_path / "bad.yaml"), storage)


def test_python_stops_a_study_that_hyperpack_run_runs(tmp_path):
    import subprocess
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "s.yaml").write_text(f"""name: s
objective: {{metric: loss, direction: minimize}}
search_space: {{x: {{type: float, low: 0, high: 1}}}}
trial:
  command: >-
    echo {{trial}} > {fifo}; while [ ! -e {tmp_path}/go ]; do sleep 0.05; done; echo loss={{x}}
budget: {{max_trials: 8, max_parallel: 2}}
""")
    storage = str(tmp_path / "h.db")
    run = subprocess.Popen([os.environ["HYPERPACK_CLI"], "run", str(tmp_path / "s.yaml"),
                            "--storage", storage], cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    # Read-write, so that no trial's write to it ever waits for a reader.
    started = os.open(fifo, os.O_RDWR)
    first = b""
    while not first.endswith(b"\n"):
        first += os.read(started, 1)  # blocks until a trial has started
    assert first.strip() in (b"0", b"1")
    study = hyperpack.load_study("s", storage)
    assert "stopping" in study.stop()
    with pytest.raises(RuntimeError, match="already stopping"):
        study.stop()
    (tmp_path / "go").write_text("")
    out, _ = run.communicate(timeout=120)
    os.close(started)
    assert run.returncode == 0, out
    assert 1 <= len(study.trials) <= 2, "nothing started after the stop"
    assert all(t.state == "completed" for t in study.trials)


def test_best_is_the_one_hyperpack_best_names_constraints_met(tmp_path):
    (tmp_path / "c.yaml").write_text(ASKED_STUDY.replace(
        "budget:", "constraints: [{metric: mem, max: 1}]\nbudget:"))
    study = hyperpack.create_study(str(tmp_path / "c.yaml"), str(tmp_path / "h.db"))
    study.add_results([({"lr": 0.001, "opt": "adam"}, 0.1)])
    told = {}
    for mem in (5.0, 0.5):  # the lower loss breaks the constraint
        trial = study.ask()
        study.tell(trial, values={"loss": 0.2 if mem > 1 else 0.3, "mem": mem})
        told[mem] = trial.number
    # A result added without `mem` lacks the constrained metric: it counts as broken.
    assert study.best_trial.number == told[0.5]
    assert study.best_value == 0.3 and study.best_runs == 1


def run_and_read_best(tmp_path, name, yaml):
    """Runs the study file `yaml` (study `name`) with the CLI, then reads its best as `hyperpack best
    --json` says it and as the module loads the study."""
    (tmp_path / f"{name}.yaml").write_text(yaml)
    storage = str(tmp_path / "h.db")
    cli = os.environ["HYPERPACK_CLI"]
    run = subprocess.run([cli, "run", str(tmp_path / f"{name}.yaml"), "--storage", storage],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    said = json.loads(subprocess.run([cli, "best", name, "--json", "--storage", storage],
                                     capture_output=True, text=True, check=True).stdout)
    return said, hyperpack.load_study(name, storage)


def test_best_with_finalists_is_the_best_mean_as_hyperpack_best_says(tmp_path):
    said, study = run_and_read_best(tmp_path, "f", """name: f
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "python3 -c 'print(\\"loss=%f\\" % ({x} + ({trial} % 2) * 0.5))'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 8, max_parallel: 1, finalists: 2}
""")
    assert study.best_trial.number == said["trial"]
    assert study.best_runs == said["mean"]["runs"] == 2
    assert study.best_value == pytest.approx(said["mean"]["value"])
    runs = [t.value for t in study.trials if t.params == study.best_params]
    assert study.best_value == pytest.approx(sum(runs) / len(runs))
    assert study.best_trial.value == runs[0]


def test_best_where_finalists_repeat_their_first_runs_is_the_best_single_run(tmp_path):
    # No {trial} in the command: a re-run is the same training, as with a fixed seed.
    said, study = run_and_read_best(tmp_path, "d", """name: d
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "python3 -c 'print(\\"loss=%f\\" % {x})'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 9, max_parallel: 1, finalists: 3}
""")
    assert said["reruns_repeat"] is True and "mean" not in said
    assert study.best_trial.number == said["trial"]
    assert study.best_runs == 1
    assert study.best_value == min(t.value for t in study.trials)


NOISY_STUDY = """
name: noisy
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
"""


def test_recommend_passes_over_a_lucky_run_for_the_best_neighbourhood(tmp_path):
    (tmp_path / "noisy.yaml").write_text(NOISY_STUDY)
    study = hyperpack.create_study(str(tmp_path / "noisy.yaml"), str(tmp_path / "h.db"))
    rng = __import__("random").Random(5)
    results = []
    for i in range(30):
        x = (i + 0.5) / 30
        results.append(({"x": x}, (x - 0.3) ** 2 + rng.gauss(0, 0.02)))
    study.add_results(results[:3])
    with pytest.raises(RuntimeError, match="needs 8 runs with a finite value, has 3"):
        study.recommend()
    study.add_results(results[3:] + [({"x": 0.9}, min(v for _, v in results) - 0.05)])
    assert study.best_trial.params == {"x": 0.9}, "the best single run is the lucky one"
    picked = study.recommend()
    assert abs(picked.params["x"] - 0.3) < 0.12 and picked.state == "completed"
    assert picked.value == next(v for c, v in results if c["x"] == picked.params["x"])
