#!/bin/sh
# End-to-end: replayed, re-targeted, tampered and misattributed updates are
# refused by a real sfl-coordinator over mutual TLS, and the job then
# finishes with real agents.
#
# sfl-replay (tests/e2e/replay_tool.c) holds three agent certificates of the
# federation: A and B join with fresh Ed25519 identities, subscribe, verify
# their tasks against the pinned coordinator key and train them with the
# agent's own code (agent_train_task); C never joins. The job's cohort is 2
# and nobody else is connected while the tool runs, so rounds 1 and 2 select
# exactly A and B, and each stays open until both have answered: every
# verdict is taken while the round it aims at is open (see the tool's
# header for the list). Afterwards two real sfl-agents finish the job.
#
# Checks: the tool's own expectations (exit 0), the coordinator's log
# (event=update ... verdict=... reason=..., call_refused for the foreign
# certificates, exactly one accepted update per agent and round), and the
# job reaching state=finished with the real agents. Bounded: every wait
# has a timeout; about a second when all is well, under 45 s when it hangs.
set -eu
. tests/e2e/lib.sh
TOOL="$BIN/tests/e2e/sfl-replay"
if [ ! -x "$TOOL" ]; then
    echo "SKIP: $TOOL not built (make $TOOL)"
    exit 0
fi
pki_federation replay-a replay-b replay-c agent-0 agent-1
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 4 --samples 40 --dim 50 --support 3 --seed 5 \
    --dump-shards "$t/data"

# cohort 2 with no over-selection: the full selection is two agents, and a
# round starts at once when two eligible agents are subscribed. select_wait_ms
# is longer than the test, so no round ever starts with one agent while the
# other is still on its way (which would leave the latecomer waiting for a
# round's deadline). The deadline and the heartbeat timeout are long enough
# that no round closes on time while the tool acts; rounds close because
# both members answered.
step "start: a coordinator, a job of cohort 2"
ROUNDS=6
{ coordinator_section "127.0.0.1:0" "off"; cat <<EOF
select_wait_ms = 120000
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job replay]
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
deadline_ms = 30000
heartbeat_ms = 30000
max_attempts = 2
seed = 5
EOF
} > "$t/coordinator.ini"
start_coordinator_any_port

# ---- the tool, alone with the coordinator --------------------------------------------
step "the tool, alone with the coordinator"
rc=0
timeout 40 "$TOOL" --coordinator "127.0.0.1:$port" --server-name 127.0.0.1 --pki "$t/pki" \
    --coordinator-pk "$PK" --agent replay-a --other replay-b --stranger replay-c \
    --data "$t/data/client-2.svm" --data2 "$t/data/client-3.svm" --timeout-ms 30000 \
    > "$t/replay.out" 2>&1 || rc=$?
cat "$t/replay.out"
[ "$rc" -eq 0 ] || fail "sfl-replay exited with $rc"
grep -q "^sfl-replay: 13 checks, 0 failed$" "$t/replay.out" || fail "sfl-replay did not run all 13 checks"

A=$(sed -n 's/^joined: A .* agent_id=\([0-9]*\)$/\1/p' "$t/replay.out")
B=$(sed -n 's/^joined: B .* agent_id=\([0-9]*\)$/\1/p' "$t/replay.out")
r=$(sed -n 's/^round: r=\([0-9]*\) .*/\1/p' "$t/replay.out")
if [ -z "$A" ] || [ -z "$B" ] || [ -z "$r" ]; then
    fail "no agent ids or round in the tool's output"
fi
r1=$((r + 1)) r2=$((r + 2))

# ---- what the coordinator logged -------------------------------------------------------
upd() { # agent round verdict [reason fragment]: exactly one such update line
    n=$(grep "event=update agent=$1 job=1 round=$2 " "$t/coord.log" |
        grep " verdict=$3" | grep -c -- "${4:-}" || true)
    [ "$n" -eq 1 ] || fail "expected one '$3' update of agent $1 for round $2${4:+ ($4)}, log has $n"
}
upd "$A" "$r" rejected "signature does not verify"           # tampered
upd "$A" "$r" accepted
upd "$A" "$r" duplicate "already accepted"                   # replayed
upd "$B" "$r" rejected "signature does not verify"           # A's update as B's
upd "$B" "$r" accepted
upd "$A" "$r" late "is not open"                             # round r's bytes in r + 1
# re-targeted, and re-signed by its agent for round r + 1's key: both fail the
# signature (round key, round and nonce are signed)
n=$(grep "event=update agent=$A job=1 round=$r1 " "$t/coord.log" | grep " verdict=rejected" |
    grep -c "signature does not verify" || true)
[ "$n" -eq 2 ] || fail "expected two bad-signature updates of agent $A for round $r1, log has $n"
upd "$A" "$r2" wrong_round
upd "$A" "$r1" accepted
upd "$B" "$r1" accepted
acc=$(grep "event=update agent=\($A\|$B\) " "$t/coord.log" | grep -c " verdict=accepted" || true)
[ "$acc" -eq 4 ] || fail "the tool's agents have $acc accepted updates, want 4 (one per round each)"
grep -q "event=call_refused .*peer=\"\{0,1\}replay-c\"\{0,1\} path=/sfl.v1.Coordinator/SubmitUpdate status=FAILED_PRECONDITION" \
    "$t/coord.log" || fail "no FAILED_PRECONDITION refusal for the certificate that never joined"
grep -q "event=call_refused .*peer=\"\{0,1\}replay-b\"\{0,1\} path=/sfl.v1.Coordinator/SubmitUpdate status=PERMISSION_DENIED.*agent_id $A is not bound" \
    "$t/coord.log" || fail "no PERMISSION_DENIED refusal for A's update over B's certificate"
for x in "$r" "$r1"; do
    grep -q "event=round_committed job=1 round=$x attempt=0 accepted=2 " "$t/coord.log" ||
        fail "round $x not committed with the two accepted updates"
done

# ---- real agents finish the job ----------------------------------------------------------
step "real agents finish the job"
for i in 0 1; do start_agent $i --log_level debug; done # every ack is read
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 30 finished || fail "the job did not finish with the real agents"
grep -q "event=round_committed job=1 round=$ROUNDS .* accepted=2 " "$t/coord.log" ||
    fail "the last round was not committed with both real agents"
if grep -q "event=ack .*status=\(rejected\|late\|duplicate\|wrong_round\)" "$t"/agent-*.log; then
    fail "a real agent had an update refused"
fi
echo "PASS: replayed, re-targeted, re-signed, tampered and misattributed updates refused;" \
    "job finished with real agents"
