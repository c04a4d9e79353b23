#!/usr/bin/env bash
# What TLS adds to one verb through a server: the time of `hyperpack heartbeat STUDY 0 --server`
# (one process: connect, handshake, one request the server answers from its pool with one
# UPDATE, exit) against three servers on loopback side by side, each on its own SQLite file with
# the same asked trial: one in plaintext (--insecure), one with TLS from the token (TLS-PSK, the
# default), one with certificates (mutual TLS, scripts/cluster-certs). The calls are interleaved
# (one to each server in turn, in a shuffled order each round) so that the machine's drift falls
# on all three alike. Prints a table of median, p90, min (ms) and each median over plaintext's,
# then one JSON line.
#
#   bench/verb_tls.sh [HYPERPACK] [ROUNDS]     (default build/cli/hyperpack, 60 rounds)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hyperpack="${1:-$root/build/cli/hyperpack}"
rounds="${2:-60}"
dir="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT

cat > "$dir/q.yaml" <<'YAML'
name: q
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
tuner: {algorithm: random, seed: 1}
YAML
printf '0123456789abcdef-bench-token\n' > "$dir/token"
chmod 600 "$dir/token"
"$root/scripts/cluster-certs" "$dir/certs" 127.0.0.1 client > /dev/null

# start NAME FLAGS...: a server on its own storage, with study q and its trial 0 asked; its
# address in $dir/NAME.address.
start() {
  local name="$1"; shift
  "$hyperpack" create "$dir/q.yaml" --storage "$dir/$name.db" > /dev/null
  "$hyperpack" ask q --storage "$dir/$name.db" > /dev/null
  "$hyperpack" serve --listen 127.0.0.1:0 --token-file "$dir/token" --storage "$dir/$name.db" \
    "$@" > "$dir/$name.log" 2>&1 &
  pids+=($!)
  until grep -q 'listening on' "$dir/$name.log" 2>/dev/null; do sleep 0.05; done
  sed -n 's/.*listening on //p' "$dir/$name.log" | head -1 > "$dir/$name.address"
}
certs=(--tls-ca "$dir/certs/ca.pem")
start plaintext --insecure
start psk
start certificates "${certs[@]}" --tls-cert "$dir/certs/127.0.0.1.pem" \
  --tls-key "$dir/certs/127.0.0.1.key"

/usr/bin/python3 - "$hyperpack" "$rounds" "$dir" <<'PY'
import json, random, statistics, subprocess, sys, time
cli, rounds, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
token = ["--token-file", f"{d}/token"]
client = ["--tls-ca", f"{d}/certs/ca.pem", "--tls-cert", f"{d}/certs/client.pem",
          "--tls-key", f"{d}/certs/client.key"]
modes = {"plaintext": ["--insecure"], "psk": [], "certificates": client}
address = {m: open(f"{d}/{m}.address").read().strip() for m in modes}
ms = {m: [] for m in modes}
rng = random.Random(1)
for _ in range(rounds):
    order = list(modes)
    rng.shuffle(order)
    for m in order:
        t0 = time.monotonic()
        r = subprocess.run([cli, "heartbeat", "q", "0", "--server", address[m], *token, *modes[m]],
                           capture_output=True, text=True)
        ms[m].append(1000 * (time.monotonic() - t0))
        assert r.returncode == 0, (m, r.stderr)
base = statistics.median(ms["plaintext"])
out = {}
print(f"{'connections':<14} {'median':>8} {'p90':>8} {'min':>8} {'/ plaintext':>12}")
for m, v in ms.items():
    v.sort()
    row = {"median_ms": statistics.median(v), "p90_ms": v[int(0.9 * (len(v) - 1))],
           "min_ms": v[0], "ratio": statistics.median(v) / base}
    out[m] = row
    print(f"{m:<14} {row['median_ms']:>8.1f} {row['p90_ms']:>8.1f} {row['min_ms']:>8.1f} "
          f"{row['ratio']:>12.3f}")
print(json.dumps({"rounds": rounds, "verb": "heartbeat", **out}))
PY
