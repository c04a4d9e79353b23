"""Optuna's own public test cases for third-party samplers, run against hyperpack.optuna.GPSampler.

`optuna.testing.pytest_samplers` (Optuna 5.0 on) holds the cases that OptunaHub's samplers are
tested with: BasicSamplerTestCase (every distribution, conditional and dynamic spaces, NaN
objectives, fixed parameters), RelativeSamplerTestCase (relative sampling of numerical,
categorical and mixed spaces, with n_jobs) and MultiObjectiveSamplerTestCase. They are imported
from the Optuna that runs this file (ctest runs it under the released 5.0, see
tests/python/optuna_python), never copied. Under a release without them the module is skipped,
saying so; ctest runs it only under 5.0, where nothing may be skipped.
"""

import pytest

import hyperpack.optuna

cases = pytest.importorskip(
    "optuna.testing.pytest_samplers",
    reason="this Optuna has no optuna.testing.pytest_samplers (it came with Optuna 5.0)")


class TestGPSampler(cases.BasicSamplerTestCase, cases.RelativeSamplerTestCase,
                    cases.MultiObjectiveSamplerTestCase):
    """GPSampler as a user makes it (default startup trials), and seeded."""

    @pytest.fixture(params=["default", "seeded"])
    def sampler(self, request):
        if request.param == "seeded":
            return lambda: hyperpack.optuna.GPSampler(seed=0)
        return hyperpack.optuna.GPSampler


class TestGPSamplerFromItsFirstTrial(cases.BasicSamplerTestCase, cases.RelativeSamplerTestCase):
    """With one startup trial, so that the model (not the Sobol start) proposes nearly every
    trial of the cases' short studies."""

    @pytest.fixture
    def sampler(self):
        return lambda: hyperpack.optuna.GPSampler(seed=1, n_startup_trials=1)
