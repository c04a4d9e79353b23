#!/usr/bin/env bash
# TensorBoard event files read with the real schema, by protoc, not by hyperpack: each file's
# TFRecord framing is checked and stripped here (its own CRC-32C, in Python), each record is
# decoded with `protoc --decode=<package>.Event` against the real .proto files, and the content of
# every HParams plugin value with `--decode=tensorboard.hparams.HParamsPluginData`. Prints each
# record's text form, then a table: records, framing faults (a CRC that fails, a truncated
# record), records protoc refused, fields protoc did not know (a field number the schema does not
# have), hparams contents decoded.
#
#   bench/tfevents_check.sh PROTO_ROOT EVENT_FILE_OR_DIR...
#
# PROTO_ROOT holds the .proto files in their repositories' layout, taken from fetched checkouts
# (never from this tree): tensorflow/core/util/event.proto and the tensorflow/core/framework/
# files it imports (decoded as tensorflow.Event), or TensorBoard's copy of them,
# tensorboard/compat/proto/*.proto (tensorboard.Event); and tensorboard/plugins/hparams/
# {plugin_data,api}.proto. google/protobuf/struct.proto comes with protoc. For example:
#   git -C tensorboard archive HEAD tensorboard/compat/proto tensorboard/plugins/hparams |
#     tar -x -C /tmp/protos
# A directory argument stands for the event files (events.out.tfevents.*) under it.
# Exit status 0 when every record of every file decoded with no CRC failure and no unknown field.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
command -v protoc > /dev/null || { echo "tfevents_check: protoc not found (apt-get install protobuf-compiler)" >&2; exit 2; }
exec python3 - "$@" <<'PY'
import os, re, subprocess, sys, tempfile

root = os.path.abspath(sys.argv[1])
if os.path.exists(os.path.join(root, "tensorflow/core/util/event.proto")):
    event_proto, event_type = "tensorflow/core/util/event.proto", "tensorflow.Event"
elif os.path.exists(os.path.join(root, "tensorboard/compat/proto/event.proto")):
    event_proto, event_type = "tensorboard/compat/proto/event.proto", "tensorboard.Event"
else:
    sys.exit(f"tfevents_check: no event.proto under {root} (tensorflow/core/util/ or tensorboard/compat/proto/)")
hparams_proto = "tensorboard/plugins/hparams/plugin_data.proto"
if not os.path.exists(os.path.join(root, hparams_proto)):
    sys.exit(f"tfevents_check: no {hparams_proto} under {root}")

def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def records(blob):
    """(offset, data, problem) for each record; problem is None for a good one."""
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            yield at, b"", f"truncated header ({len(blob) - at} bytes)"; return
        length = int.from_bytes(blob[at:at + 8], "little")
        if int.from_bytes(blob[at + 8:at + 12], "little") != masked(blob[at:at + 8]):
            yield at, b"", "length CRC mismatch"; return
        end = at + 12 + length + 4
        if end > len(blob):
            yield at, b"", f"truncated record ({length} bytes announced)"; return
        data = blob[at + 12:at + 12 + length]
        ok = int.from_bytes(blob[end - 4:end], "little") == masked(data)
        yield at, data, None if ok else "data CRC mismatch"
        at = end

def fields(message):
    """(field number, wire type, payload) of a message's fields: just enough to find plugin data."""
    at = 0
    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = message[at]; at += 1
            value |= (byte & 0x7F) << shift; shift += 7
            if byte < 0x80: return value
    while at < len(message):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0: yield number, wire, varint()
        elif wire == 1: yield number, wire, message[at:at + 8]; at += 8
        elif wire == 5: yield number, wire, message[at:at + 4]; at += 4
        elif wire == 2:
            length = varint(); yield number, wire, message[at:at + length]; at += length
        else: raise ValueError(f"wire type {wire}")

def hparams_contents(event):
    """The plugin_data.content of each Summary.Value whose plugin_name is "hparams"."""
    for n, w, summary in fields(event):
        if n != 5 or w != 2: continue
        for n, w, value in fields(summary):
            if n != 1 or w != 2: continue
            for n, w, metadata in fields(value):
                if n != 9 or w != 2: continue
                for n, w, plugin in fields(metadata):
                    if n != 1 or w != 2: continue
                    parts = {n: p for n, w, p in fields(plugin) if w == 2}
                    if parts.get(1) == b"hparams": yield parts.get(2, b"")

def decode(type_name, proto, data):
    run = subprocess.run(["protoc", f"--decode={type_name}", f"-I{root}", proto],
                         input=data, capture_output=True, cwd=root)
    return run.returncode, (run.stdout if run.returncode == 0 else run.stderr).decode(errors="replace")

UNKNOWN = re.compile(r"^\s*\d+\s*(:|\{)", re.M)  # how protoc prints a field its schema lacks

def check(path):
    row = dict(records=0, framing=0, refused=0, unknown=0, hparams=0)
    blob = open(path, "rb").read()
    print(f"== {path}")
    for offset, data, problem in records(blob):
        if problem and not data:
            print(f"-- byte {offset}: {problem}"); row["framing"] += 1; break
        row["records"] += 1
        if problem:
            print(f"-- byte {offset}: {problem}"); row["framing"] += 1; continue
        rc, text = decode(event_type, event_proto, data)
        print(f"-- record {row['records']} (byte {offset}, {len(data)} bytes): {event_type}")
        print(text.rstrip())
        row["refused"] += rc != 0
        row["unknown"] += len(UNKNOWN.findall(text)) if rc == 0 else 0
        for content in hparams_contents(data):
            rc, text = decode("tensorboard.hparams.HParamsPluginData", hparams_proto, content)
            print(f"   plugin_data.content: tensorboard.hparams.HParamsPluginData")
            print("   " + text.rstrip().replace("\n", "\n   "))
            row["refused"] += rc != 0
            row["unknown"] += len(UNKNOWN.findall(text)) if rc == 0 else 0
            row["hparams"] += rc == 0
    return row

paths = []
for arg in sys.argv[2:]:
    if os.path.isdir(arg):
        for dirpath, _, names in os.walk(arg):
            paths += sorted(os.path.join(dirpath, n) for n in names if "tfevents" in n)
    else:
        paths.append(arg)
rows = [(p, check(p)) for p in paths]
print()
print(f"{'file':<60} {'records':>7} {'framing':>7} {'refused':>7} {'unknown':>7} {'hparams':>7}")
for path, r in rows:
    print(f"{path[-60:]:<60} {r['records']:>7} {r['framing']:>7} {r['refused']:>7} {r['unknown']:>7} {r['hparams']:>7}")
bad = sum(r["framing"] + r["refused"] + r["unknown"] for _, r in rows)
sys.exit(1 if bad or not rows else 0)
PY
