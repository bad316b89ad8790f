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
# participation rows, and the model). Then the master is killed with
# SIGKILL and restarted: the front-ends reconnect, the agents go on through
# them, and the job finishes from its last committed round. A front-end's
# /metrics is scraped after the joins and at the end: its counters move.
# About 6 s.
set -eu
. tests/e2e/lib.sh

pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5
for f in 0 1 2 3; do "$PKI" frontend "$t/pki" "fe$f" > /dev/null; done

step "start: 6 shards (d = 200, 5-sparse), a master, 3 front-ends, 6 agents"
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients 6 --samples 40 --dim 200 --support 5 --seed 11"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
ROUNDS=60
mport=$(pick_port)
{ coordinator_section "127.0.0.1:$mport" off; fast_rounds; cat <<EOF2

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
start_coordinator

# Front-end $1 listening on $2 (0: any port); its port in fe_port.
start_fe() {
    printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s\nlisten = 127.0.0.1:%s\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nlog_level = debug\nmetrics_listen = 127.0.0.1:0\n' \
        "$mport" "$2" "$t/pki/frontend/fe$1.crt" "$t/pki/frontend/fe$1.key" "$t/pki/ca.crt" \
        "$t/fe$1" > "$t/fe$1.ini"
    "$BIN/sfl-coordinator" --config "$t/fe$1.ini" >> "$t/fe$1.log" 2>&1 &
    eval "fe_$1=$!"
    pids="$pids $!"
    wait_for 10 grep -q "event=started role=frontend" "$t/fe$1.log" || fail "front-end $1 did not start"
    fe_port=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$1.log" | tail -1)
    wait_for 10 grep -q "event=master_open" "$t/fe$1.log" || fail "front-end $1 did not reach the master"
}
# GET front-end $1's /metrics (its port logged at the start) into
# $t/fe$1.metrics; metric F NAME gives a value from it.
fe_scrape() {
    _mp=$(sed -n 's/.*event=metrics role=frontend .*port=\([0-9]*\).*/\1/p' "$t/fe$1.log" | tail -1)
    [ -n "$_mp" ] || fail "front-end $1 logged no metrics port"
    /usr/bin/python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1],
                                        timeout=10).read().decode())' "$_mp" \
        > "$t/fe$1.metrics" || fail "GET /metrics of front-end $1"
}
metric() { awk -v k="$2" '$1 == k { print $2 }' "$t/fe$1.metrics"; }
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

# Front-end 0's /metrics: its 2 agents, the master connected, their Joins
# relayed, nothing refused.
fe_scrape 0
[ "$(metric 0 sfl_fe_agents)" = 2 ] || fail "sfl_fe_agents: $(cat "$t/fe0.metrics")"
[ "$(metric 0 sfl_fe_master_connected)" = 1 ] || fail "sfl_fe_master_connected: $(cat "$t/fe0.metrics")"
[ "$(metric 0 'sfl_fe_relayed_calls_total{method="Join"}')" -ge 2 ] ||
    fail "Joins relayed: $(cat "$t/fe0.metrics")"
[ "$(metric 0 sfl_fe_join_refused_total)" = 0 ] || fail "joins refused: $(cat "$t/fe0.metrics")"
updates0=$(metric 0 'sfl_fe_relayed_calls_total{method="SubmitUpdate"}')
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
[ "$before" -lt "$ROUNDS" ] || fail "the job finished before the kill; make it longer"

step "kill -9 the master mid-job, restart it: the front-ends reconnect, the job resumes"
kill -9 "$coord"
wait "$coord" 2> /dev/null || true
mid=$(committed)
[ "$mid" -lt "$ROUNDS" ] || fail "the job finished before the master's kill; make it longer"
start_coordinator
reopened() { for f in 0 2 3; do
    [ "$(grep -c "event=master_open" "$t/fe$f.log")" -ge 2 ] || return 1; done; }
wait_for 20 reopened || fail "the front-ends did not reach the restarted master"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 60 finished || fail "job did not finish ($(committed) commits logged)"

step "every round folded each agent once; the model equals sfl-sim's bit for bit"
sflctl_config
# shellcheck disable=SC2016
# The committed attempt of each round folded each of the 6 agents exactly
# once (an attempt the master's kill cut short was recorded, not folded).
bad=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT p.round, count(*), count(DISTINCT p.agent_id) FROM participation p
     JOIN rounds r USING (job_id, round, attempt)
     WHERE p.job_id = 1 AND p.status = 'accepted' AND r.state = 'committed' GROUP BY p.round
     HAVING count(*) != 6 OR count(DISTINCT p.agent_id) != 6;")
[ -z "$bad" ] || fail "committed rounds with other than 6 accepted updates (round|rows|agents): $bad"
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(*) FROM rounds WHERE job_id = 1 AND state = 'committed';")
[ "$n" -eq "$ROUNDS" ] || fail "$n committed rounds, want $ROUNDS"
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(*) FROM participation p JOIN rounds r USING (job_id, round, attempt)
     WHERE p.job_id = 1 AND p.status = 'accepted' AND r.state = 'committed';")
[ "$n" -eq $((6 * ROUNDS)) ] || fail "$n accepted updates in committed rounds, want $((6 * ROUNDS))"
$CTL model export 1 "$t/net.model" > "$t/ctl.log" 2>&1 || fail "sflctl model export: $(cat "$t/ctl.log")"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 5 --local-steps 3 --lr 0.1 --batch 40 \
    --rounds $ROUNDS --quiet --model-out "$t/sim.model" > /dev/null
same_model "$t/net.model" "$t/sim.model"
# The model crossed the master's link once per front-end and attempt, not
# once per agent (two agents each): the front-ends fetched it (Fleet.Model)
# at most once for each attempt opened.
opened=$(grep -c "event=round_open job=1 " "$t/coord.log")
for f in 0 2; do
    n=$(grep -c "event=model_fetched job=1 " "$t/fe$f.log" || true)
    [ "$n" -ge 1 ] && [ "$n" -le "$opened" ] ||
        fail "front-end $f fetched the model $n times for $opened attempts"
done
# Front-end 0's counters moved: both agents' updates of every round
# relayed, the models it fetched (as many as it logged) and their bytes.
fe_scrape 0
n=$(metric 0 'sfl_fe_relayed_calls_total{method="SubmitUpdate"}')
[ "$n" -ge $((2 * ROUNDS)) ] && [ "$n" -gt "$updates0" ] ||
    fail "updates relayed: $updates0 after the joins, $n at the end (want >= $((2 * ROUNDS)))"
[ "$(metric 0 'sfl_fe_relayed_calls_total{method="Subscribe"}')" -ge 2 ] ||
    fail "Subscribes relayed: $(cat "$t/fe0.metrics")"
[ "$(metric 0 sfl_fe_models_fetched_total)" = "$(grep -c "event=model_fetched " "$t/fe0.log")" ] ||
    fail "sfl_fe_models_fetched_total is not the fetches logged: $(cat "$t/fe0.metrics")"
[ "$(metric 0 sfl_fe_model_bytes_total)" -gt 0 ] || fail "no model bytes: $(cat "$t/fe0.metrics")"
[ "$(metric 0 sfl_fe_model_mismatches_total)" = 0 ] || fail "model mismatches: $(cat "$t/fe0.metrics")"
echo "front-ends: 6 agents over 3 front-ends, front-end 1 killed after $before of $ROUNDS rounds, the master after $mid: ok"
