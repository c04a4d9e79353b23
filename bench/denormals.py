#!/usr/bin/python3
"""Subnormal floats on the CPU: how much slower a collapsed trial trains, and what flushing them
to zero costs a healthy one; hyperpack-trainer and the same model in plain PyTorch
(bench/pytorch_fmnist.py), each with its flush_denormals on and off.

    /usr/bin/python3 bench/denormals.py BUILD_DIR [--epochs 10] [--repeats 1]

Two configurations of the Fashion-MNIST MLP, one thread, the cosine schedule of a 27-epoch trial
(as bench/peer_fmnist.sh's studies train), stopped after --epochs epochs:
- collapsed: SGD, learning rate 0.258, momentum 0.877, weight decay 0.0073, batch 64, the
  configuration Optuna's TPE proposed second for seed 1 in bench/peer_fmnist.sh: its accuracy falls
  to chance (0.10) by the third epoch, after which weight decay drives the weights towards zero;
- healthy: SGD, learning rate 0.05, momentum 0.9, batch 128.
Prints, per configuration, program and mode, each epoch's validation accuracy and step time (ms)
as a markdown table, then the step time of the last epoch, flushed against not (median over
--repeats). A program's two modes should agree in accuracy wherever no value was subnormal (the
two programs start from the same weights but sum in different orders, so they part within an
epoch).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CONFIGS = {
    "collapsed": {"lr": 0.25812786988613534, "momentum": 0.8770888456948922,
                  "weight-decay": 0.007276673513800323, "batch-size": 64},
    "healthy": {"lr": 0.05, "momentum": 0.9, "weight-decay": 0.0, "batch-size": 128},
}


def command(program, build, config, flush):
    flags = ["--model", "mlp", "--epochs", "27", "--threads", "1", "--optimizer", "sgd"]
    for key, value in CONFIGS[config].items():
        flags += ["--" + key, repr(value)]
    if program == "hyperpack-trainer":
        return [os.path.join(build, "trainer", "hyperpack-trainer")] + flags + [
            "--flush-denormals=" + ("true" if flush else "false")]
    here = os.path.dirname(os.path.abspath(__file__))
    return [sys.executable, os.path.join(here, "pytorch_fmnist.py")] + flags + [
        "--flush-denormals", "true" if flush else "false"]


def run(cmd, epochs):
    """The first `epochs` epoch lines of a training program, which is then stopped."""
    lines = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as p:
        for text in p.stdout:
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if "epoch" in line and "step_time_ms" in line:
                lines.append(line)
            if len(lines) == epochs:
                p.terminate()
                break
        p.wait()
    if len(lines) < epochs:
        sys.exit("denormals.py: %s ended after %d epochs" % (" ".join(cmd), len(lines)))
    return lines


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args(argv)
    last = {}
    print("| configuration | program | flushed | " +
          " | ".join("epoch %d" % (e + 1) for e in range(a.epochs)) + " |")
    print("|---|---|---|" + "---|" * a.epochs)
    for config in CONFIGS:
        for program in ("hyperpack-trainer", "pytorch_fmnist.py"):
            for flush in (False, True):
                runs = [run(command(program, a.build, config, flush), a.epochs)
                        for _ in range(a.repeats)]
                cells = ["%.4f, %.2f ms" % (r["val_accuracy"], statistics.median(
                    x[i]["step_time_ms"] for x in runs)) for i, r in enumerate(runs[0])]
                last[config, program, flush] = statistics.median(
                    x[-1]["step_time_ms"] for x in runs)
                print("| %s | %s | %s | %s |" % (config, program, "yes" if flush else "no",
                                                  " | ".join(cells)), flush=True)
    print()
    print("| configuration | program | last epoch's step, not flushed | flushed | ratio |")
    print("|---|---|---|---|---|")
    for config in CONFIGS:
        for program in ("hyperpack-trainer", "pytorch_fmnist.py"):
            off, on = last[config, program, False], last[config, program, True]
            print("| %s | %s | %.2f ms | %.2f ms | %.1fx |" % (config, program, off, on, off / on))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
