"""hyperpack's tuner as an Optuna sampler.

    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=0))

is the only change an Optuna user makes. The sampler models the study's relative search space (the
parameters every finished trial has, as Optuna's CMA-ES and multivariate TPE do) with hyperpack's
Gaussian process: float, int (log or not, with a step) and categorical parameters. A parameter
outside that space (one suggested under an `if`, say) is drawn by the independent sampler,
RandomSampler unless another is given. Completed trials are what it learns from; a pruned trial
counts with its last reported value at its step (the model takes the highest step that enough
trials reached, as BOHB does); failed trials are avoided; running trials (other threads' with
`n_jobs`, other processes' on a shared storage) are pending, so that proposals spread. Once a
small discrete space has had every configuration, the independent sampler draws. The first
`n_startup_trials` (by default max(5, dimensions + 1)) come from a Sobol sequence. With a seed,
the same study gives the same proposals.

A study with several directions (2 to 4) is modelled with a Gaussian process per objective, and
proposals improve the Pareto front (hyperpack's multi-objective tuner: expected hypervolume
improvement for two objectives, random scalarisations for more). `constraints_func`, as Optuna's
NSGA-II and TPE samplers take it, gives each finished trial's constraint values (<= 0 holds): they
are stored in the trial's "constraints" system attribute, as those samplers store them, and the
tuner models them and weighs its proposals by the probability that they hold.
"""

import random
import threading

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, IntersectionSearchSpace, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

# Where Optuna's own samplers keep a trial's constraint values.
_CONSTRAINTS_KEY = "constraints"

from hyperpack._hyperpack import Tuner

__all__ = ["GPSampler"]


class GPSampler(BaseSampler):
    """Proposes each trial's parameters with hyperpack's Gaussian-process tuner.

    Args:
        seed: makes the proposals repeatable; a random one when None.
        n_startup_trials: Sobol trials before the model; 0 for hyperpack's default,
            max(5, dimensions + 1).
        independent_sampler: draws parameters outside the relative search space
            (RandomSampler(seed) when None).
        consider_pending: count running trials as pending, so that parallel trials spread.
        constraints_func: a finished trial's constraint values (a sequence of floats, <= 0 holds),
            as Optuna's NSGA-II and TPE samplers take it; None for none.
    """

    def __init__(self, *, seed=None, n_startup_trials=0, independent_sampler=None,
                 consider_pending=True, constraints_func=None):
        if n_startup_trials < 0:
            raise ValueError(f"n_startup_trials must be >= 0 (got {n_startup_trials})")
        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**63)
        self._n_startup_trials = n_startup_trials
        self._independent_sampler = independent_sampler or RandomSampler(seed=seed)
        self._consider_pending = consider_pending
        self._constraints_func = constraints_func
        self._search_space = IntersectionSearchSpace(include_pruned=True)
        self._lock = threading.Lock()
        # What this sampler proposed to trials still running, by trial number: another thread's
        # trial is pending before its parameters reach the storage.
        self._proposed = {}
        self._kept = None  # (key, tuner, numbers of the trials it observed): see _tuner

    def reseed_rng(self):
        self._seed = random.SystemRandom().randrange(2**63)
        self._independent_sampler.reseed_rng()

    def infer_relative_search_space(self, study, trial):
        with self._lock:  # the intersection is cached: one thread updates it at a time
            space = self._search_space.calculate(study)
        return {name: d for name, d in space.items() if not d.single()}

    def sample_relative(self, study, trial, search_space):
        if not search_space:
            return {}
        with self._lock:  # one proposal at a time, each counting the ones before as pending
            return self._propose(study, trial, search_space)

    def _tuner(self, study, names, search_space):
        """The tuner of this study and space, and the trials it has observed.

        Kept from one ask to the next, as `hyperpack run` keeps its own: each ask observes only the
        trials that ended since, and the model starts from its last fit. A new one (observing every
        ended trial again) where the study, the space or the seed changed.
        """
        directions = [d == StudyDirection.MAXIMIZE for d in study.directions]
        constraints = _constraint_count(study)
        key = (id(study._storage), study._study_id, tuple(directions), constraints, self._seed,
               tuple((name, repr(search_space[name])) for name in names))
        if self._kept is None or self._kept[0] != key:
            params = [_param(name, search_space[name]) for name in names]
            tuner = Tuner(params, seed=self._seed, maximize=directions[0],
                          initial_trials=self._n_startup_trials,
                          directions=directions if len(directions) > 1 else [],
                          constraints=constraints)
            self._kept = (key, tuner, set())
        return self._kept[1], self._kept[2]

    def _propose(self, study, trial, search_space):
        names = sorted(search_space)
        tuner, observed = self._tuner(study, names, search_space)
        pending = []
        for t in study.get_trials(deepcopy=False):
            if t.number in observed:
                continue
            if (t.state == TrialState.RUNNING and t.number in self._proposed and
                    self._consider_pending and any(name not in t.params for name in names)):
                pending.append(self._proposed[t.number])
                continue
            if t.number == trial.number or any(
                    name not in t.params or not _holds(search_space[name], t.params[name])
                    for name in names):
                continue
            config = {name: _encode(search_space[name], t.params[name]) for name in names}
            if t.state == TrialState.RUNNING:
                if self._consider_pending:
                    pending.append(config)
                continue
            if not t.state.is_finished():
                continue  # WAITING (enqueued): neither pending nor known yet
            violations = list(t.system_attrs.get(_CONSTRAINTS_KEY) or [])
            if t.state == TrialState.COMPLETE and len(t.values) > 1:
                tuner.observe(config, "completed", values=list(t.values), violations=violations)
            elif t.state == TrialState.COMPLETE:
                tuner.observe(config, "completed", t.value, violations=violations)
            elif t.state == TrialState.PRUNED and len(study.directions) > 1:
                pass  # Optuna prunes no study with several objectives; nothing to learn
            elif t.state == TrialState.PRUNED and t.intermediate_values:
                step = max(t.intermediate_values)
                tuner.observe(config, "pruned", t.intermediate_values[step], float(step))
            elif t.state == TrialState.FAIL:
                tuner.observe(config, "failed")
            observed.add(t.number)  # ended: observed once
        proposals = tuner.propose(1, pending)
        if not proposals:
            # A small discrete space with every configuration tried or pending (the branch of a
            # conditional space, say): the independent sampler draws, repeats allowed.
            return {name: self._independent_sampler.sample_independent(study, trial, name, d)
                    for name, d in search_space.items()}
        self._proposed[trial.number] = proposals[0]
        return {name: _decode(search_space[name], proposals[0][name]) for name in names}

    def after_trial(self, study, trial, state, values):
        with self._lock:
            self._proposed.pop(trial.number, None)
        if self._constraints_func is not None and state in (TrialState.COMPLETE,
                                                            TrialState.PRUNED):
            # As Optuna's own samplers do: the values, floats, kept with the trial.
            constraints = [float(c) for c in self._constraints_func(trial)]
            study._storage.set_trial_system_attr(trial._trial_id, _CONSTRAINTS_KEY, constraints)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._independent_sampler.sample_independent(study, trial, param_name,
                                                            param_distribution)


