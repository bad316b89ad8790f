#!/bin/sh
# Update mode 2 (secure aggregation) across real processes: a coordinator
# and N agents over mutual TLS run FedIter-HT with secure_aggregation = 1.
# Every round goes through the five stages (keys, shares, masked inputs,
# consistency, unmasking) and commits the unmasked mean, while three agents
# die (SIGKILL, secagg_test_stop) in the first round they take part in, each
# at a different stage: after their keys (no shares: left out), after their
# shares (their pairwise masks are rebuilt from the others' shares of their
# r_s) and after the consistency check (their input counts; they release no
# shares). A fourth agent is killed mid-job and restarted: the last round
# it took and its residual come back from its state file. The masks and
# shares run over a Harary graph of degree 16 (SECAGG_DEGREE; 0 the
# complete graph): each agent masks with and shares to 16 of the others.
# The rounds commit with the others and the model finds the problem's
# support. Then the same FedAvg job runs in mode 1 and in mode 2 on the live
# agents, and the two models agree within mode 2's quantization. Bounded:
# every wait has a timeout.
set -eu
. tests/e2e/lib.sh

N=${SECAGG_AGENTS:-20}
ROUNDS=12
port=$(pick_port)
mport=$((port + 1))
names=""
i=0
while [ $i -lt $N ]; do names="$names agent-$i"; i=$((i + 1)); done
# shellcheck disable=SC2086
pki_federation $names
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients $N --samples 80 --dim 100 --support 5 --seed 7"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data" > /dev/null

step "sfl-sim: the same job in one process with --secagg"
# S_t is every coordinate (support and top-k of the dimension): the network
# job below is checked for the protocol; what a smaller S_t costs is
# sfl-sim's to measure (docs/algorithms.md)
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 5 --local-steps 3 --lr 0.1 --batch 80 \
    --rounds $ROUNDS --quiet --no-wall-clock --secagg --sa-clip 100 --sa-support 100 \
    --sa-topk 100 > "$t/sim.csv" || fail "sfl-sim --secagg"

step "a coordinator and $N agents: every round through the five stages"
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; fast_rounds
  echo "heartbeat_interval_ms = 300"; } > "$t/coordinator.ini"
# the job is created once all agents joined: round 1 then selects every
# one of them (the three that drop out too), whatever the machine's speed
cat > "$t/sa.ini" <<EOF2
[job sa]
algo = fediterht
features = 100
tau = 5
local_steps = 3
lr = 0.1
batch = 80
rounds = $ROUNDS
cohort = $N
overselect = 0
min_quorum = $((N / 2 + 1))
deadline_ms = 20000
heartbeat_ms = 2000
seed = 7
secure_aggregation = 1
secagg_support = 100
secagg_topk = 100
secagg_clip = 100
# every agent holds 80 rows: weights at full scale (the default cap of
# 10,000 would quantize them at 80 / 10,000 of it)
secagg_max_weight = 80
secagg_degree = ${SECAGG_DEGREE:-16}
EOF2
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --check > "$t/check.log" 2>&1 ||
    fail "coordinator --check: $(cat "$t/check.log")"
start_coordinator
sflctl_config
# agents 1, 2, 3 die when they would answer stage 2, 3 and 5
i=0
while [ $i -lt $N ]; do
    case $i in
    1) start_agent $i --secagg_test_stop 2 ;;
    2) start_agent $i --secagg_test_stop 3 ;;
    3) start_agent $i --secagg_test_stop 5 ;;
    0 | 4) start_agent $i --log_level debug ;; # their secagg_round lines are read
    *) start_agent $i ;;
    esac
    i=$((i + 1))
done
joined() { [ "$($CTL agents 2>/dev/null | grep -c ' yes ')" -ge "$1" ]; }
wait_for 60 joined $N || fail "the agents did not join: $($CTL agents 2>&1)"
$CTL job create "$t/sa.ini" > "$t/create-sa.log" 2>&1 || fail "job create: $(cat "$t/create-sa.log")"
grep -q "^job 1 " "$t/create-sa.log" || fail "not job 1: $(cat "$t/create-sa.log")"
committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
at_least() { [ "$(committed)" -ge "$1" ]; }
wait_for 60 at_least 2 || fail "no 2 committed rounds: $($CTL jobs 2>&1)"
for i in 1 2 3; do
    grep -q "event=secagg_test_stop" "$t/agent-$i.log" || fail "agent-$i did not drop out"
done
grep -q "event=secagg_round .*degree=${SECAGG_DEGREE:-16}" "$t/agent-0.log" ||
    fail "agent-0 took no round of degree ${SECAGG_DEGREE:-16}"

