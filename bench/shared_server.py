#!/usr/bin/python3
"""Two studies on one `hyperpack serve`, for real: what a study submitted while another runs waits.

One server, one agent pretending to have 4 GPUs (`--fake-gpus 4`). Study A: 24 trials of one GPU,
4 at a time; study B: 6 trials of one GPU, 4 at a time, arriving 3 s after A. Each trial sleeps
2 + 4x seconds (x drawn by the random tuner, seeded) and reports x: the trials stand for training
runs, so that what is measured is the server's scheduling alone. Four arms per seed:

  queued    B arrives 3 s after A but is submitted only when A's client returns: what the server
            did before it ran studies at once (one at a time, in the order submitted);
  shared    B is submitted 3 s after A and starts on its share (priority 1 each);
  priority  the same, B with `priority: 3` (3 of the 4 GPUs while both want more);
  grace     shared, with `serve --preempt-after 3`: A's trials have 3 s to end by themselves
            before those still over A's share are preempted.

Per arm: B's wait (its arrival to its first trial's start), B's and A's turnaround (arrival to
the study's last trial's end), the makespan (A's submission to the last end), A's trials
preempted, and the GPU-seconds they had run when preempted (the work a checkpoint-less trial
loses). Then the medians over the seeds.

  bench/shared_server.py [BUILD_DIR]        run from the repository root; BUILD_DIR: build
  SEEDS="1 2 3" bench/shared_server.py
"""
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
HYPERPACK = os.path.abspath(os.path.join(BUILD, "cli", "hyperpack"))
SEEDS = [int(s) for s in os.environ.get("SEEDS", "1 2 3").split()]
ARMS = ["queued", "shared", "priority", "grace"]
GRACE_S = 3

TRIAL = """#!/bin/sh
sleep $(awk "BEGIN {print 2 + 4 * $1}")
echo "{\\"loss\\": $1}"
"""


def study(name, trial_sh, seed, trials, priority=None):
    text = f"name: {name}\n"
    if priority:
        text += f"priority: {priority}\n"
    text += (
        "objective: {metric: loss, direction: minimize}\n"
        "search_space: {x: {type: float, low: 0, high: 1}}\n"
        f'trial: {{command: "sh {trial_sh} {{x}}"}}\n'
        f"tuner: {{algorithm: random, seed: {seed}}}\n"
        f"budget: {{max_trials: {trials}, max_parallel: 4}}\n"
        "resources: {gpus: 1}\n")
    return text


def read_until(proc, text):
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"ended before saying '{text}'")
        if text in line:
            return line


def trials(db, name):
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT t.state, t.started, t.ended, t.error FROM trials t JOIN studies s "
        "ON t.study_id = s.id WHERE s.name = ?", (name,)).fetchall()
    con.close()
    return rows


def run_arm(arm, seed, work):
    os.makedirs(work)
    token = os.path.join(work, "token")
    with open(token, "w") as f:
        f.write("0123456789abcdef-bench-secret\n")
    os.chmod(token, 0o600)
    trial_sh = os.path.join(work, "trial.sh")
    with open(trial_sh, "w") as f:
        f.write(TRIAL)
    db = os.path.join(work, "h.db")
    grace = ["--preempt-after", str(GRACE_S)] if arm == "grace" else []
    server = subprocess.Popen(
        [HYPERPACK, "serve", "--listen", "127.0.0.1:0", "--token-file", token, "--storage", db]
        + grace, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    address = read_until(server, "listening on").split("listening on ")[1].strip()
    agent = subprocess.Popen(
        [HYPERPACK, "agent", "--connect", address, "--token-file", token, "--name", "a1",
         "--fake-gpus", "4"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    read_until(server, "agent a1 joined")
    files = {}
    for name, n, prio in (("a", 24, None), ("b", 6, 3 if arm == "priority" else None)):
        files[name] = os.path.join(work, f"{name}.yaml")
        with open(files[name], "w") as f:
            f.write(study(name, trial_sh, seed, n, prio))

    def submit(name):
        return subprocess.Popen(
            [HYPERPACK, "run", files[name], "--server", address, "--token-file", token],
            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    a_submitted = time.time()
    a = submit("a")
    time.sleep(3)  # the workload: B arrives 3 s into A
    b_arrived = time.time()
    if arm == "queued":
        a.wait()
    b = submit("b")
    codes = (a.wait(), b.wait())
    agent.terminate()
    agent.wait()
    server.terminate()
    server.communicate()
    if codes != (0, 0):
        raise RuntimeError(f"{arm} seed {seed}: the studies exited {codes}")
    ta, tb = trials(db, "a"), trials(db, "b")
    preempted = [t for t in ta if t[0] == "interrupted" and "another study" in (t[3] or "")]
    return {
        "b_wait": min(t[1] for t in tb if t[1]) - b_arrived,
        "b_turnaround": max(t[2] for t in tb if t[2]) - b_arrived,
        "a_turnaround": max(t[2] for t in ta if t[2]) - a_submitted,
        "makespan": max(t[2] for t in ta + tb if t[2]) - a_submitted,
        "preempted": len(preempted),
        "lost_gpu_s": sum(t[2] - t[1] for t in preempted),
    }


def main():
    if not os.access(HYPERPACK, os.X_OK):
        sys.exit(f"shared_server.py: build hyperpack first: cmake --build {BUILD} --target hyperpack")
    keys = ["b_wait", "b_turnaround", "a_turnaround", "makespan", "preempted", "lost_gpu_s"]
    results = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory() as root:
        for seed in SEEDS:
            for arm in ARMS:
                r = run_arm(arm, seed, os.path.join(root, f"{arm}-{seed}"))
                results[arm].append(r)
                print(f"seed {seed} {arm:9s} " + "  ".join(f"{k} {r[k]:.2f}" for k in keys),
                      flush=True)
    print(f"\nmedians over seeds {' '.join(map(str, SEEDS))}:")
    print(f"| arm | {' | '.join(keys)} |")
    print("|---" * (len(keys) + 1) + "|")
    for arm in ARMS:
        med = [statistics.median(r[k] for r in results[arm]) for k in keys]
        print(f"| {arm} | " + " | ".join(f"{v:.2f}" for v in med) + " |")


if __name__ == "__main__":
    main()
