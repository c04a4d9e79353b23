#!/usr/bin/python3
"""Checks the field names hyperpack's launcher exports write against the launchers' own source.

Usage: bench/launcher_fields.py [--lightning TREE] [--deepspeed TREE] [--transformers FILE]
                                [--hyperpack build/cli/hyperpack]
  --lightning TREE     a checkout of Lightning-AI/pytorch-lightning
  --deepspeed TREE     a checkout of microsoft/DeepSpeed
  --transformers FILE  transformers' src/transformers/training_args.py

A study with a parameter for every role (learning rate, micro batch, accumulation, data-parallel
degree, precision, warm-up, weight decay, momentum, optimizer) is run with a command that prints
its loss, and exported as --format hf, lightning and deepspeed. Each key written is looked up:
  hf         a field of the TrainingArguments dataclass (read with ast, nothing imported);
  lightning  trainer: keys are parameters of Trainer.__init__; precision is one of its
             _PRECISION_INPUT_STR literals;
  deepspeed  each key is a constant in deepspeed/runtime (constants.py, lr_schedules.py), the
             optimizer type is DeepSpeed's own (config.py) or a torch.optim class, and its params
             are that torch.optim class's keyword arguments (python3-torch's).
Prints one line per key and exits 1 when any is unknown. Trees missing are skipped, said so.
"""
import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile

STUDY = """name: fields
objective: {metric: loss, direction: minimize}
search_space:
  learning_rate: {type: float, low: 0.001, high: 0.1, log: true}
  micro_batch_size: [16]
  grad_accumulation: [2]
  data_parallel: [2]
  precision: [%s]
  warmup_steps: [10]
  weight_decay: [0.01]
  momentum: [0.9]
  optimizer: [sgd]
trial: {command: "echo '{{\\"loss\\": {learning_rate}}}'"}
tuner: {algorithm: random, seed: 1}
budget: {max_trials: 1}
"""


def export(hyperpack, precision, fmt):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.yaml")
        with open(path, "w") as f:
            f.write(STUDY % precision)
        db = os.path.join(d, "s.db")
        subprocess.run([hyperpack, "run", path, "--storage", db, "--progress", "quiet"],
                       check=True, capture_output=True)
        out = subprocess.run([hyperpack, "export", "fields", "--format", fmt, "--storage", db],
                             check=True, capture_output=True, text=True)
        return out.stdout


def dataclass_fields(path, cls):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {s.target.id for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return set()


def git_show(tree, path):
    return subprocess.run(["git", "-C", tree, "show", "HEAD:" + path], check=True,
                          capture_output=True, text=True).stdout


def init_params(source, cls):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    a = f.args
                    return {x.arg for x in a.args + a.kwonlyargs}
    return set()


def report(fmt, key, ok, bad):
    print(f"{fmt:10s} {key:40s} {'ok' if ok else 'UNKNOWN'}")
    if not ok:
        bad.append(f"{fmt}: {key}")


def check_hf(args, bad):
    fields = dataclass_fields(args.transformers, "TrainingArguments")
    for precision in ("bf16", "fp16"):
        for key in json.loads(export(args.hyperpack, precision, "hf")):
            report("hf", key, key in fields, bad)


def lightning_yaml_keys(text, block):
    keys, inside = {}, False
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if not line.startswith(" "):
            inside = line.rstrip(":") == block
            continue
        if inside:
            k, _, v = line.strip().partition(":")
            keys[k] = v.split("#")[0].strip().strip('"')
    return keys


def check_lightning(args, bad):
    trainer = git_show(args.lightning, "src/lightning/pytorch/trainer/trainer.py")
    params = init_params(trainer, "Trainer")
    precision_src = git_show(args.lightning, "src/lightning/fabric/plugins/precision/precision.py")
    literals = set()
    for node in ast.walk(ast.parse(precision_src)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_PRECISION_INPUT_STR":
            literals = {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    for precision in ("bf16", "fp16", "fp32"):
        keys = lightning_yaml_keys(export(args.hyperpack, precision, "lightning"), "trainer")
        for key, value in keys.items():
            report("lightning", key, key in params, bad)
        report("lightning", "precision: " + keys["precision"], keys["precision"] in literals, bad)


def check_deepspeed(args, bad):
    sources = "".join(git_show(args.deepspeed, p) for p in (
        "deepspeed/runtime/constants.py", "deepspeed/runtime/lr_schedules.py",
        "deepspeed/runtime/config.py"))

    import inspect
    import torch.optim

    def walk(prefix, obj):
        for key, value in obj.items():
            if prefix == "optimizer.params.":
                # The optimizer's own keyword arguments: torch.optim's class of that name.
                cls = getattr(torch.optim, config["optimizer"]["type"])
                report("deepspeed", prefix + key, key in inspect.signature(cls).parameters, bad)
            elif key not in ("optimizer", "scheduler", "params", "type"):
                report("deepspeed", prefix + key, f"'{key}'" in sources or f'"{key}"' in sources, bad)
            if isinstance(value, dict):
                walk(prefix + key + ".", value)

    for precision in ("bf16", "fp16"):
        config = json.loads(export(args.hyperpack, precision, "deepspeed"))
        walk("", config)
    opt = config["optimizer"]["type"]
    report("deepspeed", "optimizer.type " + opt,
           f"'{opt.lower()}'" in sources or hasattr(torch.optim, opt), bad)
    report("deepspeed", "scheduler.type " + config["scheduler"]["type"],
           f"'{config['scheduler']['type']}'" in sources, bad)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lightning")
    p.add_argument("--deepspeed")
    p.add_argument("--transformers")
    p.add_argument("--hyperpack", default="build/cli/hyperpack")
    args = p.parse_args()
    bad = []
    for name, check in (("transformers", check_hf), ("lightning", check_lightning),
                        ("deepspeed", check_deepspeed)):
        if getattr(args, name):
            check(args, bad)
        else:
            print(f"{name}: no tree given, skipped")
    if bad:
        print("unknown keys: " + ", ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
