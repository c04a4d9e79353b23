"""The Python module: hyperpack.optuna.GPSampler in real Optuna 3.1 studies, hyperpack.Tuner's
errors, and hyperpack.report in a trial that `hyperpack run` starts (run by ctest with
/usr/bin/python3)."""

import math
import statistics

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


def test_a_multi_objective_study_is_refused():
    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(),
                                directions=["minimize", "minimize"])
    with pytest.raises(ValueError):
        study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1)


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