step "an agent killed mid-job and restarted: the rounds go on, its state survived"
# shellcheck disable=SC2154
kill -9 "$agent_4"
taken() { sed -n 's/.*event=secagg_round job=1 round=\([0-9]*\) .*/\1/p' "$t/agent-4.log" | tail -1; }
last=$(taken)
[ -n "$last" ] || fail "agent-4 took no round before it was killed"
# the last round taken and the residual (d = 100): 32 + 8 x 100 bytes
st="$t/agent-4/secagg-1.state"
[ "$(wc -c < "$st")" -eq 832 ] || fail "agent-4's state is $(wc -c < "$st") bytes"
[ "$(od -An -t u8 -j 16 -N 8 "$st" | tr -d ' ')" = "$last" ] || fail "agent-4's state: not round $last"
start_agent 4 --log_level debug # its secagg_round lines are read
after() { [ "$(taken)" -gt "$last" ]; }
wait_for 60 after || fail "the restarted agent-4 took no round after $last"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 180 finished || fail "the job did not finish: $($CTL jobs 2>&1)"
grep -q "event=round_committed job=1 round=$ROUNDS " "$t/coord.log" || fail "round $ROUNDS"
grep -q "event=update " "$t/coord.log" && fail "a mode-1 update in a mode-2 job"
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 || fail "export: $(cat "$t/export.log")"

step "the model found the support of the problem's truth"
top() { grep -v '^#' "$1" | awk '{ v = $2 < 0 ? -$2 : $2; print v, $1 }' | sort -gr |
        head -5 | awk '{ print $2 }' | sort -n | tr '\n' ' '; }
[ "$(top "$t/net.model")" = "$(top "$t/data/truth")" ] ||
    fail "support: network $(top "$t/net.model"), truth $(top "$t/data/truth")"
step "the same FedAvg job in mode 1 and in mode 2 on the 17 live agents: the models agree within the quantization"
# Every live agent in both cohorts, full-batch local steps: the two jobs
# differ only by mode 2's quantization (clip 100, n_max = 17: a step of
# 100 / 2^26 = 1.5e-6 per value and round) and its stochastic rounding.
live=$((N - 3))
pair_job() { # $1 = name, $2 = secure_aggregation
    cat <<EOF2
[job $1]
algo = fedavg
features = 100
local_steps = 3
lr = 0.1
batch = 80
rounds = 10
cohort = $live
overselect = 0
min_quorum = $live
deadline_ms = 20000
heartbeat_ms = 2000
seed = 7
secure_aggregation = $2
secagg_support = 100
secagg_topk = 100
secagg_clip = 100
secagg_max_weight = 80
EOF2
}
run_pair_job() { # $1 = job id, $2 = name, $3 = secure_aggregation
    pair_job "$2" "$3" > "$t/$2.ini"
    $CTL job create "$t/$2.ini" > "$t/create-$2.log" 2>&1 || fail "job create $2: $(cat "$t/create-$2.log")"
    done_job() { grep -q "event=job_state job=$1 state=finished" "$t/coord.log"; }
    wait_for 120 done_job "$1" || fail "job $2 did not finish: $($CTL jobs 2>&1)"
    $CTL model export "$1" "$t/$2.model" > "$t/export-$2.log" 2>&1 || fail "export $2"
}
# /metrics' counter $1 (a full series name) at the coordinator
metric() { /usr/bin/python3 -c "import urllib.request, sys
for l in urllib.request.urlopen('http://127.0.0.1:$mport/metrics', timeout=5).read().decode().splitlines():
    if l.split(' ')[0] == sys.argv[1]: print(l.split(' ')[1])" "$1"; }
run_pair_job 2 plain 0
acc0=$(metric 'sfl_updates_total{verdict="accepted"}')
bytes0=$(metric sfl_update_bytes_total)
run_pair_job 3 masked 1
acc1=$(metric 'sfl_updates_total{verdict="accepted"}')
bytes1=$(metric sfl_update_bytes_total)
grep -q "event=update job=3 " "$t/coord.log" && fail "a mode-1 update in the mode-2 job"
# the rounds' train loss travels summed in mode 2 (the metric words): each
# round's objective as mode 1's, to the quantization
$CTL job history 2 > "$t/plain.csv" 2>&1 || fail "history 2: $(cat "$t/plain.csv")"
$CTL job history 3 > "$t/masked.csv" 2>&1 || fail "history 3: $(cat "$t/masked.csv")"
paste -d, "$t/plain.csv" "$t/masked.csv" | awk -F, -v n="$(head -1 "$t/plain.csv" | awk -F, '{ print NF }')" '
    NR > 1 { a = $2; b = $(n + 2); e = a - b; if (e < 0) e = -e
             if (b == "" || !(a > 0) || e > 1e-4 * a) { print "round " $1 ": " a " vs " b; bad = 1 }; rows++ }
    END { exit bad || rows != 10 }' > "$t/loss-cmp.txt" ||
    fail "mode 2's train loss is not mode 1's: $(cat "$t/loss-cmp.txt")"
# the history of a mode-2 round fills what mode 1's does (issue 24 item 7):
# every live member contributed (accepted), the bytes of its stage answers
# (bytes_up), the stages and task sent (bytes_down), the model's nnz; and
# /metrics' accepted updates and their bytes moved by the history's sums
awk -F, -v live="$live" 'NR > 1 { if ($9 != live || $10 != live || !($7 > 0) || !($8 > 0) ||
                                     $6 !~ /^[0-9]+$/ || $5 !~ /^[0-9]+$/) { print; bad = 1 }
                                 acc += $9; up += $7 }
    END { print acc, up; exit bad }' "$t/masked.csv" > "$t/masked-sums.txt" ||
    fail "mode 2's history: $(cat "$t/masked-sums.txt")"
