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
improvement for two objectives, random scalarisations for more).

Constraints (<= 0 holds) come either way Optuna has: `trial.set_constraint(name, value)` in the
objective (Optuna 5.0 on), or `constraints_func`, as Optuna's NSGA-II, TPE and GPSampler take it,
whose values are stored in the trial's "constraints" system attribute as those samplers store them.
The tuner models each constraint and weighs its proposals by the probability that they hold; a
trial that lacks one of the study's constraints counts as breaking it.

Works with Optuna 3.1 (Debian bookworm's), 4.x and 5.x; importing it under another release raises
ImportError saying so.
"""

import math
import random
import threading

import optuna

# The releases this module was checked on (ctest runs its tests and Optuna 5's public sampler test
# cases under each): Debian's 3.1.0, 4.6.0 and 5.0.0rc1. Older ones lack FloatDistribution and
# IntDistribution; a later major release may change what a sampler meets, so it is refused with
# what to do rather than half-working.
_SUPPORTED = "Optuna 3.1 to 5.x (checked on 3.1.0, 4.6.0 and 5.0.0rc1)"


def _release(text):
    """(major, minor) of a version string such as '5.0.0rc1'."""
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (2 - len(parts)))


if not (3, 1) <= _release(optuna.__version__) < (6, 0):
    raise ImportError(f"hyperpack.optuna supports {_SUPPORTED}; this is Optuna "
                      f"{optuna.__version__}. Install a supported release "
                      "(on Debian bookworm: apt-get install python3-optuna).")

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

try:  # public here since Optuna 3.2 (and the only place from 4.0 on)
    from optuna.search_space import IntersectionSearchSpace
except ImportError:  # Optuna 3.1: public in optuna.samplers
    from optuna.samplers import IntersectionSearchSpace

# Where Optuna keeps a trial's constraint values: a list under "constraints" (what a sampler's
# constraints_func gives, every release), or one float a name under "constraints:NAME" (what
# Trial.set_constraint writes, Optuna 5.0 on).
_CONSTRAINTS_KEY = "constraints"
_CONSTRAINT_PREFIX = _CONSTRAINTS_KEY + ":"

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
        """The tuner of this study and space, the trials it has observed, and the names of the
        constraints it models.

        Kept from one ask to the next, as `hyperpack run` keeps its own: each ask observes only the
        trials that ended since, and the model starts from its last fit. A new one (observing every
        ended trial again) where the study, the space or the seed changed.
        """
        directions = [d == StudyDirection.MAXIMIZE for d in study.directions]
        constraints = _constraint_names(study)
        # study._storage and study._study_id are private (no public name tells one study from
        # another across load_study calls); checked on Optuna 3.1, 4.6 and 5.0.
        key = (id(study._storage), study._study_id, tuple(directions), constraints, self._seed,
               tuple((name, repr(search_space[name])) for name in names))
        if self._kept is None or self._kept[0] != key:
            params = [_param(name, search_space[name]) for name in names]
            tuner = Tuner(params, seed=self._seed, maximize=directions[0],
                          initial_trials=self._n_startup_trials,
                          directions=directions if len(directions) > 1 else [],
                          constraints=len(constraints))
            self._kept = (key, tuner, set())
        return self._kept[1], self._kept[2], constraints

    def _propose(self, study, trial, search_space):
        names = sorted(search_space)
        tuner, observed, constraint_names = self._tuner(study, names, search_space)
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
            violations = _violations(t.system_attrs, constraint_names)
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
            # As Optuna's own samplers do: the values, floats, kept with the trial. No public API
            # sets a finished trial's system attribute; study._storage and trial._trial_id are
            # what Optuna's samplers use (checked on 3.1, 4.6 and 5.0).
            constraints = [float(c) for c in self._constraints_func(trial)]
            if any(math.isnan(c) for c in constraints):
                raise ValueError(f"trial {trial.number}: constraints_func gave NaN "
                                 f"({constraints}); give a number, <= 0 where it holds")
            study._storage.set_trial_system_attr(trial._trial_id, _CONSTRAINTS_KEY, constraints)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._independent_sampler.sample_independent(study, trial, param_name,
                                                            param_distribution)


def _constraints_of(system_attrs):
    """A trial's constraint values by name: a constraints_func's list as "0", "1", ..., then
    each Trial.set_constraint value under its own name (as Optuna 5's FrozenTrial.constraints)."""
    out = {str(i): float(v) for i, v in enumerate(system_attrs.get(_CONSTRAINTS_KEY) or [])}
    for key, value in system_attrs.items():
        if key.startswith(_CONSTRAINT_PREFIX):
            out[key[len(_CONSTRAINT_PREFIX):]] = float(value)
    return out


def _constraint_names(study):
    """The names of the constraints the study's finished trials carry, in a fixed order (the
    list's positions, then names in order); () before any."""
    names = set()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        names.update(_constraints_of(t.system_attrs))
    return tuple(sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)))


def _violations(system_attrs, names):
    """A trial's value of each constraint in `names`; one it lacks counts as broken (+inf), as a
    hyperpack study counts a constraint whose metric a trial never reported."""
    values = _constraints_of(system_attrs)
    return [values.get(name, math.inf) for name in names]


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
    """Whether a stored value is one `d` can take (a trial may have used another distribution).
    From the distributions' public attributes: their _contains is private."""
    try:
        if isinstance(d, CategoricalDistribution):
            d.to_internal_repr(value)  # ValueError where it is not a choice
            return True
        if not d.low <= value <= d.high:
            return False
        if d.step is None:
            return True
        steps = (value - d.low) / d.step
        return abs(steps - round(steps)) < 1e-8 * max(1.0, abs(steps))
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
