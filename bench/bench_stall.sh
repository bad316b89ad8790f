#!/bin/sh
# The coordinator's event-loop lag while big checkpoints commit (issue 11,
# item 2): job "big" (FedAvg, d = DIM, default 1e6; a dense 9 MB checkpoint
# committed each round) runs beside job "small" (d = 50, rounds back to
# back), whose round openings, participation and commits queue behind big's
# commits on the store's writer thread while the loop goes on. Prints the coordinator's own figures
# from /metrics: sfl_loop_lag_max_seconds (the longest a scheduler tick was
# late) and the sfl_loop_lag_seconds histogram, beside
# sfl_aggregation_seconds, the writer's sfl_store_write_seconds and the
# size of big's last checkpoint. Run by
# make bench; DIM=... ROUNDS=... override.
set -eu
B=${1:-build}
DIM=${DIM:-1000000}
ROUNDS=${ROUNDS:-8}
SFL_BIN=$B
export SFL_BIN
. tests/e2e/lib.sh
pki_federation agent-0 agent-1 agent-2 agent-3
mkdir -p "$t/big" "$t/small" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients 2 --samples 20 --dim "$DIM" --support 50 --seed 1 \
    --dump-shards "$t/big" > /dev/null
"$BIN/sfl-sim" --data synth:sparse --clients 2 --samples 20 --dim 50 --support 3 --seed 2 \
    --dump-shards "$t/small" > /dev/null
mport=$(pick_port)
{ coordinator_section "127.0.0.1:0" "127.0.0.1:$mport"; fast_rounds; cat <<EOT

[job big]
algo = fedavg
features = $DIM
local_steps = 1
lr = 0.001
batch = 20
rounds = $ROUNDS
max_update_norm = 1e30
cohort = 2
min_quorum = 2
deadline_ms = 600000
seed = 1
conditions = big

[job small]
algo = fediterht
features = 50
tau = 3
local_steps = 2
lr = 0.1
batch = 20
rounds = 100000
cohort = 2
min_quorum = 2
seed = 2
conditions = small
EOT
} > "$t/coordinator.ini"
start_coordinator_any_port
agent() { # i shard-dir condition
    "$BIN/sfl-agent" --coordinator "127.0.0.1:$port" --server_name 127.0.0.1 \
        --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-$1.crt" --key "$t/pki/agent/agent-$1.key" \
        --coordinator_pk "$PK" --data "libsvm:$2/client-$(( $1 % 2 )).svm" \
        --conditions "$3" \
        --state_dir "$t/agent-$1" >> "$t/agent-$1.log" 2>&1 &
    pids="$pids $!"
}
agent 0 "$t/big" big
agent 1 "$t/big" big
agent 2 "$t/small" small
agent 3 "$t/small" small
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 120 finished || fail "job big did not finish"
curl -s "http://127.0.0.1:$mport/metrics" > "$t/metrics.txt" 2>/dev/null ||
    /usr/bin/python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())" > "$t/metrics.txt"
small=$(grep -c "event=round_committed job=2 " "$t/coord.log" || true)
ckpt=$(/usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT length(model) FROM checkpoints WHERE job_id = 1 ORDER BY round DESC LIMIT 1').fetchone()[0])" "$t/state/coordinator.db")
echo "bench_stall dim=$DIM rounds=$ROUNDS small_rounds=$small checkpoint_bytes=$ckpt" \
    "$(grep '^sfl_loop_lag_max_seconds ' "$t/metrics.txt")" \
    "aggregation_sum_s=$(sed -n 's/^sfl_aggregation_seconds_sum //p' "$t/metrics.txt")" \
    "aggregation_count=$(sed -n 's/^sfl_aggregation_seconds_count //p' "$t/metrics.txt")" \
    "store_write_sum_s=$(sed -n 's/^sfl_store_write_seconds_sum //p' "$t/metrics.txt")" \
    "store_write_count=$(sed -n 's/^sfl_store_write_seconds_count //p' "$t/metrics.txt")"
grep '^sfl_loop_lag_seconds_bucket' "$t/metrics.txt" | sed 's/^/  /'