# shellcheck disable=SC2046
set -- $(tail -1 "$t/masked-sums.txt")
[ "$((acc1 - acc0))" -eq "$1" ] && [ "$((bytes1 - bytes0))" -eq "$2" ] ||
    fail "/metrics: $((acc1 - acc0)) accepted updates of $((bytes1 - bytes0)) bytes, history $1 of $2"
cmp=$(/usr/bin/python3 - "$t" <<'EOF2'
import glob, sys
t = sys.argv[1]
def model(path):
    w = {}
    for line in open(path):
        if not line.startswith('#') and line.strip():
            i, v = line.split()
            w[int(i)] = float(v)
    return w
def objective(w):
    s = n = 0
    for f in glob.glob(t + '/data/client-*.svm'):
        for line in open(f):
            parts = line.split()
            y = float(parts[0])
            p = sum(float(v) * w.get(int(i), 0.0) for i, v in (x.split(':') for x in parts[1:]))
            s += 0.5 * (y - p) ** 2
            n += 1
    return s / n
a, b = model(t + '/plain.model'), model(t + '/masked.model')
diff = max(abs(a.get(i, 0.0) - b.get(i, 0.0)) for i in set(a) | set(b))
print('%.9g %.9g %.3g' % (objective(a), objective(b), diff))
EOF2
) || fail "comparing the two models"
# shellcheck disable=SC2086
set -- $cmp
echo "mode 1 objective $1, mode 2 objective $2, max |w1 - w2| $3"
awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { e = a - b; if (e < 0) e = -e; exit !(d < 1e-4 && e <= 1e-4 * a + 1e-9) }' ||
    fail "mode 2 is not within the quantization of mode 1: objectives $1 and $2, max |w1 - w2| $3"

step "standardize with secure aggregation: the statistics round through mode 2, then training"
# Every live agent's moments (d = 100, 201 values) go through the five
# stages at the job's bound B (every synthetic value is well inside 10),
# weighted by the 80 rows each declared; the stored sum is the ordered sum
# within mode 2's quantisation bound (tests/e2e/moments.py --secagg), the
# count exact; then two training rounds on the standardised rows.
cat > "$t/std.ini" <<EOF2
[job std]
algo = fedavg
features = 100
local_steps = 1
lr = 0.1
batch = 80
rounds = 2
cohort = $live
overselect = 0
min_quorum = $live
deadline_ms = 20000
heartbeat_ms = 2000
seed = 7
secure_aggregation = 1
secagg_support = 100
secagg_topk = 100
secagg_max_weight = 80
standardize = 1
standardize_bound = 10
EOF2
$CTL job create "$t/std.ini" > "$t/create-std.log" 2>&1 || fail "job create std: $(cat "$t/create-std.log")"
done_std() { grep -q "event=job_state job=4 state=finished" "$t/coord.log"; }
wait_for 120 done_std || fail "the standardize job did not finish: $($CTL jobs 2>&1)"
grep -q "event=statistics_committed job=4 .* agents=$live rows=$((live * 80)) features=100 " "$t/coord.log" ||
    fail "statistics: $(grep "statistics_committed job=4" "$t/coord.log")"
grep -q "event=update job=4 " "$t/coord.log" && fail "a mode-1 update in the mode-2 standardize job"
grep -q "event=round_committed job=4 round=2 " "$t/coord.log" || fail "standardize job: no round 2"
$CTL model export 4 "$t/std.model" > "$t/export-std.log" 2>&1 || fail "export std: $(cat "$t/export-std.log")"
files=""
for i in $(seq 0 $((N - 1))); do
    case $i in 1 | 2 | 3) ;; *) files="$files $t/data/client-$i.svm" ;; esac
done
# shellcheck disable=SC2086
/usr/bin/python3 "$ROOT/tests/e2e/moments.py" --secagg "$live" 80 10 100 "$t/std.model.moments" \
    $files > "$t/std-moments.txt" 2>&1 || fail "moments: $(cat "$t/std-moments.txt")"
cat "$t/std-moments.txt"

echo "secagg e2e: ok ($N agents, 3 dead at stages 2, 3 and 5 of their first round, one killed and restarted; support $(top "$t/net.model"); mode 1 / mode 2 objectives $1 / $2)"
