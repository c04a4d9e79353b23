#!/usr/bin/env bash
# The cluster under load, on loopback, through the shipped binary: one `hyperpack serve`, AGENTS
# agents with one fake GPU each, and TRIALS short trials submitted by CLIENTS concurrent
# `hyperpack run --server` clients (one study each, TRIALS/CLIENTS trials; the server runs the
# studies one at a time in the order they arrive, the others wait in its queue). The tuner is
# random search and a trial is a shell script that appends "STUDY TRIAL ATTEMPT AGENT" to a ledger
# (one short write with O_APPEND) and prints its objective, so what is measured is the server:
# placement, launches over the agents' connections, the trials' lines and exits, and SQLite.
#
# It reports: the wall clock from the first submission to the last client's exit; trials completed
# per second of it; whether any trial was lost or run twice (every stored trial completed, and
# every (study, trial) in the ledger exactly once); the server's peak resident memory (VmHWM,
# read before it is stopped); the database's size at the end (with its -wal file); and the latency
# of `hyperpack status` and `hyperpack trials STUDY` (the study running at the time) run against
# the same storage about once a second while the load runs. A table, then one JSON line.
#
#   bench/cluster_load.sh [--hyperpack PATH] [--agents N] [--trials N] [--clients N]
#                         [--parallel N] [--interval S] [--stall S] [--dir DIR] [--keep]
#                         [--backend sqlite|postgresql] [--insecure]
#
# Connections are TLS from the token, as shipped; --insecure runs every end in plaintext, to
# measure what TLS costs.
#
# --backend postgresql keeps the storage in a PostgreSQL server this script starts and stops
# (Debian's postgresql-15: initdb and pg_ctl on a free loopback port, in the work folder, run as
# the postgres user when run as root); its size is the database's (pg_database_size), no -wal.
#
# Defaults: build/cli/hyperpack, 32 agents, 10,000 trials, 4 clients, max_parallel 32, a sample
# every 1 s, give up when no trial has run for 120 s. The same settings from the environment:
# HYPERPACK, AGENTS, TRIALS, CLIENTS, PARALLEL, INTERVAL, STALL. A quick run:
#   bench/cluster_load.sh --agents 8 --trials 400
# The work folder (storage, logs, ledger, latency samples) is removed after a clean run and kept
# after a failed one, or always with --keep or --dir. Exit status 0 only when every trial
# completed exactly once, every client exited 0 and every agent was still running at the end.
# Needs /usr/bin/python3 (standard library only) for the checks and the report.
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
hyperpack="${HYPERPACK:-$root/build/cli/hyperpack}"
agents="${AGENTS:-32}"
trials="${TRIALS:-10000}"
clients="${CLIENTS:-4}"
parallel="${PARALLEL:-32}"
security=()
interval="${INTERVAL:-1}"
stall="${STALL:-120}"
dir=""
keep=0
backend="${BACKEND:-sqlite}"

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hyperpack) hyperpack="$2"; shift 2 ;;
    --agents) agents="$2"; shift 2 ;;
    --trials) trials="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --stall) stall="$2"; shift 2 ;;
    --dir) dir="$2"; keep=1; shift 2 ;;
    --keep) keep=1; shift ;;
    --backend) backend="$2"; shift 2 ;;
    --insecure) security=(--insecure); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cluster_load.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for v in agents trials clients parallel stall; do
  if ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
    echo "cluster_load.sh: --$v must be a positive integer (got '${!v}')" >&2; exit 2
  fi
done
if [[ "$backend" != sqlite && "$backend" != postgresql ]]; then
  echo "cluster_load.sh: --backend must be sqlite or postgresql (got '$backend')" >&2; exit 2
fi
if (( clients > trials )); then
  echo "cluster_load.sh: --clients ($clients) must not exceed --trials ($trials)" >&2; exit 2
fi
if [[ ! -x "$hyperpack" ]]; then
  echo "cluster_load.sh: no hyperpack binary at $hyperpack (build it, or give --hyperpack)" >&2
  exit 2
fi
hyperpack="$(cd "$(dirname "$hyperpack")" && pwd)/$(basename "$hyperpack")"
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3

if [[ -z "$dir" ]]; then dir="$(mktemp -d /tmp/hyperpack-load.XXXXXX)"; fi
mkdir -p "$dir" || exit 2
dir="$(cd "$dir" && pwd)"
db="$dir/hyperpack.db"
ledger="$dir/ledger"
samples="$dir/latency.tsv"
if [[ -e "$db" ]]; then echo "cluster_load.sh: $db exists; give an empty --dir" >&2; exit 2; fi
cd "$dir" || exit 2  # nothing started here writes anywhere else

