#!/usr/bin/python3
"""Plain PyTorch training on Fashion-MNIST that does what hyperpack-trainer does, for comparison.

    /usr/bin/python3 bench/pytorch_fmnist.py [--model mlp|cnn] [--batch-size 64] [--epochs 3]
        [--lr 0.01] [--threads N] [--train-samples N] [--batch-norm] [--seed 0]
        [--optimizer sgd|adamw] [--momentum 0.9] [--weight-decay 0] [--nproc N]
        [--bucket-mb 4] [--grad-compression none|fp16|bf16]
        [--data-path /usr/share/datasets/fashion-mnist] [--device cpu|cuda]
        [--precision fp32|bf16|fp16] [--flush-denormals true|false]
    /usr/bin/python3 bench/pytorch_fmnist.py --model charlm --data-path TEXT [--seq-len 64]
        [--d-model 128] [--layers 2] [--heads 4] ...

The counterpart of `hyperpack-trainer --data fmnist` (trainer/src/*.cc), with its defaults:

- data: the gzipped IDX files, pixels as (x / 255 - 0.2860) / 0.3530 in [N, 1, 28, 28]; the last
  10% of the training file held out for validation; --train-samples N keeps the first N of the
  rest; the t10k files for test accuracy after the last epoch;
- models: the MLP 784-256-128-10 (ReLU) and the trainer's Cnn (two conv 3x3 / [BatchNorm] / ReLU /
  max-pool 2 stages of 32 and 64 channels, then 3136-128-10), built in the trainer's order after
  torch.manual_seed(seed), so that both start from the same weights;
- each epoch a permutation drawn from a generator seeded with the trainer's Mix(seed, epoch), of
  which rank r takes rows r, r + W, r + 2W, ... (W ranks; DistributedSampler's split, last rows
  dropped); mini-batches are index_select from the in-memory tensors; cross-entropy; SGD with
  momentum (or AdamW); the learning rate set before every step: linear warm-up over the first 5%
  of the steps, then cosine to zero; torch.set_num_threads(--threads) (default: cores / ranks).

--flush-denormals true (the default, as the trainer's flush_denormals) has the CPU treat subnormal
floats as zero (torch.set_flush_denormal, before the data are loaded, so that the intra-op threads
started afterwards take the mode too): a network whose weights weight decay drives towards zero
otherwise trains many times slower.

--device cuda puts the model and the whole data set on the GPU once (as the trainer does);
--precision bf16 runs the forward pass under torch.autocast, fp16 the same with
torch.amp.GradScaler (the trainer's dynamic loss scaling); the weights stay fp32. --model charlm
is the trainer's character transformer (token and position embeddings, a causal
nn.TransformerEncoder of --layers post-norm layers with feed-forward 4 x --d-model, a LayerNorm
and a linear head) on the bytes of the text file --data-path, cut into sequences of --seq-len as
the trainer cuts them; it reports val_perplexity instead of accuracy. The training loss is summed
as a tensor and read once per epoch, as the trainer does, so that no step waits for the GPU.

--nproc N (N > 1) starts N copies of this program as ranks (RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT for the env:// rendezvous, on loopback) that train with PyTorch's own
DistributedDataParallel over Gloo. --batch-size is the global batch: each rank computes
batch-size / N. Buffers are not broadcast at every step (broadcast_buffers=False), as the trainer
does not either; --bucket-mb is DDP's bucket_cap_mb (the trainer's --bucket-mb, default 4).

--grad-compression fp16|bf16 (with --nproc N > 1; default none) registers PyTorch's own DDP
communication hook, default_hooks.fp16_compress_hook or bf16_compress_hook: each bucket is cast to
fp16 / bf16, divided by N and all-reduced in that type, so the sum itself is taken in half
precision (the trainer's --grad-compression sends fp16 / bf16 but sums in fp32). With one rank
there is no communication and the flag changes nothing. bf16 with more than one rank is refused
(exit 2) before any rank starts, because PyTorch 1.13 cannot do it on Gloo, the only backend here:
DDP.register_comm_hook rejects bf16_compress_hook unless CUDA 11+ and NCCL 2.10+ are present
("BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+."), and Gloo's all_reduce
itself fails on a bfloat16 tensor ("Invalid scalar type").

After every epoch rank 0 prints one JSON line with the trainer's keys: epoch, step, train_loss,
val_loss, val_accuracy, samples_per_s (the epoch's optimizer steps x global batch / the seconds of
the training loop alone, as the trainer measures it), step_time_ms, lr, global_batch, peak_rss_mb
and, after the last epoch, test_accuracy. Exit: 0 done, 3 a batch this configuration cannot run
(not a multiple of the ranks, larger than the data), 1 anything else, 2 bad flags (bf16
compression with more than one rank included).
"""

