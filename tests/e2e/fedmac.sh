#!/bin/sh
# FedMac (seed 002) across real processes: a coordinator and 3 agents over
# mutual TLS run a FedMac job with the MLP loss on FedProx's synthetic data
# (the paper's Synthetic setting, shrunk), each agent evaluating on its own
# test part:
#   - each agent keeps its personalized model theta_i in its state
#     directory (0600); one agent is killed with SIGKILL mid-job and
#     restarted, and reloads it (no fresh state);
#   - the exported global model equals sfl-sim's for the same shards and
#     seed bit for bit (ordered aggregation, f64; full batches, since
#     sfl-sim numbers clients from 0 and agents from 1);
#   - both accuracies are reported per round (the coordinator's log,
#     sflctl job history and jobs): the personalized one is the agents'
#     own models on their own test parts, and equals sfl-sim's;
#   - sfl-sim reports both accuracies, and both learn (the personalized
#     advantage is measured on the paper's settings by make reproduce).
# Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh

SIMDATA="--data synth:fedprox --clients 3 --test-frac 0.25 --seed 7"
PARAMS="--loss mlp:5 --batch 100000 --local-steps 3 --eta 3000 --eta-p 0.05 --lambda 0.0001"
ROUNDS=120

step "sfl-sim: FedMac with an MLP, both accuracies"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fedmac $PARAMS --rounds $ROUNDS --quiet --no-wall-clock \
    --model-out "$t/sim.model" > "$t/sim.csv" || fail "sfl-sim fedmac"
head -1 "$t/sim.csv" | grep -q ",test_accuracy,personal_objective,personal_accuracy,nnz," ||
    fail "header: $(head -1 "$t/sim.csv")"
# columns: round, objective, test_accuracy, personal_objective, personal_accuracy
awk -F, 'END { exit !($3 > 0.5 && $5 > 0.5 && $5 <= 1) }' "$t/sim.csv" ||
    fail "accuracies (global, personalized) did not rise above 0.5: $(tail -1 "$t/sim.csv")"

step "network: a coordinator and 3 agents run the FedMac job"
pki_federation agent-0 agent-1 agent-2
mkdir -p "$t/data" "$t/state"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
[ -f "$t/data/client-2.test.svm" ] || fail "no test part dumped: $(ls "$t/data")"
{ coordinator_section "127.0.0.1:0" off; fast_rounds; cat <<EOF2

[job mac]
algo = fedmac
loss = mlp:5
features = 60
labels = 0,1,2,3,4,5,6,7,8,9
batch = 100000
local_steps = 3
eta = 3000
eta_p = 0.05
lambda = 0.0001
rounds = $ROUNDS
cohort = 3
overselect = 0
min_quorum = 3
deadline_ms = 20000
seed = 7
aggregation = ordered
EOF2
} > "$t/coordinator.ini"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --check > "$t/check.log" 2>&1 ||
    fail "coordinator --check: $(cat "$t/check.log")"
start_coordinator_any_port
committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
at_least() { [ "$(committed)" -ge "$1" ]; }
# One at a time, so agent ids 1..3 follow shards 0..2 as sfl-sim's clients.
for i in 0 1 2; do
    start_agent $i --eval_file "libsvm:$t/data/client-$i.test.svm"
    wait_for 20 joined $((i + 1)) || fail "agent-$i did not join"
done
wait_for 60 at_least 5 || fail "no 5 committed rounds"

step "kill -9 agent-1 mid-job and restart it: theta_1 survives"
# shellcheck disable=SC2154
kill -9 "$agent_1"
before=$(committed)
[ -f "$t/agent-1/client-state-1.bin" ] || [ -f "$t/agent-1/client-state-1.pending" ] ||
    fail "agent-1 kept no client state: $(ls -la "$t/agent-1")"
for f in "$t"/agent-1/client-state-1.*; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f is not 0600"
done
start_agent 1 --eval_file "libsvm:$t/data/client-1.test.svm"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 180 finished || fail "the job did not finish ($(committed) commits logged)"
[ "$before" -lt "$ROUNDS" ] || fail "the job finished before the kill; make it longer"
grep -q "fresh state" "$t/agent-1.log" && fail "agent-1 started from a fresh state after the restart"
grep -q "event=client_state" "$t"/agent-*.log && fail "a client state error: $(grep client_state "$t"/agent-*.log)"

step "both accuracies per round: log, sflctl job history, sflctl jobs"
grep -q "event=round_committed job=1 .*eval_accuracy=0\.[0-9]* personal_accuracy=0\.[0-9]" \
    "$t/coord.log" || fail "no accuracies reported: $(grep round_committed "$t/coord.log" | tail -1)"
sflctl_config
$CTL job history 1 > "$t/history.csv" 2> "$t/ctl.log" || fail "sflctl job history: $(cat "$t/ctl.log")"
# The last round's personalized accuracy: the agents' own models on their
# own test parts, pooled, is sfl-sim's personal_accuracy of that round
# (all 3 clients train in every round of both).
net=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "personal_accuracy") c = i; next }
               { v = $c } END { print v }' "$t/history.csv")
sim=$(tail -1 "$t/sim.csv" | cut -d, -f5)
awk -v a="$net" -v b="$sim" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-6 && d > -1e-6) }' ||
    fail "personalized accuracy: network '$net', sfl-sim '$sim'"
$CTL jobs > "$t/jobs.txt" 2> "$t/ctl.log" || fail "sflctl jobs: $(cat "$t/ctl.log")"
grep -q "accuracy 0\.[0-9]*, pacc 0\.[0-9]* (" "$t/jobs.txt" || fail "sflctl jobs: $(cat "$t/jobs.txt")"

step "the network's global model equals sfl-sim's bit for bit"
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
same_model "$t/net.model" "$t/sim.model"
echo "fedmac e2e: ok (agent-1 killed after $before of $ROUNDS rounds; sim: $(tail -1 "$t/sim.csv" | cut -d, -f3,5) global,personal accuracy)"
