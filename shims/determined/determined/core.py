"""determined.core: the Core API context (see the package's docstring for what is covered)."""
import contextlib
import json
import os
import pathlib
import signal
import uuid as _uuid

import hyperpack_shim

_LATEST = "latest"  # a file in the checkpoint folder naming the newest stored checkpoint
_preempted = False


def _checkpoint_root():
    root = os.environ.get("HYPERPACK_CHECKPOINT_DIR") or os.path.join(os.getcwd(), "checkpoints")
    os.makedirs(root, exist_ok=True)
    return pathlib.Path(root)


def _latest_checkpoint():
    marker = _checkpoint_root() / _LATEST
    if os.environ.get("HYPERPACK_RESUME") == "1" and marker.exists():
        return marker.read_text().strip() or None
    return None


def _emit(line):
    hyperpack_shim.emit(line)


def _numbers(metrics, prefix=""):
    return hyperpack_shim.numbers(metrics, prefix)


class TrainContext:
    def __init__(self, preempt):
        self._preempt = preempt

    def report_validation_metrics(self, steps_completed, metrics):
        _emit(dict(_numbers(metrics), step=int(steps_completed)))
        self._preempt._reached(int(steps_completed))

    def report_training_metrics(self, steps_completed, metrics, batch_metrics=None):
        # Apart from the validation metrics, which the searcher (hyperpack's objective) reads.
        _emit(dict(_numbers(metrics, "training/"), step=int(steps_completed)))

    def report_metrics(self, group, steps_completed, metrics):
        prefix = "" if group == "validation" else str(group) + "/"
        _emit(dict(_numbers(metrics, prefix), step=int(steps_completed)))

    def report_progress(self, progress):
        pass

    def report_early_exit(self, reason):
        pass

    def get_tensorboard_path(self):
        path = pathlib.Path(os.environ.get("HYPERPACK_TRIAL_DIR", os.getcwd())) / "tensorboard"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def upload_tensorboard_files(self, *args, **kwargs):
        pass

    def set_status(self, status):
        pass


class CheckpointContext:
    @contextlib.contextmanager
    def store_path(self, metadata=None, shard=False):
        storage_id = str(_uuid.uuid4())
        path = _checkpoint_root() / storage_id
        path.mkdir(parents=True)
        yield path, storage_id
        (path / "metadata.json").write_text(json.dumps(metadata or {}))
        (_checkpoint_root() / _LATEST).write_text(storage_id)

    @contextlib.contextmanager
    def restore_path(self, storage_id, selector=None):
        yield _checkpoint_root() / storage_id

    def get_metadata(self, storage_id):
        path = _checkpoint_root() / storage_id / "metadata.json"
        return json.loads(path.read_text()) if path.exists() else {}


class PreemptContext:
    """Stop when hyperpack says so: SIGTERM (a pruned or paused trial), or ASHA's rung reached."""

    def __init__(self):
        stop_at = os.environ.get("HYPERPACK_STOP_AT")
        self._stop_at = float(stop_at) if stop_at else None
        self._rung_reached = False
        try:
            signal.signal(signal.SIGTERM, self._on_term)
        except ValueError:  # not the main thread: SIGTERM keeps its default
            pass

    def _on_term(self, signum, frame):
        global _preempted
        _preempted = True

    def _reached(self, steps):
        if self._stop_at is not None and steps >= self._stop_at:
            self._rung_reached = True

    def should_preempt(self, auto_ack=True):
        return _preempted or self._rung_reached

    def acknowledge_preemption_signal(self):
        pass


class DistributedContext:
    def __init__(self, rank=None, size=None, local_rank=None, local_size=None, **kwargs):
        env = os.environ.get
        self.rank = int(rank if rank is not None else env("RANK", "0"))
        self.size = int(size if size is not None else env("WORLD_SIZE", "1"))
        self.local_rank = int(local_rank if local_rank is not None else env("LOCAL_RANK", "0"))
        self.local_size = int(local_size if local_size is not None else env("LOCAL_WORLD_SIZE", "1"))
        self.cross_rank = self.rank // max(self.local_size, 1)
        self.cross_size = max(self.size // max(self.local_size, 1), 1)

    @classmethod
    def from_torch_distributed(cls, *args, **kwargs):
        return cls()

    from_deepspeed = from_torch_distributed
    from_horovod = from_torch_distributed
    from_tf_config = from_torch_distributed

    def get_rank(self):
        return self.rank

    def get_size(self):
        return self.size

    def get_local_rank(self):
        return self.local_rank

    def get_local_size(self):
        return self.local_size

    def _one_process(self, what):
        if self.size > 1:
            raise NotImplementedError(
                "hyperpack's Determined stand-in has no %s across %d processes; use torch.distributed"
                % (what, self.size))

    def gather(self, stuff):
        self._one_process("gather")
        return [stuff]

    def allgather(self, stuff):
        self._one_process("allgather")
        return [stuff]

    def broadcast(self, stuff):
        self._one_process("broadcast")
        return stuff

    gather_local = gather
    allgather_local = allgather
    broadcast_local = broadcast


class TensorboardMode:
    AUTO = "AUTO"
    MANUAL = "MANUAL"


class Context:
    def __init__(self, distributed=None):
        self.preempt = PreemptContext()
        self.train = TrainContext(self.preempt)
        self.checkpoint = CheckpointContext()
        self.distributed = distributed or DistributedContext()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


def init(distributed=None, **kwargs):
    """The trial's Core API context (a context manager, as Determined's)."""
    return Context(distributed)
