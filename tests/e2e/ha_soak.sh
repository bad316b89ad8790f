#!/bin/sh
# Round-master failover soak (issue 28, `make soak`; not in `make test`): two
# masters on one PostgreSQL store, three agents with both addresses, a job in
# ordered mode; the active master is killed -9 SFL_HA_KILLS times (50) at
# random points: after each takeover the script waits for one more committed
# round (observed progress, whatever the machine's speed), then a uniform
# random 0..500 ms, and kills the leader; the standby takes over with the
# next epoch and the killed one is started again as the standby. At the end
# every round 1..R is committed exactly once and the model equals sfl-sim's
# bit for bit. Prints the takeover time, from the kill to the new leader's
# first tasks (its event=first_tasks line): min, median, max (timing is
# reported, never asserted: STYLE rule 22). A few minutes.
set -eu
. tests/e2e/lib.sh
. tests/e2e/lib-ha.sh

KILLS=${SFL_HA_KILLS:-50}
ROUNDS=$((KILLS * 5 + 20))
ha_setup $ROUNDS
master_start m1
wait_for 10 has_epoch 1 || fail "m1 did not lead"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"
ha_agents
: > "$t/takeovers"
k=0
while [ $k -lt $KILLS ]; do
    k=$((k + 1))
    seen=$(committed)
    wait_for 30 at_least $((seen + 1)) || fail "no progress before kill $k"
    finished && fail "the job finished after $((k - 1)) kills; make it longer"
    sleep "$(awk -v s="$$$k" 'BEGIN { srand(s); printf "%.3f", rand() * 0.5 }')"
    e=$(leader_epoch)
    l=$(leader_name)
    case $l in m1) s=m2 ;; m2) s=m1 ;; *) fail "no leader before kill $k" ;; esac
    kill_ms=$(date +%s%3N)
    master_kill "$l"
    wait_for 10 has_epoch $((e + 1)) || fail "kill $k: $s did not take over from $l"
    [ "$(leader_name)" = "$s" ] || fail "kill $k: epoch $((e + 1)) is not $s's"
    echo "$((e + 1)) $kill_ms" >> "$t/takeovers"
    nstandby=$(grep -c "event=standby" "$t/$l.log" || true)
    master_start "$l"
    back() { [ "$(grep -c "event=standby" "$t/$l.log")" -gt "$nstandby" ]; }
    wait_for 10 back || fail "kill $k: $l did not come back as the standby"
    [ $((k % 10)) -ne 0 ] || step "kill $k of $KILLS: epoch $((e + 1)), $(committed) rounds committed"
done
step "$KILLS kills; the job runs to its end"
wait_for 120 finished || fail "the job did not finish ($(committed) commits)"
history_once
same_as_sim
# Takeover: kill -> the new leader's first tasks (its log's ts).
/usr/bin/python3 - "$t/takeovers" "$t/m1.log" "$t/m2.log" <<'EOP' || fail "takeover times"
import re, statistics, sys
from datetime import datetime, timezone
first = {}
for p in sys.argv[2:]:
    for l in open(p):
        m = re.match(r"ts=(\S+)Z .* event=first_tasks epoch=(\d+) ", l)
        if m:
            ts = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
            first.setdefault(int(m.group(2)), ts.timestamp() * 1000)
ms = []
for l in open(sys.argv[1]):
    e, k = map(int, l.split())
    assert e in first, f"epoch {e}: no first_tasks line"
    ms.append(first[e] - k)
ms.sort()
print(f"takeover (kill -9 -> first tasks) over {len(ms)} kills: min {ms[0]:.0f} ms, "
      f"median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms")
EOP
echo "PASS: $KILLS kills -9 of the leading master; the standby took over each time; every round" \
    "1..$ROUNDS committed once; the model equals sfl-sim's"