# ---- PostgreSQL, when it keeps the storage: a server of this run's own ----
source "$root/bench/local_postgres.sh"

# ---- Every process started here is remembered by its pid and stopped on the way out ----
server_pid=""
agent_pids=()
client_pids=()
sampler_pid=""
ok=0
stop_pids() {  # TERM, up to 5 s for them to go, then KILL
  local p alive
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2> /dev/null
  for _ in $(seq 50); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2> /dev/null && alive=1; done
    (( alive )) || break
    sleep 0.1
  done
  for p in "$@"; do kill -0 "$p" 2> /dev/null && kill -KILL "$p" 2> /dev/null; done
  wait "$@" 2> /dev/null
  return 0
}
# shellcheck disable=SC2317  # reached through the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n "$sampler_pid" ]] && stop_pids "$sampler_pid"
  (( ${#client_pids[@]} )) && stop_pids "${client_pids[@]}"
  [[ -n "$server_pid" ]] && stop_pids "$server_pid"
  (( ${#agent_pids[@]} )) && stop_pids "${agent_pids[@]}"
  stop_postgres
  if (( keep || !ok )); then
    echo "work folder kept: $dir" >&2
  else
    say "removing $dir"
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

fail() { echo "cluster_load.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%T)] $*" >&2; }  # progress, on stderr
if [[ "$backend" == postgresql ]]; then start_postgres; say "PostgreSQL on port $pg_port"; fi

# ---- The studies and the trial ----
head -c 32 /dev/urandom | base64 > "$dir/token"
chmod 600 "$dir/token"
: > "$ledger"
cat > "$dir/trial.sh" << EOF
printf '%s %s %s %s\n' "\$HYPERPACK_STUDY" "\$HYPERPACK_TRIAL_ID" "\$HYPERPACK_TRIAL_ATTEMPT" \\
  "\$HYPERPACK_AGENT" >> '$ledger'
echo "{\"loss\": \$1}"
EOF
studies=()
for ((k = 0; k < clients; ++k)); do
  n=$(( trials / clients + (k < trials % clients ? 1 : 0) ))
  name="load-$k"
  studies+=("$name")
  cat > "$dir/$name.yaml" << EOF
name: $name
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: '/bin/sh $dir/trial.sh {x}'}
tuner: {algorithm: random, seed: $k}
budget: {max_trials: $n, max_parallel: $parallel}
resources: {gpus: 1}
EOF
done

# ---- The server, then the agents ----
"$hyperpack" serve --listen 127.0.0.1:0 --token-file "$dir/token" "${security[@]}" --storage "$db" \
  > "$dir/server.log" 2>&1 &
server_pid=$!
addr=""
for _ in $(seq 100); do
  addr="$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$dir/server.log" | head -1)"
  [[ -n "$addr" ]] && break
  kill -0 "$server_pid" 2> /dev/null || fail "the server exited: $(tail -3 "$dir/server.log")"
  sleep 0.1
done
[[ -n "$addr" ]] || fail "the server did not say where it listens within 10 s"

for ((i = 0; i < agents; ++i)); do
  name="$(printf 'a%02d' "$i")"
  "$hyperpack" agent --connect "$addr" --token-file "$dir/token" "${security[@]}" --name "$name" --fake-gpus 1 \
    > "$dir/agent-$name.log" 2>&1 &
  agent_pids+=($!)
done
joined=0
for _ in $(seq 300); do
  joined="$(grep -c ' joined from ' "$dir/server.log")"
  (( joined >= agents )) && break
  sleep 0.1
done
(( joined >= agents )) || fail "only $joined of $agents agents joined within 30 s"
say "server at $addr (pid $server_pid), $agents agents joined;" \
  "submitting $trials trials in $clients studies"

# ---- The latency sampler: status, and trials of the study running, about every INTERVAL s ----
sample() {
  local t0 t1 rc running next
  printf 'at_s\tcommand\tstudy\tms\trc\n' > "$samples"
  while true; do
    next="$(awk -v a="$EPOCHREALTIME" -v b="$interval" 'BEGIN { printf "%.6f", a + b }')"
    t0=$EPOCHREALTIME
    "$hyperpack" status --storage "$db" > "$dir/status.out" 2> "$dir/status.err"
    rc=$?
    t1=$EPOCHREALTIME
    awk -v s="$start" -v a="$t0" -v b="$t1" -v rc="$rc" \
      'BEGIN { printf "%.3f\tstatus\t-\t%.1f\t%d\n", a - s, 1000 * (b - a), rc }' >> "$samples"
    running="$(awk '$2 == "running" { print $1; exit }' "$dir/status.out")"
    if [[ -n "$running" ]]; then
      t0=$EPOCHREALTIME
      "$hyperpack" trials "$running" --storage "$db" > /dev/null 2> "$dir/trials.err"
      rc=$?
      t1=$EPOCHREALTIME
      awk -v s="$start" -v a="$t0" -v b="$t1" -v rc="$rc" -v st="$running" \
        'BEGIN { printf "%.3f\ttrials\t%s\t%.1f\t%d\n", a - s, st, 1000 * (b - a), rc }' \
        >> "$samples"
    fi
    sleep "$(awk -v n="$next" -v a="$EPOCHREALTIME" \
      'BEGIN { d = n - a; if (d < 0) d = 0; printf "%.3f", d }')"
  done
}

# ---- The load ----
start=$EPOCHREALTIME
for name in "${studies[@]}"; do
  "$hyperpack" run "$dir/$name.yaml" --server "$addr" --token-file "$dir/token" "${security[@]}" \
    > "$dir/client-$name.log" 2>&1 &
  client_pids+=($!)
done
sample &
sampler_pid=$!

# Wait for the clients, watching for a stall (no new ledger line for STALL seconds) and for the
# server dying (an agent that died is counted after the load).
declare -A client_rc=()
last_lines=0
last_change=$SECONDS
stalled=""
while (( ${#client_rc[@]} < clients )); do
  for idx in "${!client_pids[@]}"; do
    p="${client_pids[$idx]}"
    [[ -n "${client_rc[$idx]:-}" ]] && continue
    if ! kill -0 "$p" 2> /dev/null; then
      wait "$p"
      client_rc[$idx]=$?
    fi
  done
  (( ${#client_rc[@]} >= clients )) && break
  kill -0 "$server_pid" 2> /dev/null || { stalled="the server exited"; break; }
  lines="$(wc -l < "$ledger")"
  if (( lines != last_lines )); then
    last_lines=$lines
    last_change=$SECONDS
  elif (( SECONDS - last_change >= stall )); then
    stalled="no trial ran for ${stall} s (ledger at $lines lines)"
    break
  fi
  sleep 0.2
done
end=$EPOCHREALTIME
say "load over after $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s; checking"
stop_pids "$sampler_pid"
sampler_pid=""

# ---- Measured before anything is stopped ----
vm_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2> /dev/null; }
server_hwm_kb="$(vm_of "$server_pid" VmHWM)"
server_rss_kb="$(vm_of "$server_pid" VmRSS)"
agent_hwm_kb=0
for p in "${agent_pids[@]}"; do
  h="$(vm_of "$p" VmHWM)"
  [[ -n "$h" ]] && (( h > agent_hwm_kb )) && agent_hwm_kb=$h
done
# CPU seconds (user + system) of the server and of all the agents together (not their trials).
cpu_of() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' \
  "/proc/$1/stat" 2> /dev/null; }
server_cpu_s="$(cpu_of "$server_pid")"
agents_cpu_s=0
for p in "${agent_pids[@]}"; do
  c="$(cpu_of "$p")"
  [[ -n "$c" ]] && agents_cpu_s="$(awk -v a="$agents_cpu_s" -v b="$c" 'BEGIN { print a + b }')"
done
agents_alive=0
for p in "${agent_pids[@]}"; do
  kill -0 "$p" 2> /dev/null && agents_alive=$((agents_alive + 1))
done
size_of() { if [[ -e "$1" ]]; then stat -c %s "$1"; else echo 0; fi; }
if [[ "$backend" == postgresql ]]; then
  db_bytes="$("$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U hp -d postgres -At \
    -c 'SELECT pg_database_size(current_database())' 2> /dev/null || echo 0)"
  wal_bytes=0
else
  db_bytes="$(size_of "$db")"
  wal_bytes="$(size_of "$db-wal")"
fi
logs_kb="$(du -sk "$dir/hyperpack_logs" 2> /dev/null | cut -f1)"

if [[ -n "$stalled" ]]; then
  echo "STALL: $stalled" >&2
  echo "--- server log (last 20 lines)" >&2; tail -20 "$dir/server.log" >&2
  for name in "${studies[@]}"; do
    echo "--- client $name (last 3 lines)" >&2; tail -3 "$dir/client-$name.log" >&2
  done
  "$hyperpack" status --storage "$db" >&2
fi

# Every client has exited (or the load is abandoned); the stored trials are read with the shipped
# command, then the server and the agents are stopped.
for name in "${studies[@]}"; do
  "$hyperpack" trials "$name" --storage "$db" --json > "$dir/trials-$name.json" 2> /dev/null ||
    echo "null" > "$dir/trials-$name.json"
done
stop_pids "$server_pid"; server_pid=""
stop_pids "${agent_pids[@]}"; agent_pids=()

say "server and agents stopped"
rcs=""
for ((k = 0; k < clients; ++k)); do rcs+="${client_rc[$k]:--1},"; done

# ---- The checks and the report ----
CLUSTER_LOAD_BACKEND="$backend" "$python" - "$dir" "$trials" "$agents" "$clients" "$parallel" "$start" "$end" \
  "${server_hwm_kb:-0}" "${server_rss_kb:-0}" "$agent_hwm_kb" "$agents_alive" "$db_bytes" \
  "$wal_bytes" "${server_cpu_s:-0}" "$agents_cpu_s" "${logs_kb:-0}" "${rcs%,}" "$stalled" \
  "${studies[@]}" << 'PY'
import collections, json, os, statistics, sys

(d, trials, agents, clients, parallel, start, end, hwm, rss, agent_hwm, agents_alive, db_bytes,
 wal_bytes, server_cpu, agents_cpu, logs_kb, rcs, stalled, *studies) = sys.argv[1:]
trials, agents, clients, parallel = int(trials), int(agents), int(clients), int(parallel)
wall = float(end) - float(start)
rcs = [int(x) for x in rcs.split(",")]

# The ledger: one line per process that ran.
ran = collections.Counter()
attempts_in_ledger = collections.Counter()
per_agent = collections.Counter()
with open(f"{d}/ledger") as f:
    for line in f:
        parts = line.split()
        if len(parts) < 3:
            continue
        ran[(parts[0], int(parts[1]))] += 1
        attempts_in_ledger[parts[2]] += 1
        if len(parts) > 3:
            per_agent[parts[3]] += 1

states = collections.Counter()
stored = set()
rerun = set()  # (study, trial) that a later trial runs again: a preempted one may never have run
durations = []
per_study = []
retried = 0
for i, name in enumerate(studies):
    want = trials // clients + (1 if i < trials % clients else 0)
    with open(f"{d}/trials-{name}.json") as f:
        rows = json.load(f) or []
    done = [r for r in rows if r["state"] == "completed"]
    for r in rows:
        states[r["state"]] += 1
        if r.get("duration_s") is not None:
            durations.append(r["duration_s"])
        stored.add((name, r["trial"]))
        if r.get("attempt", 1) != 1 or r.get("retry_of") is not None:
            retried += 1
        if r.get("retry_of") is not None:
            rerun.add((name, r["retry_of"]))
    starts = [r["started"] for r in rows if r.get("started")]
    ends = [r["ended"] for r in rows if r.get("ended")]
    span = max(ends) - min(starts) if starts and ends else 0.0
    per_study.append({"study": name, "want": want, "stored": len(rows), "completed": len(done),
                      "span_s": round(span, 2),
                      "per_s": round(len(done) / span, 1) if span > 0 else 0.0})

completed = states.get("completed", 0)
# Short of the studies' budgets: not completed. A stored trial whose process never wrote the ledger
# never ran, unless a later trial runs it again (a trial preempted for another study's fair share
# before its process started is interrupted and re-run under a new number); a (study, trial) with more than one line ran twice (or more); a line for a trial that
# storage does not have is unaccounted for.
not_completed = trials - completed
missing = sorted(k for k in stored if ran[k] == 0 and k not in rerun)
duplicates = sorted(k for k, n in ran.items() if n > 1)
extra_runs = sum(n - 1 for n in ran.values() if n > 1)
unknown = sorted(k for k in ran if k not in stored)

def stats(cmd):
    ms, bad = [], 0
    with open(f"{d}/latency.tsv") as f:
        next(f, None)
        for line in f:
            at, c, study, t, rc = line.rstrip("\n").split("\t")
            if c == cmd:
                ms.append(float(t))
                bad += rc != "0"
    if not ms:
        return {"n": 0, "median_ms": None, "max_ms": None, "failed": bad}
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1), "max_ms": round(max(ms), 1),
            "failed": bad}

status_lat, trials_lat = stats("status"), stats("trials")
clean = (not_completed == 0 and not missing and not duplicates and not unknown
         and int(agents_alive) == agents and all(rc == 0 for rc in rcs) and not stalled)
result = {
    "bench": "cluster_load", "backend": os.environ.get("CLUSTER_LOAD_BACKEND", "sqlite"),
    "agents": agents, "trials": trials, "clients": clients,
    "max_parallel": parallel, "wall_s": round(wall, 2),
    "trials_per_s": round(completed / wall, 1) if wall > 0 else 0.0,
    "completed": completed, "states": dict(states), "not_completed": not_completed,
    "never_ran": len(missing),
    "run_twice": len(duplicates), "extra_runs": extra_runs, "unknown": len(unknown),
    "retried": retried, "client_exit": rcs, "agents_alive": int(agents_alive),
    "server_vmhwm_mib": round(int(hwm) / 1024, 1), "server_vmrss_mib": round(int(rss) / 1024, 1),
    "agent_vmhwm_mib_max": round(int(agent_hwm) / 1024, 1),
    "trial_median_ms": round(1000 * statistics.median(durations), 1) if durations else None,
    "slot_turnover_ms":
        round(1000 * wall * min(agents, parallel) / completed, 1) if completed else None,
    "server_cpu_s": float(server_cpu), "agents_cpu_s": round(float(agents_cpu), 2),
    "db_mib": round(int(db_bytes) / 2**20, 1), "wal_mib": round(int(wal_bytes) / 2**20, 1),
    "db_total_mib": round((int(db_bytes) + int(wal_bytes)) / 2**20, 1),
    "logs_mib": round(int(logs_kb) / 1024, 1),
    "status_latency": status_lat, "trials_latency": trials_lat,
    "studies": per_study, "stalled": stalled or None, "ok": clean,
}

def ms(x):
    return "-" if x is None else f"{x:.0f}"

print(f"cluster load: {agents} agents x 1 fake GPU, {trials} trials in {clients} studies "
      f"submitted at once, max_parallel {parallel}")
print(f"| measure | value |")
print(f"|---|---|")
print(f"| storage | {result['backend']} |")
print(f"| wall clock (first submission to last client exit) | {wall:.1f} s |")
print(f"| trials completed / wall | {result['trials_per_s']} per s |")
print(f"| one trial as stored (started to ended), median | {ms(result['trial_median_ms'])} ms; "
      f"a GPU turns over every {ms(result['slot_turnover_ms'])} ms (wall x GPUs / trials) |")
print(f"| trials completed | {completed} of {trials} (states: "
      + ", ".join(f"{k} {v}" for k, v in sorted(states.items())) + ") |")
print(f"| not completed / stored but never ran / ran twice / ran but not stored | "
      f"{not_completed} / {len(missing)} / {len(duplicates)} / {len(unknown)} |")
print(f"| client exit codes; agents alive at the end | {' '.join(map(str, rcs))}; "
      f"{agents_alive} of {agents} |")
print(f"| server peak memory (VmHWM) | {result['server_vmhwm_mib']} MiB (VmRSS at end "
      f"{result['server_vmrss_mib']} MiB) |")
print(f"| agent peak memory (largest VmHWM) | {result['agent_vmhwm_mib_max']} MiB |")
print(f"| CPU time: server / all agents (not their trials) | {result['server_cpu_s']:.1f} s / "
      f"{result['agents_cpu_s']:.1f} s |")
print(f"| database at the end | {result['db_total_mib']} MiB ({result['db_mib']} + "
      f"{result['wal_mib']} MiB -wal); trial logs {result['logs_mib']} MiB |")
for name, s in (("status", status_lat), ("trials STUDY", trials_lat)):
    print(f"| `hyperpack {name}` latency, median / max (n) | {ms(s['median_ms'])} / "
          f"{ms(s['max_ms'])} ms ({s['n']} samples, {s['failed']} failed) |")
for s in per_study:
    print(f"| study {s['study']} | {s['completed']}/{s['want']} completed in {s['span_s']} s "
          f"({s['per_s']} per s) |")
if missing:
    print("stored, never ran:", " ".join(f"{a}#{b}" for a, b in missing[:20]))
if duplicates:
    print("ran more than once:", " ".join(f"{a}#{b}x{ran[(a, b)]}" for a, b in duplicates[:20]))
if unknown:
    print("ran but not stored:", " ".join(f"{a}#{b}" for a, b in unknown[:20]))
if stalled:
    print("stalled:", stalled)
print(json.dumps(result, separators=(",", ":")))
sys.exit(0 if clean else 1)
PY
report_rc=$?
(( report_rc == 0 )) && ok=1
exit "$report_rc"