import argparse
import datetime
import gzip
import json
import math
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530  # trainer/src/data.cc
EXIT_BAD_FLAGS = 2
EXIT_INFEASIBLE = 3
U64 = (1 << 64) - 1


class Infeasible(Exception):
    """A configuration that cannot run (exit 3, as the trainer)."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn", "charlm"], default="mlp")
    p.add_argument("--batch-size", type=int, default=64, help="global batch")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=0,
                   help="intra-op threads per rank; 0: cores / ranks")
    p.add_argument("--train-samples", type=int, default=0, help="0: all")
    p.add_argument("--batch-norm", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup-fraction", type=float, default=0.05)
    p.add_argument("--nproc", type=int, default=1, help="ranks (DistributedDataParallel over Gloo)")
    p.add_argument("--bucket-mb", type=float, default=4.0, help="DDP bucket_cap_mb")
    p.add_argument("--grad-compression", choices=["none", "fp16", "bf16"], default="none",
                   help="DDP communication hook: fp16_compress_hook or bf16_compress_hook")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds, rendezvous and collectives")
    p.add_argument("--data-path", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--flush-denormals", choices=["true", "false"], default="true",
                   help="subnormal floats as zero on the CPU (the trainer's flush_denormals)")
    a = p.parse_args(argv)
    for name in ("batch_size", "epochs", "nproc"):
        if getattr(a, name) < 1:
            p.error("--%s must be >= 1 (got %d)" % (name.replace("_", "-"), getattr(a, name)))
    if not a.lr > 0:
        p.error("--lr must be > 0 (got %g)" % a.lr)
    if not 0 <= a.warmup_fraction < 1:
        p.error("--warmup-fraction must be in [0, 1) (got %g)" % a.warmup_fraction)
    return a


# ---- data ------------------------------------------------------------------------------------


def read_idx(path):
    """One IDX file of unsigned bytes, gzipped or not, as a uint8 tensor of its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    dims = data[3]
    shape = struct.unpack(">%dI" % dims, data[4:4 + 4 * dims])
    body = data[4 + 4 * dims:]
    if len(body) != math.prod(shape):
        raise ValueError("%s: expected %d bytes of data for shape %s, found %d"
                         % (path, math.prod(shape), shape, len(body)))
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


def find(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    return os.path.join(directory, stem + ".gz")


def load_split(directory, prefix):
    x = read_idx(find(directory, prefix + "-images-idx3-ubyte"))
    y = read_idx(find(directory, prefix + "-labels-idx1-ubyte"))
    x = ((x.to(torch.float32) / 255.0 - PIXEL_MEAN) / PIXEL_STD).unsqueeze(1).contiguous()
    return x, y.to(torch.int64)


def load_text(args):
    """(train, val, None): the trainer's LoadText, byte ids in sequences of seq_len."""
    with open(args.data_path, "rb") as f:
        text = f.read()
    vocab = {b: i for i, b in enumerate(sorted(set(text)))}
    ids = torch.tensor([vocab[b] for b in text], dtype=torch.int64)
    length = args.seq_len
    n = (ids.numel() - 1) // length
    x, y = ids[:n * length].view(n, length), ids[1:n * length + 1].view(n, length)
    n_val = int(n * max(args.val_fraction, 1.0 / n))
    n_train = n - n_val
    if args.train_samples > 0:
        n_train = min(n_train, args.train_samples)
    return (x[:n_train], y[:n_train]), (x[n - n_val:], y[n - n_val:]), None, len(vocab)


def load_data(args):
    """(train, val, test), each (x, y): the trainer's split of Fashion-MNIST."""
    x, y = load_split(args.data_path, "train")
    n = x.size(0)
    n_val = int(n * 0.1)
    n_train = n - n_val
    if args.train_samples > 0:
        n_train = min(n_train, args.train_samples)
    train = (x[:n_train], y[:n_train])
    val = (x[n - n_val:], y[n - n_val:])
    return train, val, load_split(args.data_path, "t10k")


# ---- models ----------------------------------------------------------------------------------


class Mlp(nn.Module):
    def __init__(self, widths=(256, 128), inputs=784, classes=10):
        super().__init__()
        layers, prev = [], inputs
        for w in widths:
            layers += [nn.Linear(prev, w), nn.ReLU()]
            prev = w
        layers.append(nn.Linear(prev, classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x.flatten(1))


class Cnn(nn.Module):
    def __init__(self, batch_norm, channels=(32, 64), classes=10):
        super().__init__()
        features, c, side = [], 1, 28
        for nxt in channels:
            features.append(nn.Conv2d(c, nxt, 3, padding=1))
            if batch_norm:
                features.append(nn.BatchNorm2d(nxt))
            features += [nn.ReLU(), nn.MaxPool2d(2)]
            c, side = nxt, side // 2
        self.features = nn.Sequential(*features)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c * side * side, 128), nn.ReLU(),
                                  nn.Linear(128, classes))

    def forward(self, x):
        return self.head(self.features(x))


