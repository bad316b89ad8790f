#!/bin/sh
# Front-ends (docs/operations.md "Front-ends"), forward mode, with real
# processes over mutual TLS on loopback: one master (role single, SQLite),
# three front-ends (role frontend) and six unmodified agents, two on each
# front-end. An ordered FedIter-HT job's final model equals sfl-sim's on the
# same shards bit for bit - which a single coordinator's does too
# (federation.sh) - so relaying changes nothing. One front-end is killed
# with SIGKILL mid-job; its agents reconnect to a new front-end on its
# address (as behind an L4 balancer), the master sees them move, the job
# finishes, and every round folded each agent's update exactly once (the
# participation rows, and the model). About 25 s on an idle machine.
set -eu
. tests/e2e/lib.sh

pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5
for f in 0 1 2 3; do "$PKI" frontend "$t/pki" "fe$f" > /dev/null; done

step "start: 6 shards (d = 200, 5-sparse), a master, 3 front-ends, 6 agents"
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients 6 --samples 40 --dim 200 --support 5 --seed 11"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
ROUNDS=40
{ coordinator_section "127.0.0.1:0" off; fast_rounds; cat <<EOF2

[job lsq]
algo = fediterht
features = 200
tau = 5
local_steps = 3
lr = 0.1
batch = 40
rounds = $ROUNDS
cohort = 6
overselect = 0
min_quorum = 6
deadline_ms = 30000
seed = 11
aggregation = ordered
EOF2
} > "$t/coordinator.ini"
start_coordinator_any_port
mport=$port

# Front-end $1 listening on $2 (0: any port); its port in fe_port.
start_fe() {
    printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s\nlisten = 127.0.0.1:%s\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nlog_level = debug\n' \
        "$mport" "$2" "$t/pki/frontend/fe$1.crt" "$t/pki/frontend/fe$1.key" "$t/pki/ca.crt" \
        "$t/fe$1" > "$t/fe$1.ini"
    "$BIN/sfl-coordinator" --config "$t/fe$1.ini" >> "$t/fe$1.log" 2>&1 &
    eval "fe_$1=$!"
    pids="$pids $!"
    wait_for 10 grep -q "event=started role=frontend" "$t/fe$1.log" || fail "front-end $1 did not start"
    fe_port=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$1.log" | tail -1)
    wait_for 10 grep -q "event=master_open" "$t/fe$1.log" || fail "front-end $1 did not reach the master"
}
start_fe 0 0; p0=$fe_port
start_fe 1 0; p1=$fe_port
start_fe 2 0; p2=$fe_port
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
# One at a time, so that agent ids 1..6 follow shards 0..5 as sfl-sim's
# clients do (ordered aggregation folds by agent id).
for i in 0 1 2 3 4 5; do
    case $i in 0|1) port=$p0 ;; 2|3) port=$p1 ;; *) port=$p2 ;; esac
    start_agent $i
    wait_for 20 joined $((i + 1)) || fail "agent-$i did not join through its front-end"
done
# Every join went through a front-end: the master saw no agent connection.
grep "event=join " "$t/coord.log" | grep -vq "addr=127.0.0.1:[0-9]*/[0-9]" &&
    fail "a join did not come through a front-end: $(grep "event=join " "$t/coord.log")"

committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
at_least() { [ "$(committed)" -ge "$1" ]; }
wait_for 30 at_least 5 || fail "no 5 committed rounds"

step "kill -9 front-end 1 mid-job; a new front-end takes its address"
kill -9 "$fe_1"
wait "$fe_1" 2> /dev/null || true
before=$(committed)
start_fe 3 "$p1"
# Both join again through the new front-end (the master's join lines
# name the front-end's address and the agent's connection number there).
moved() { [ "$(grep -c "event=join " "$t/coord.log")" -ge 8 ]; }
wait_for 20 moved || fail "the killed front-end's agents did not reconnect"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 60 finished || fail "job did not finish ($(committed) commits logged)"
[ "$before" -lt "$ROUNDS" ] || fail "the job finished before the kill; make it longer"

step "every round folded each agent once; the model equals sfl-sim's bit for bit"
sflctl_config
# shellcheck disable=SC2016
bad=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT round, count(*), count(DISTINCT agent_id) FROM participation
     WHERE job_id = 1 AND status = 'accepted' GROUP BY round
     HAVING count(*) != 6 OR count(DISTINCT agent_id) != 6;")
[ -z "$bad" ] || fail "rounds with other than 6 accepted updates (round|rows|agents): $bad"
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(DISTINCT round) FROM participation WHERE job_id = 1 AND status = 'accepted';")
[ "$n" -eq "$ROUNDS" ] || fail "$n rounds with accepted updates, want $ROUNDS"
$CTL model export 1 "$t/net.model" > "$t/ctl.log" 2>&1 || fail "sflctl model export: $(cat "$t/ctl.log")"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 5 --local-steps 3 --lr 0.1 --batch 40 \
    --rounds $ROUNDS --quiet --model-out "$t/sim.model" > /dev/null
same_model "$t/net.model" "$t/sim.model"
echo "front-ends: 6 agents over 3 front-ends, front-end 1 killed after $before of $ROUNDS rounds: ok"
