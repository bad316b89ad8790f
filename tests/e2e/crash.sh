#!/bin/sh
# Crash safety of the coordinator (issue 11, "Suites that prove it"): a job
# with ordered aggregation runs with 2 agents while the coordinator is killed
# with SIGKILL at random points, SFL_KILLS times (10 in `make test`, 100 in
# `make soak`), restarted after each. After every kill, with the coordinator
# down: PRAGMA integrity_check is ok, the last committed round never goes
# backwards, and no round was committed twice. At the end the job finishes
# and its model equals sfl-sim's bit for bit (what an uninterrupted run
# gives: encodings.sh, federation.sh).
#
# Kill points: after each restart the script waits for observed progress
# (one more committed round), then sleeps a random 0..300 ms and kills, so
# the kills land anywhere in the round cycle (selection, training,
# aggregation, the checkpoint write) whatever the machine's speed; the model
# (20,000 features) makes aggregation and the checkpoint write a visible
# part of the cycle. Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh
KILLS=${SFL_KILLS:-10}
ROUNDS=$((KILLS * 60 + 60))
PY=/usr/bin/python3

pki_federation agent-0 agent-1
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients 2 --samples 50 --dim 20000 --support 20 --seed 7"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
# A fixed port: the agents reconnect to it after each restart.
port=$(pick_port)
{ coordinator_section "127.0.0.1:$port" off; fast_rounds; cat <<EOT

[job crash]
algo = fediterht
features = 20000
tau = 20
local_steps = 2
lr = 0.1
batch = 50
rounds = $ROUNDS
cohort = 2
overselect = 0
min_quorum = 2
deadline_ms = 20000
seed = 7
aggregation = ordered
EOT
} > "$t/coordinator.ini"

db="$t/state/coordinator.db"
check_db() { # prints the last committed round; fails on any broken invariant
    $PY - "$db" "$1" <<'EOP' || fail "store check after kill $2"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ok = db.execute("PRAGMA integrity_check").fetchone()[0]
assert ok == "ok", ok
row = db.execute("SELECT last_committed_round FROM jobs WHERE id = 1").fetchone()
last = row[0] if row else 0
assert last >= int(sys.argv[2]), f"last committed round went back: {last} < {sys.argv[2]}"
twice = db.execute("SELECT round FROM rounds WHERE job_id = 1 AND state = 'committed' "
                   "GROUP BY round HAVING COUNT(*) > 1").fetchall()
assert not twice, f"rounds committed twice: {twice}"
ck = db.execute("SELECT MAX(round) FROM checkpoints WHERE job_id = 1").fetchone()[0] or 0
assert ck == last, f"checkpoint {ck} but last committed {last}"
print(last)
EOP
}
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
wait_for 10 grep -q "event=started" "$t/coord.log" || fail "coordinator did not start"
for i in 0 1; do start_agent $i; done
progress() { [ "$(grep -c "event=round_committed job=1 " "$t/coord.log")" -gt "$1" ] ||
             grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
last=0
k=0
midjob=0
while [ $k -lt $KILLS ]; do
    k=$((k + 1))
    seen=$(grep -c "event=round_committed job=1 " "$t/coord.log" || true)
    wait_for 20 progress "$seen" || fail "no progress before kill $k"
    sleep "$(awk -v s="$$$k" 'BEGIN { srand(s); printf "%.3f", rand() * 0.3 }')"
    grep -q "event=job_state job=1 state=finished" "$t/coord.log" || midjob=$k
    kill -9 "$coord"
    wait "$coord" 2> /dev/null || true
    last=$(check_db "$last" "$k")
    [ $((k % 10)) -ne 0 ] || step "kill $k of $KILLS: last committed round $last, store ok"
    "$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
    started() { [ "$(grep -c "event=started" "$t/coord.log")" -gt "$k" ]; }
    wait_for 10 started || fail "coordinator did not restart after kill $k"
done
step "$KILLS kills survived ($midjob before the job's end; last committed round $last); the job runs to its end"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 120 finished || fail "the job did not finish"
sflctl_config
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 20 --local-steps 2 --lr 0.1 --batch 50 \
    --rounds $ROUNDS --quiet --model-out "$t/sim.model" > /dev/null
same_model "$t/net.model" "$t/sim.model"
# The agents rejoined the restarted coordinators by TLS resumption: the
# ticket keys are in state_dir, so a ticket outlives the process that
# issued it (docs/security.md, "Session resumption").
for i in 0 1; do
    grep -q "event=joined agent_id=[0-9]* .*resumed=1" "$t/agent-$i.log" ||
        fail "agent-$i never rejoined by resuming its TLS session"
done
echo "PASS: $KILLS kills -9 of the coordinator at random points; store intact, rounds never" \
    "back nor twice; final model equals sfl-sim's"