class CharLm(nn.Module):
    def __init__(self, vocab, seq_len, d, layers, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d)
        self.positions = nn.Embedding(seq_len, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0), layers,
            enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, x):  # x: [N, L] token ids
        length = x.size(1)
        h = self.tokens(x) + self.positions(torch.arange(length, device=x.device)).unsqueeze(0)
        mask = torch.triu(torch.full((length, length), float("-inf"), device=x.device), 1)
        h = self.encoder(h.transpose(0, 1), mask).transpose(0, 1)
        return self.out(self.norm(h))


def flat(logits, y):
    """Logits and targets as cross_entropy takes them (a sequence's positions as rows), in fp32."""
    if logits.dim() == 3:
        return logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1)
    return logits.float(), y


def autocast(args):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    return torch.autocast(args.device, dtype=dtype, enabled=dtype is not None)


# ---- training --------------------------------------------------------------------------------


def mix(a, b):
    """The trainer's Mix (splitmix64 finaliser of a * golden + b), in 64-bit unsigned arithmetic."""
    x = (a * 0x9E3779B97F4A7C15 + b) & U64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & U64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & U64
    return x ^ (x >> 31)


def learning_rate(base, step, total, warmup_fraction):
    """Linear warm-up, then cosine to zero: the trainer's LearningRate with schedule cosine."""
    warmup = int(warmup_fraction * total)
    if step < warmup:
        return base * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))


def all_reduce_sum(values, world):
    t = torch.tensor(values, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t)
    return t.tolist()


def measure(model, x, y, rank, world, args):
    """Mean loss and accuracy, each rank taking every W-th row in chunks of 1024, summed."""
    model.train(False)
    loss = correct = count = 0.0
    rows = torch.arange(rank, x.size(0), world, dtype=torch.int64, device=x.device)
    with torch.no_grad():
        for at in range(0, rows.size(0), 1024):
            idx = rows[at:at + 1024]
            with autocast(args):
                logits = model(x.index_select(0, idx))
            logits, by = flat(logits, y.index_select(0, idx))
            loss += F.cross_entropy(logits, by, reduction="sum").item()
            correct += logits.argmax(1).eq(by).sum().item()
            count += by.size(0)
    loss, correct, count = all_reduce_sum([loss, correct, count], world)
    count = max(1.0, count)
    return loss / count, correct / count


