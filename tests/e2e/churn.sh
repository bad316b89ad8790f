#!/bin/sh
# Agent churn (issue 11, "Suites that prove it"): 10 agents on a job of
# cohort 6 (+30 % over-selection), quorum 4; after every committed round 1
# to 3 of them (10-30 %) are killed with SIGKILL or frozen with SIGSTOP, and
# those of the round before come back (restarted, or SIGCONT). The job must finish:
# every round commits by quorum or is retried; no update is counted twice
# (each round_committed line's accepted count equals the distinct agents
# whose update was accepted in that attempt); the coordinator never dies.
# Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh
N=10
ROUNDS=30
names=""
i=0
while [ $i -lt $N ]; do names="$names agent-$i"; i=$((i + 1)); done
# shellcheck disable=SC2086
pki_federation $names
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients $N --samples 300 --dim 400 --support 5 --seed 9 \
    --dump-shards "$t/data"
port=$(pick_port)
{ coordinator_section "127.0.0.1:$port" off; fast_rounds; cat <<EOT

[job churn]
algo = fediterht
features = 400
tau = 5
local_steps = 20
lr = 0.1
batch = 300
rounds = $ROUNDS
cohort = 6
overselect = 0.3
min_quorum = 4
deadline_ms = 1500
heartbeat_ms = 500
max_attempts = 20
seed = 9
EOT
} > "$t/coordinator.ini"
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
wait_for 10 grep -q "event=started" "$t/coord.log" || fail "coordinator did not start"
i=0
while [ $i -lt $N ]; do start_agent $i; i=$((i + 1)); done

step "churn: each round 1-3 of $N agents killed or frozen, the previous ones back"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
committed() { grep -c "event=round_committed job=1 " "$t/coord.log" || true; }
progress() { [ "$(committed)" -gt "$1" ] || finished; }
killed="" stopped="" steps=0 kills=0 stops=0
seed=$$
while ! finished; do
    steps=$((steps + 1))
    # the next round: it commits by quorum or, at worst, after a few failed
    # attempts (polled closely, so that churn comes once per round)
    c=$(committed) n=0
    while ! progress "$c"; do
        n=$((n + 1))
        [ $n -le 5000 ] || fail "no round committed for 100 s"
        sleep 0.02
    done
    kill -0 "$coord" 2> /dev/null || fail "the coordinator died"
    for i in $killed; do start_agent "$i"; done
    for i in $stopped; do eval "kill -CONT \$agent_$i" 2> /dev/null || true; done
    killed="" stopped=""
    picks=$(awk -v s="$seed$steps" -v n=$N 'BEGIN { srand(s); k = 1 + int(rand() * 3);
        while (c < k) { a = int(rand() * n); if (!(a in u)) { u[a] = 1; c++;
        printf "%d:%d ", a, rand() < 0.5 } } }')
    for p in $picks; do
        i=${p%:*}
        if [ "${p#*:}" = 1 ]; then
            eval "kill -9 \$agent_$i" 2> /dev/null || true
            killed="$killed $i" kills=$((kills + 1))
        else
            eval "kill -STOP \$agent_$i" 2> /dev/null || true
            stopped="$stopped $i" stops=$((stops + 1))
        fi
    done
done
for i in $stopped; do eval "kill -CONT \$agent_$i" 2> /dev/null || true; done

step "every committed round by quorum, each update counted once"
/usr/bin/python3 - "$t/coord.log" <<'EOP' || fail "round accounting"
import re, sys
acc, commits, failed = {}, [], 0
for line in open(sys.argv[1]):
    m = re.search(r"event=update agent=(\d+) job=1 round=(\d+) attempt=(\d+) verdict=accepted", line)
    if m:
        key = (int(m[2]), int(m[3]))
        agents = acc.setdefault(key, [])
        assert m[1] not in agents, f"agent {m[1]} accepted twice in round/attempt {key}"
        agents.append(m[1])
    m = re.search(r"event=round_committed job=1 round=(\d+) attempt=(\d+) accepted=(\d+)", line)
    if m:
        commits.append((int(m[1]), int(m[2]), int(m[3])))
    if "event=round_failed job=1 " in line:
        failed += 1
rounds = [r for r, _, _ in commits]
assert rounds == list(range(1, len(rounds) + 1)), f"rounds out of order or repeated: {rounds}"
for r, a, n in commits:
    assert n >= 4, f"round {r} committed with {n} < quorum 4"
    assert n == len(acc.get((r, a), [])), f"round {r}: accepted={n}, accepted updates {acc.get((r, a))}"
print(f"        {len(commits)} rounds committed, {failed} attempts failed and retried")
EOP
echo "PASS: $kills agent kills and $stops freezes over $steps rounds; every round committed by" \
    "quorum or retried, each update counted once"
