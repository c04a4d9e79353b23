#!/usr/bin/env bash
# The chaos test (tests/chaos_test.cc) over many seeds: a server and three agents on loopback run
# a study of 30 checkpointing trials while each seed's script SIGKILLs and SIGSTOPs/SIGCONTs agents
# and the server. Prints, per seed, what was injected and whether every check held, then the
# totals per kind of fault and the time from a lost agent to its trial running elsewhere. "waited":
# attempts that found an earlier attempt of their trial still running (its fence late) and waited
# for its attempt lock.
#
#   bench/chaos.sh [SEEDS] [FAULTS] [CHAOS_TEST]   (default 20 seeds, 12 faults each,
#                                                   build/tests/chaos_test)
#
# STANDBY=1 runs the other test of the binary instead: two servers on one PostgreSQL database (a
# throwaway server the test starts), where a killed leader's study goes on at the standby.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seeds="${1:-20}"
faults="${2:-12}"
binary="${3:-$root/build/tests/chaos_test}"
if [ "${STANDBY:-0}" = 1 ]; then
  filter=ChaosTest.AStudySurvivesLeaderKillsWithAStandbyOnPostgreSQL
else
  filter=ChaosTest.AStudySurvivesKilledAndStoppedAgentsAndServer
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for seed in $(seq 1 "$seeds"); do
  start=$(date +%s%N)
  if HYPERPACK_CHAOS_SEED=$seed HYPERPACK_CHAOS_FAULTS=$faults "$binary" --gtest_filter="$filter" \
    > "$out.log" 2>&1; then
    result=pass
  else
    result=FAIL
    cp "$out.log" "/tmp/chaos-seed-$seed.log"
  fi
  line=$(grep '^chaos: ' "$out.log" | sed 's/^chaos: //' || true)
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s %s %s %s\n' "$seed" "$result" "$ms" "${line:-{\}}" >> "$out"
done
rm -f "$out.log"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [l.split(" ", 3) for l in open(sys.argv[1]) if l.strip()]
kinds = ["agent_kill", "agent_stop", "server_kill", "server_stop"]
total = {k: 0 for k in kinds}
relaunch = []
print(f"{'seed':>4} {'result':>6} {'secs':>6} " + " ".join(f"{k:>11}" for k in kinds) +
      f" {'trials':>6} {'resumed':>7} {'waited':>6}")
for seed, result, secs, payload in rows:
    j = json.loads(payload)
    f = j.get("faults", {})
    for k in kinds:
        total[k] += f.get(k, 0)
    if "relaunch_median_s" in j:
        relaunch.append(j["relaunch_median_s"])
    print(f"{seed:>4} {result:>6} {int(secs) / 1000:>6.1f} " +
          " ".join(f"{f.get(k, 0):>11}" for k in kinds) +
          f" {j.get('trials', 0):>6} {j.get('attempts_resumed_from_checkpoint', 0):>7}"
          f" {j.get('attempts_waited_for_lock', 0):>6}")
passed = sum(r[1] == "pass" for r in rows)
waited = sum(json.loads(r[3]).get("attempts_waited_for_lock", 0) for r in rows)
print(f"\n{passed}/{len(rows)} seeds passed; faults injected: " +
      ", ".join(f"{k} {v}" for k, v in total.items()))
print(f"attempts that found an earlier one of their trial still running and waited for its lock: "
      f"{waited}")
if relaunch:
    print(f"from an agent declared lost to its trial running elsewhere (median of the seeds' "
          f"medians): {statistics.median(relaunch):.2f} s (max {max(relaunch):.2f} s); a killed "
          f"agent is declared lost when its connection drops, a stopped one after the 1.5 s "
          f"heartbeat timeout")
PY
