"""hyperpack's stand-in for Determined's Core API, so that a Core API trial program runs unmodified.

hyperpack puts this package first on a trial's PYTHONPATH when its study says
`trial.shim: determined` (as `hyperpack import --from determined` writes). What it covers is what
Determined's own Core API examples use:
  det.get_cluster_info()      .trial.trial_id, .trial.hparams (the trial's parameters, a nested
                              group nested again), .latest_checkpoint (when the trial resumes)
  det.core.init()             a context with train, checkpoint, preempt, distributed
  train.report_validation_metrics(steps_completed, metrics)
                              a JSON line: the metrics at step steps_completed (the searcher's)
  train.report_training_metrics(...)
                              the same with each name as training/NAME, apart from the searcher's
  checkpoint.store_path(metadata) / restore_path(id)
                              folders under HYPERPACK_CHECKPOINT_DIR, kept across attempts
  preempt.should_preempt()    true once hyperpack asked the trial to stop: SIGTERM, or (ASHA's
                              promote mode) a report at the step HYPERPACK_STOP_AT names
  distributed                 rank and size from torchrun's variables; one process's collectives
Not thread-safe, as the Core API's reporting is called from the training loop.
"""
import os

import hyperpack_shim

from . import core

__version__ = "0.0.0+hyperpack"
LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"


class _TrialInfo:
    def __init__(self):
        self.trial_id = int(os.environ.get("HYPERPACK_TRIAL_ID", "0") or 0)
        self.experiment_id = os.environ.get("HYPERPACK_STUDY", "")
        self.hparams = hyperpack_shim.params("HYPERPACK_DETERMINED_NESTED")
        self.trial_seed = self.trial_id


class ClusterInfo:
    def __init__(self):
        self.trial = _TrialInfo()
        self.task_type = "TRIAL"
        self.container_rank = int(os.environ.get("RANK", "0") or 0)
        self.latest_checkpoint = core._latest_checkpoint()
        self.user_data = {}


def get_cluster_info():
    """The trial as Determined describes it; never None under hyperpack."""
    return ClusterInfo()