def _constraint_count(study):
    """How many constraint values the study's finished trials carry (0 before any)."""
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        constraints = t.system_attrs.get(_CONSTRAINTS_KEY)
        if constraints is not None:
            return len(constraints)
    return 0


def _param(name, d):
    """The tuner's description of Optuna distribution `d`."""
    if isinstance(d, FloatDistribution):
        if d.step is not None:  # a grid: its index, an integer
            return {"name": name, "type": "int", "low": 0, "high": _steps(d)}
        return {"name": name, "type": "float", "low": d.low, "high": d.high, "log": d.log}
    if isinstance(d, IntDistribution):
        return {"name": name, "type": "int", "low": d.low, "high": d.high, "log": d.log,
                "step": d.step}
    if isinstance(d, CategoricalDistribution):
        return {"name": name, "type": "categorical", "choices": len(d.choices)}
    raise ValueError(f"parameter '{name}': GPSampler cannot model {type(d).__name__}")


def _steps(d):
    return int(round((d.high - d.low) / d.step))


def _holds(d, value):
    """Whether a stored value is one `d` can take (a trial may have used another distribution)."""
    try:
        return d._contains(d.to_internal_repr(value))
    except (ValueError, TypeError):
        return False


def _encode(d, value):
    if isinstance(d, FloatDistribution):
        return int(round((value - d.low) / d.step)) if d.step is not None else float(value)
    if isinstance(d, IntDistribution):
        return int(value)
    return int(d.to_internal_repr(value))  # a categorical choice's index


def _decode(d, value):
    if isinstance(d, FloatDistribution):
        if d.step is not None:
            return min(d.high, d.low + value * d.step)
        return min(d.high, max(d.low, float(value)))
    if isinstance(d, IntDistribution):
        return int(value)
    return d.choices[int(value)]
