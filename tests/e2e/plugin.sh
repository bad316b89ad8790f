#!/bin/sh
# An algorithm added as a plug-in runs everywhere with no other file
# changed: tests/e2e/toy_algo.c (one file: a parameter table with a
# parameter no built-in algorithm has, a client state, the personalized
# shape) is built in with `make EXTRA_ALGOS=tests/e2e/toy_algo.c` (into
# BIN/extra), then
#   - sfl-sim lists it, takes --pull, checks it, and writes the
#     personalized column;
#   - a coordinator and 3 agents over mutual TLS run a toy-personal job
#     (pull from the job file) to the end, one agent killed with SIGKILL
#     mid-job and restarted: each agent keeps its personal model in its
#     state directory (0600), reloads it after the restart, and the final
#     global model equals sfl-sim's bit for bit (ordered aggregation, f64),
#     which it could not if any client state were lost or advanced twice
#     (full batches: sfl-sim numbers clients from 0, agents from 1, so
#     minibatch draws would differ).
# Bounded: every wait has a timeout.
set -eu
BASE=${SFL_BIN:-build}
SFL_BIN=$BASE/extra
. tests/e2e/lib.sh

step "build with EXTRA_ALGOS=tests/e2e/toy_algo.c into $BIN"
if [ "$BASE" = build ]; then
    make --no-print-directory -j"$(($(nproc) + 1))" EXTRA_ALGOS=tests/e2e/toy_algo.c all > "$t/build.log" 2>&1 ||
        fail "the plug-in build failed: $(tail -5 "$t/build.log")"
else
    make --no-print-directory -j"$(($(nproc) + 1))" BUILD="$BASE" EXTRA_ALGOS=tests/e2e/toy_algo.c all \
        > "$t/build.log" 2>&1 || fail "the plug-in build failed: $(tail -5 "$t/build.log")"
fi
git diff --quiet HEAD -- libsfl sim server client-agent proto Makefile 2>/dev/null ||
    echo "note: the tree has local changes (the plug-in needs none)"

step "sfl-sim: listed, --pull checked, the personalized column"
"$BIN/sfl-sim" --help | grep -q "toy-personal .*test plug-in" || fail "not in --help"
"$BIN/sfl-sim" --list-params | grep -q '^| `pull` | mu_p | real | 0.5 |' || fail "not in --list-params"
rc=0
"$BIN/sfl-sim" --algo toy-personal --data synth:sparse --pull -1 > /dev/null 2> "$t/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "pull: must be >= 0, got -1" "$t/err" || fail "--pull -1: exit $rc: $(cat "$t/err")"
SIMDATA="--data synth:sparse --clients 3 --samples 60 --dim 50 --support 5 --seed 7"
PARAMS="--lr 0.05 --local-steps 3 --batch 60 --pull 0.3"
ROUNDS=300
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo toy-personal $PARAMS --rounds $ROUNDS --quiet \
    --no-wall-clock --model-out "$t/sim.model" > "$t/sim.csv" || fail "sfl-sim toy-personal"
head -1 "$t/sim.csv" | grep -q ",personal_objective,nnz," || fail "header: $(head -1 "$t/sim.csv")"
[ "$(wc -l < "$t/sim.csv")" -eq $((ROUNDS + 1)) ] || fail "rows: $(wc -l < "$t/sim.csv")"
# The personal models fit their own data better than the global one.
# (columns: round, objective, rel_error, support_precision, support_recall,
# personal_objective, ...)
awk -F, 'NR > 1 { last = $6 < $2 } END { exit !last }' "$t/sim.csv" ||
    fail "personal objective not below the global one: $(tail -1 "$t/sim.csv")"
# The plain build does not know it.
rc=0
"$BASE/sfl-sim" --algo toy-personal > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "the plain build ran toy-personal"

step "network: a coordinator and 3 agents run a toy-personal job"
port=$(pick_port)
pki_federation agent-0 agent-1 agent-2
mkdir -p "$t/data" "$t/state"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
{ coordinator_section "127.0.0.1:$port" off; fast_rounds; cat <<EOF2

[job toy]
algo = toy-personal
features = 50
lr = 0.05
local_steps = 3
batch = 60
pull = 0.3
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
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
pids="$pids $!"
committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
at_least() { [ "$(committed)" -ge "$1" ]; }
# One at a time, so agent ids 1..3 follow shards 0..2 as sfl-sim's clients.
for i in 0 1 2; do
    start_agent $i
    wait_for 20 joined $((i + 1)) || fail "agent-$i did not join"
done
wait_for 60 at_least 4 || fail "no 4 committed rounds"

step "kill -9 agent-1 mid-job and restart it: its client state survives"
# shellcheck disable=SC2154
kill -9 "$agent_1"
before=$(committed)
[ -f "$t/agent-1/client-state-1.bin" ] || [ -f "$t/agent-1/client-state-1.pending" ] ||
    fail "agent-1 kept no client state: $(ls -la "$t/agent-1")"
for f in "$t"/agent-1/client-state-1.*; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f is not 0600"
done
start_agent 1
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 120 finished || fail "the job did not finish ($(committed) commits logged)"
[ "$before" -lt "$ROUNDS" ] || fail "the job finished before the kill; make it longer"
grep -q "fresh state" "$t/agent-1.log" && fail "agent-1 started from a fresh state after the restart"
grep -q "event=client_state" "$t"/agent-*.log && fail "a client state error: $(grep client_state "$t"/agent-*.log)"

step "the network's model equals sfl-sim's bit for bit"
sflctl_config
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
same_model "$t/net.model" "$t/sim.model"
echo "plugin e2e: ok (agent-1 killed after $before of $ROUNDS rounds)"
