#!/bin/sh
# Lossy update encodings end to end, across a coordinator restart: for a
# job with encoding = f32 and one with q8, a coordinator and 2 agents run
# to the end, the coordinator killed with SIGKILL mid-job and restarted;
# the exported model equals sfl-sim's with the same --encoding bit for bit
# (full batches, ordered aggregation). Checkpoints are float64 whatever the
# encoding, so the restart resumes from exactly the model it had; a lossy
# checkpoint would re-quantize the model and the two would differ.
# Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh

pki_federation agent-0 agent-1
mkdir -p "$t/data"
SIMDATA="--data synth:sparse --clients 2 --samples 50 --dim 60 --support 4 --seed 11"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
ROUNDS=200
AGENT_BACKOFF_MAX_MS=1000

run_job() { # encoding
    enc=$1
    port=$(pick_port)
    rm -rf "$t/state" "$t"/agent-*
    mkdir -p "$t/state"
    : > "$t/coord.log"
    { coordinator_section "127.0.0.1:$port" off; fast_rounds; cat <<EOF2

[job $enc]
algo = fediterht
features = 60
tau = 4
local_steps = 2
lr = 0.1
batch = 50
rounds = $ROUNDS
cohort = 2
overselect = 0
min_quorum = 2
deadline_ms = 20000
seed = 11
encoding = $enc
aggregation = ordered
EOF2
    } > "$t/coordinator.ini"
    PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
    "$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
    for i in 0 1; do
        start_agent $i
        wait_for 20 joined $((i + 1)) || fail "$enc: agent-$i did not join"
    done
    wait_for 60 at_least 10 || fail "$enc: no 10 committed rounds"
    kill -9 "$coord"
    wait "$coord" 2> /dev/null || true # its lock is gone before the restart takes it
    before=$(committed)
    "$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
    wait_for 120 finished || fail "$enc: the job did not finish after the restart"
    [ "$before" -lt "$ROUNDS" ] || fail "$enc: the job finished before the kill; make it longer"
    grep -q "event=state_loaded" "$t/coord.log" || fail "$enc: restart did not load state"
    sflctl_config
    $CTL model export 1 "$t/net-$enc.model" > "$t/export.log" 2>&1 ||
        fail "$enc: sflctl model export: $(cat "$t/export.log")"
    # shellcheck disable=SC2086
    "$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 4 --local-steps 2 --lr 0.1 --batch 50 \
        --rounds $ROUNDS --encoding "$enc" --quiet --model-out "$t/sim-$enc.model" > /dev/null
    same_model "$t/net-$enc.model" "$t/sim-$enc.model"
    kill -9 "$coord" 2>/dev/null || true
    # shellcheck disable=SC2154
    kill -9 "$agent_0" "$agent_1" 2>/dev/null || true
    echo "$enc: killed after $before of $ROUNDS rounds, model equals sfl-sim's"
}
committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
at_least() { [ "$(committed)" -ge "$1" ]; }
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }

for enc in f32 q8; do
    step "encoding $enc: a job to the end across a coordinator kill -9, equal to sfl-sim's"
    run_job "$enc"
done
echo "encodings e2e: ok"
