#!/bin/sh
# A vertical job (DP-BCFW, seed 003) whose parties all connect through a
# front-end (docs/operations.md "Front-ends": SubmitStep relayed): a master
# (role single, SQLite), one front-end, 4 agents each holding a column block
# of the same 100 samples. The job (noise off) finishes and its exported
# model equals sfl-sim's bit for bit, as tests/e2e/vertical.sh checks it for
# agents connected to the coordinator. Every Join came through the
# front-end. About 5 s.
set -eu
. tests/e2e/lib.sh

N=100
D=30
K=4
S=10     # iterations per round
ROUNDS=3 # T = 30 iterations
SIMDATA="--data synth:dpbcfw --samples $N --dim $D --density 0.3 --partition features:$K --seed 7"

step "sfl-sim: the job in one process; the column blocks"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo dpbcfw --eta 2 --m 20 --epsilon 1 --dp-noise 0 --select 0 \
    --rounds $((ROUNDS * S)) --quiet --no-wall-clock --model-out "$t/sim.model" \
    > "$t/sim.csv" 2> "$t/sim.err" || fail "sfl-sim dpbcfw: $(cat "$t/sim.err")"
mkdir -p "$t/data" "$t/state"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --test-frac 0 --dump-shards "$t/data" || fail "dump shards"
block() { awk -v k="$1" '$1 == k { print $2 + 1 ":" $3 }' "$t/data/blocks"; }

step "a master, a front-end, 4 block holders through the front-end"
pki_federation agent-0 agent-1 agent-2 agent-3
"$PKI" frontend "$t/pki" fe0 > /dev/null
mport=$(pick_port)
{ coordinator_section "127.0.0.1:$mport" off; fast_rounds; cat <<EOF2

[job vertical]
algo = dpbcfw
loss = lsq
features = $D
rows = $N
eta = 2
m = 20
epsilon = 1
dp_noise = 0
select = 0
rounds = $ROUNDS
iterations_per_round = $S
cohort = $K
overselect = 0
min_quorum = $K
deadline_ms = 20000
seed = 7
EOF2
} > "$t/coordinator.ini"
start_coordinator
sflctl_config
printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s\nlisten = 127.0.0.1:0\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = off\n' \
    "$mport" "$t/pki/frontend/fe0.crt" "$t/pki/frontend/fe0.key" "$t/pki/ca.crt" "$t/fe0" \
    > "$t/fe0.ini"
"$BIN/sfl-coordinator" --config "$t/fe0.ini" >> "$t/fe0.log" 2>&1 &
pids="$pids $!"
wait_for 10 grep -q "event=started role=frontend" "$t/fe0.log" || fail "the front-end did not start"
wait_for 10 grep -q "event=master_open" "$t/fe0.log" || fail "the front-end did not reach the master"
# the agents dial the front-end (start_agent's $port)
port=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe0.log" | tail -1)
for i in 0 1 2 3; do
    start_agent "$i" --data "libsvm:$t/data/client-$i.svm" --block "$(block "$i")" \
        --ids_file "$t/data/client-$i.ids"
done
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 60 finished || fail "the vertical job did not finish: $($CTL jobs 2>&1)"
n=$(grep -c "event=join " "$t/coord.log")
[ "$n" -ge $K ] || fail "$n joins"
grep "event=join " "$t/coord.log" | grep -vq "addr=127.0.0.1:[0-9]*/[0-9]" &&
    fail "a join did not come through the front-end: $(grep "event=join " "$t/coord.log")"

step "the exported model equals sfl-sim's bit for bit"
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
same_model "$t/net.model" "$t/sim.model"
echo "PASS: a vertical job of $K block holders through a front-end equals sfl-sim's"