def train(args, rank, world, local_world, data=None, on_epoch=None):
    """Trains as the trainer does. data: load_data's result, loaded here when None (a caller that
    trains many models, bench/optuna_fmnist.py, loads it once); on_epoch(line): called with each
    epoch's line on rank 0 instead of printing it (it may raise to stop the training)."""
    threads = args.threads if args.threads > 0 else max(1, (os.cpu_count() or 1) // local_world)
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    if args.model == "charlm":
        (train_x, train_y), (val_x, val_y), test, vocab = load_text(args)
    else:
        (train_x, train_y), (val_x, val_y), test = data or load_data(args)
    device = torch.device(args.device)
    if device.type == "cuda":  # once, rather than a copy per batch
        train_x, train_y, val_x, val_y = (t.to(device) for t in (train_x, train_y, val_x, val_y))
        test = tuple(t.to(device) for t in test) if test else None
        torch.cuda.reset_peak_memory_stats(device)

    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.timeout))
    if args.batch_size % world != 0:
        raise Infeasible("batch_size %d is not a multiple of %d ranks" % (args.batch_size, world))
    micro = args.batch_size // world
    shard = train_x.size(0) // world
    steps_per_epoch = shard // micro
    if steps_per_epoch == 0:
        raise Infeasible("a global batch of %d is larger than the %d training samples"
                         % (args.batch_size, train_x.size(0)))
    total_steps = steps_per_epoch * args.epochs

    if args.model == "charlm":
        model = CharLm(vocab, args.seq_len, args.d_model, args.layers, args.heads)
    else:
        model = Mlp() if args.model == "mlp" else Cnn(args.batch_norm)
    model = model.to(device)
    scaler = None
    if args.precision == "fp16":  # torch.amp's since 2.3; torch.cuda.amp's before
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler()
    net = model
    if world > 1:
        # The constructor broadcasts rank 0's parameters and buffers, as the trainer does.
        net = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb,
                                                  broadcast_buffers=False)
        if args.grad_compression != "none":
            hook = (default_hooks.fp16_compress_hook if args.grad_compression == "fp16"
                    else default_hooks.bf16_compress_hook)
            net.register_comm_hook(state=None, hook=hook)
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                              weight_decay=args.weight_decay)

    step = 0
    for epoch in range(args.epochs):
        net.train(True)
        gen = torch.Generator()
        gen.manual_seed(mix(args.seed, epoch))
        perm = torch.randperm(train_x.size(0), generator=gen, dtype=torch.int64)
        mine = perm[rank:shard * world:world].to(device)
        loss_sum, loss_count = torch.zeros((), dtype=torch.float64, device=device), 0
        start = time.perf_counter()
        for s in range(steps_per_epoch):
            lr = learning_rate(args.lr, step, total_steps, args.warmup_fraction)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = mine[s * micro:(s + 1) * micro]
            with autocast(args):
                logits = net(train_x.index_select(0, idx))
            loss = F.cross_entropy(*flat(logits, train_y.index_select(0, idx)))
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            loss_sum += loss.detach()
            loss_count += 1
            opt.zero_grad()
            step += 1
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start

        loss_sum, loss_count = all_reduce_sum([loss_sum.item(), float(loss_count)], world)
        val_loss, val_acc = measure(model, val_x, val_y, rank, world, args)
        line = {
            "epoch": epoch + 1,
            "step": step,
            "train_loss": loss_sum / max(1.0, loss_count),
            "val_loss": val_loss,
            ("val_perplexity" if args.model == "charlm" else "val_accuracy"):
                math.exp(val_loss) if args.model == "charlm" else val_acc,
            "samples_per_s": steps_per_epoch * args.batch_size / seconds if seconds > 0 else 0.0,
            "step_time_ms": 1000.0 * seconds / steps_per_epoch,
            "lr": learning_rate(args.lr, max(0, step - 1), total_steps, args.warmup_fraction),
            "global_batch": args.batch_size,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
        if device.type == "cuda":
            line["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2.0**20
        if epoch + 1 == args.epochs and test:
            line["test_accuracy"] = measure(model, test[0], test[1], rank, world, args)[1]
        if rank == 0 and on_epoch is not None:
            on_epoch(line)
        elif rank == 0:
            print(json.dumps(line), flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


# ---- ranks -----------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ranks(n, argv):
    """Starts n ranks of this program on loopback and waits; a failed rank stops the others."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    children = {}
    result = 0

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        for r in range(n):
            rank_env = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=rank_env)
            children[p.pid] = p
        while children:
            pid, status = os.wait()
            if children.pop(pid, None) is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            if code != 0:
                result = code if code == EXIT_INFEASIBLE or result == 0 else result
                for p in children.values():
                    p.terminate()
    finally:
        for p in children.values():
            p.terminate()
    return result


def set_flush_denormals(args):
    """The trainer's flush_denormals on this thread, and on intra-op threads started after it."""
    # numpy works out each float type's limits on first use and warns if subnormals are flushed
    # by then (from TPE's numpy code in bench/optuna_fmnist.py): work them out first.
    import numpy
    for t in (numpy.float16, numpy.float32, numpy.float64):
        numpy.finfo(t)
    torch.set_flush_denormal(args.flush_denormals == "true")


def main(argv):
    args = parse_args(argv)
    set_flush_denormals(args)
    launching = "WORLD_SIZE" not in os.environ and args.nproc > 1
    world = args.nproc if launching else int(os.environ.get("WORLD_SIZE", "1"))
    if args.grad_compression == "bf16" and world > 1:
        print("pytorch_fmnist.py: --grad-compression bf16 with %d ranks: PyTorch %s cannot "
              "all-reduce bf16 over Gloo (DDP accepts bf16_compress_hook only with CUDA 11+ and "
              "NCCL 2.10+, and Gloo's all_reduce has no bfloat16); use fp16 or none"
              % (world, torch.__version__), file=sys.stderr)
        return EXIT_BAD_FLAGS
    if launching:
        return launch_ranks(args.nproc, argv)
    rank = int(os.environ.get("RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    try:
        train(args, rank, world, local_world)
    except Infeasible as e:
        print("pytorch_fmnist.py: rank %d: this configuration cannot run: %s" % (rank, e),
              file=sys.stderr)
        return EXIT_INFEASIBLE
    except (OSError, ValueError, RuntimeError) as e:
        print("pytorch_fmnist.py: rank %d: %s" % (rank, str(e)[:600]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
