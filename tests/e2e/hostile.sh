#!/bin/sh
# End-to-end: one agent's hostile updates are refused for that agent alone
# by a real sfl-coordinator over mutual TLS, and the round commits with the
# honest update (docs/security.md, "What the coordinator guarantees against
# one malicious agent").
#
# sfl-replay --hostile (tests/e2e/replay_tool.c) holds two agent
# certificates: A (hostile, claiming 1e12 samples at Join) and B (honest)
# join, subscribe and receive their tasks for round r of a job with cohort 2, min_quorum 1, max_update_norm
# 1e6 and max_samples 1000. A sends, properly signed, an update
# of finite values whose norm overflows (1e300 entries), one declaring 1e12
# samples, and one whose values are NaN: each is REJECTED with the bound it
# broke; A never sends a valid one. B's honest update is accepted and round
# r commits at its deadline with B's update alone. The job standardizes
# (standardize = 1), so round r is preceded by its statistics round (round
# 0), where A sends moments of the wrong length, with a negative sum of
# squares, counting more rows than it declares, and with a NaN: each is
# REJECTED with its reason and counted as an out-of-bounds update; B's are
# accepted and the statistics commit with B's alone. Then two real
# sfl-agents finish the job (on rows standardised with B's statistics).
# Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh
TOOL="$BIN/tests/e2e/sfl-replay"
if [ ! -x "$TOOL" ]; then
    echo "SKIP: $TOOL not built (make $TOOL)"
    exit 0
fi
pki_federation hostile-a honest-b unused-c agent-0 agent-1
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 4 --samples 40 --dim 50 --support 3 --seed 5 \
    --dump-shards "$t/data"

# As in replay.sh, a round starts only with both tool agents subscribed
# (select_wait_ms longer than the test). The round with the hostile agent
# can only close at its deadline (A never answers validly), so deadline and
# heartbeat are short; the later rounds run with the real agents.
step "start: a coordinator, a job of cohort 2 with bounds"
ROUNDS=4
{ coordinator_section "127.0.0.1:0" "off"; cat <<EOF
select_wait_ms = 120000
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job bounded]
algo = fediterht
features = 50
tau = 3
local_steps = 2
lr = 0.1
batch = 40
rounds = $ROUNDS
cohort = 2
overselect = 0
min_quorum = 1
deadline_ms = 3000
heartbeat_ms = 3000
max_attempts = 3
seed = 5
max_update_norm = 1e6
max_samples = 1000
standardize = 1
EOF
} > "$t/coordinator.ini"
start_coordinator_any_port

step "a hostile and an honest agent (sfl-replay --hostile)"
rc=0
timeout 60 "$TOOL" --hostile --coordinator "127.0.0.1:$port" --server-name 127.0.0.1 \
    --pki "$t/pki" --coordinator-pk "$PK" --agent hostile-a --other honest-b \
    --stranger unused-c --data "$t/data/client-2.svm" --data2 "$t/data/client-3.svm" \
    --timeout-ms 50000 > "$t/hostile.out" 2>&1 || rc=$?
cat "$t/hostile.out"
[ "$rc" -eq 0 ] || fail "sfl-replay --hostile exited with $rc"
grep -q "^sfl-replay: 9 checks, 0 failed$" "$t/hostile.out" || fail "not all 9 checks ran"
A=$(sed -n 's/^joined: A .* agent_id=\([0-9]*\)$/\1/p' "$t/hostile.out")
B=$(sed -n 's/^joined: B .* agent_id=\([0-9]*\)$/\1/p' "$t/hostile.out")
r=$(sed -n 's/^round: r=\([0-9]*\) .*/\1/p' "$t/hostile.out")
if [ -z "$A" ] || [ -z "$B" ] || [ -z "$r" ]; then
    fail "no agent ids or round in the tool's output"
fi

step "the coordinator's log: refused for A alone, the round committed with B's"
upd() { # agent verdict reason-fragment: exactly one such update line in round r
    n=$(grep "event=update agent=$1 job=1 round=$r " "$t/coord.log" |
        grep " verdict=$2" | grep -c -- "$3" || true)
    [ "$n" -eq 1 ] || fail "expected one '$2' update of agent $1 in round $r ($3), log has $n"
}
stat() { # agent verdict reason-fragment: exactly one such update line in round 0
    n=$(grep "event=update agent=$1 job=1 round=0 " "$t/coord.log" |
        grep " verdict=$2" | grep -c -- "$3" || true)
    [ "$n" -eq 1 ] || fail "expected one '$2' statistics update of agent $1 ($3), log has $n"
}
stat "$A" rejected "update.dim is 50, the task's model has 101"
stat "$A" rejected "statistics refused: moments: feature 0's sum of squares -1 is negative"
stat "$A" rejected "statistics refused: moments count"
stat "$A" rejected "not finite"
stat "$B" accepted ""
grep -q "event=statistics_committed job=1 attempt=0 agents=1 " "$t/coord.log" ||
    fail "the statistics round did not commit with B's moments alone"
upd "$A" rejected "max_update_norm 1e+06"
upd "$A" rejected "max_samples 1000"
upd "$A" rejected "not finite"
upd "$B" accepted ""
if grep "event=update agent=$A " "$t/coord.log" | grep -q " verdict=accepted"; then
    fail "a hostile update was accepted"
fi
committed() { grep -q "event=round_committed job=1 round=$r attempt=0 accepted=1 " "$t/coord.log"; }
wait_for 5 committed || fail "round $r not committed with the honest update alone"

step "real agents finish the job"
for i in 0 1; do start_agent $i; done
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 30 finished || fail "the job did not finish with the real agents"
echo "PASS: hostile moments (length, negative square sum, count, NaN) and updates" \
    "(overflowing norm, 1e12 samples, NaN) refused for that agent alone;" \
    "round $r committed with the honest update; job finished"
