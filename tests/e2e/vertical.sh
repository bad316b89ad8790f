#!/bin/sh
# DP-BCFW (seed 003) across real processes: 4 agents each hold a column
# block of the same 200 samples (sfl-sim --dump-shards, --partition
# features:4) and run vertical jobs with a coordinator over mutual TLS:
#   - an agent whose sample ids differ, and one whose block is not one of
#     the job's, are refused with the reason in sflctl jobs; the job waits
#     for the right agent and never gives them a task;
#   - with the noise off, and with the noise on from the seeded test stream
#     (dp_test_noise; clipping and the exponential mechanism), the exported
#     model equals sfl-sim's bit for bit;
#   - a private job: kill -9 of the coordinator mid-job; it resumes from its
#     last checkpoint, its privacy ledger counts the interrupted attempt in
#     full, so the job stops with "privacy budget exhausted" before its
#     last round instead of spending more than its epsilon;
#   - the ledger shows in sflctl jobs, /metrics and the status page's plot
#     of privacy spent per round, and each agent keeps
#     its own (0600) and refuses a round past the job's budget.
# Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh

N=200
D=40
K=4
S=10          # iterations per round
ROUNDS=6      # T = 60 iterations
SIMDATA="--data synth:dpbcfw --samples $N --dim $D --density 0.3 --partition features:$K --seed 7"
PARAMS="--eta 2 --m 20 --epsilon 1"

step "sfl-sim: the same jobs in one process"
# the private run selects by the exponential mechanism (select 1, job 2's);
# its N(0, 1) entries and least-squares residuals are clipped (clip_a,
# clip_r 1), by each agent on its block as by sfl-sim
for noise in 0 1; do
    # shellcheck disable=SC2086
    "$BIN/sfl-sim" $SIMDATA --algo dpbcfw $PARAMS --dp-noise $noise --select $noise \
        --rounds $((ROUNDS * S)) --quiet --no-wall-clock --model-out "$t/sim$noise.model" \
        > "$t/sim$noise.csv" 2> "$t/sim$noise.err" || fail "sfl-sim dpbcfw --dp-noise $noise"
done
grep -q "clipped_entries=[1-9][0-9]* clipped_residuals=[1-9]" "$t/sim1.err" ||
    fail "the private run clipped nothing: $(cat "$t/sim1.err")"
mkdir -p "$t/data" "$t/state"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --test-frac 0 --dump-shards "$t/data" || fail "dump shards"
[ -f "$t/data/client-3.ids" ] || fail "no ids dumped: $(ls "$t/data")"
# blocks: "k col0 ncols" per client
block() { awk -v k="$1" '$1 == k { print $2 + 1 ":" $3 }' "$t/data/blocks"; }

step "a coordinator and agents with column blocks; two misfits refused"
pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5
job() { # $1 name, $2 dp_noise, $3 rounds[, $4 select]
    cat <<EOF2
[job $1]
algo = dpbcfw
loss = lsq
features = $D
rows = $N
eta = 2
m = 20
epsilon = 1
dp_noise = $2
select = ${4:-0}
rounds = $3
iterations_per_round = $S
cohort = $K
overselect = 0
min_quorum = $K
deadline_ms = 20000
seed = 7
EOF2
}
# a fixed port: the agents find the coordinator again after its restart
port=$(pick_port)
mport=$((port + 1))
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; fast_rounds; echo
  job exact 0 $ROUNDS; } > "$t/coordinator.ini"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --check > "$t/check.log" 2>&1 ||
    fail "coordinator --check: $(cat "$t/check.log")"
start_coordinator
sflctl_config
vagent() { # $1 agent number, $2 shard, further args to sfl-agent
    _a=$1
    _s=$2
    shift 2
    start_agent "$_a" --data "libsvm:$t/data/client-$_s.svm" --block "$(block "$_s")" \
        --ids_file "$t/data/client-$_s.ids" --log_level debug "$@" # vertical_round lines are read
}
# agent-4 holds block 3 with other sample ids; agent-5 block 0 shifted by a column
awk '{ print $1 + 1000 }' "$t/data/client-3.ids" > "$t/other.ids"
vagent 0 0
vagent 1 1
vagent 2 2
vagent 4 3 --ids_file "$t/other.ids"
vagent 5 0 --block 2:10
waiting() { $CTL jobs 2> /dev/null | grep -q "$1"; }
wait_for 30 waiting "other sample ids" || { $CTL jobs; fail "no ids refusal: $($CTL jobs 2>&1)"; }
wait_for 30 waiting "not one of the job's 4 blocks" ||
    fail "no block refusal: $($CTL jobs 2>&1)"
grep -q "event=round_open job=1 " "$t/coord.log" && fail "job 1 opened a round without block 3"
vagent 3 3
finished() { grep -q "event=job_state job=$1 state=finished" "$t/coord.log"; }
wait_for 120 finished 1 || fail "job 1 did not finish: $($CTL jobs 2>&1)"
grep -q "event=vertical_round" "$t/agent-4.log" "$t/agent-5.log" &&
    fail "a misfit took part: $(grep vertical_round "$t/agent-4.log" "$t/agent-5.log")"

step "noise off: the exported model equals sfl-sim's bit for bit"
$CTL model export 1 "$t/net0.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
same_model "$t/net0.model" "$t/sim0.model"
# its history (issue 24 item 7): what a vertical round has, filled (every
# block holder accepted, bytes both ways, the model's nnz: the exported
# model's); what it cannot have (a loss, held-out rows), n/a; /metrics'
# accepted updates and their bytes are the history's sums (job 1 ran alone)
$CTL job history 1 > "$t/history1.csv" 2>&1 || fail "sflctl job history 1: $(cat "$t/history1.csv")"
nnz=$(grep -v '^#' "$t/net0.model" | awk '$2 != 0' | wc -l)
awk -F, -v k=$K -v r=$ROUNDS -v nnz="$nnz" '
    NR > 1 { if ($2 != "n/a" || $3 != "n/a" || $4 != "n/a" || $5 != "n/a" || $11 != "n/a" ||
                 $9 != k || $10 != k || !($7 > 0) || !($8 > 0) || $6 !~ /^[0-9]+$/) { print; bad = 1 }
             acc += $9; up += $7; last = $6; rows++ }
    END { if (rows != r || last != nnz) { print rows " rows, last nnz " last " of " nnz; bad = 1 }
          print acc, up; exit bad }' "$t/history1.csv" > "$t/sums1.txt" ||
    fail "job 1's history: $(cat "$t/sums1.txt")"
/usr/bin/python3 -c "import urllib.request, sys; sys.stdout.write(urllib.request.urlopen(
    'http://127.0.0.1:$mport/metrics', timeout=5).read().decode())" > "$t/metrics1.txt" ||
    fail "GET /metrics"
read -r acc up < "$t/sums1.txt"
grep -qx "sfl_updates_total{verdict=\"accepted\"} $acc" "$t/metrics1.txt" &&
    grep -qx "sfl_update_bytes_total $up" "$t/metrics1.txt" ||
    fail "/metrics disagrees with the history ($acc updates, $up bytes): $(grep -e '^sfl_updates_total' -e '^sfl_update_bytes' "$t/metrics1.txt")"

step "noise on (the seeded test stream): the model equals sfl-sim's bit for bit"
for i in 4 5; do eval "kill \$agent_$i"; done
# the agents take the seeded stream from now on
for i in 0 1 2 3; do eval "kill \$agent_$i"; done
sleep 0.5
for i in 0 1 2 3; do vagent $i $i --dp_test_noise 1; done
job seeded 1 $ROUNDS 1 > "$t/job2.ini"
$CTL job create "$t/job2.ini" > "$t/create.log" 2>&1 || fail "job create: $(cat "$t/create.log")"
wait_for 120 finished 2 || fail "job 2 did not finish: $($CTL jobs 2>&1)"
$CTL model export 2 "$t/net1.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
same_model "$t/net1.model" "$t/sim1.model"
$CTL jobs > "$t/jobs.txt" 2>&1
grep -q "epsilon 1 of 1 spent (rdp [0-9.e+]*, $((ROUNDS * S)) iterations)" "$t/jobs.txt" ||
    fail "ledger of job 2: $(cat "$t/jobs.txt")"
for i in 0 1 2 3; do
    f="$t/agent-$i/privacy-2.ledger"
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f is not 0600"
    grep -q "^reserved $((ROUNDS * S))$" "$f" || fail "agent-$i ledger: $(cat "$f")"
done

# The status page plots the ledger: a point per round, epsilon only growing.
/usr/bin/python3 - "$mport" "$ROUNDS" <<'EOF3' || fail "status page of job 2: see above"
import re, sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=5).read().decode()
rounds = int(sys.argv[2])
sec = re.search(r'<section class="job" id="job-2">(.*?)</section>', page, re.S)
if not sec:
    sys.exit("status page: no section of job 2")
for series in ("epsilon spent", "epsilon spent (RDP)"):
    m = re.search(r'data-series="%s" points="([^"]*)"' % re.escape(series), sec.group(1))
    if not m:
        sys.exit("status page: job 2 has no %s plot" % series)
    ys = [float(p.split(",")[1]) for p in m.group(1).split()]
    # SVG's y grows downwards: spent epsilon never falls
    if len(ys) != rounds or any(b > a for a, b in zip(ys, ys[1:])):
        sys.exit("status page: %s: %d points %s, want %d rising" % (series, len(ys), ys, rounds))
if not re.search(r'<tr id="job-row-2">.*?<td>1 of 1 \(rdp [0-9.e+]+\)</td>', page):
    sys.exit("status page: job 2's row has no privacy spent")
if "epsilon spent" in re.search(r'<section class="job" id="job-1">(.*?)</section>', page, re.S).group(1):
    sys.exit("status page: job 1 (no noise) plots privacy")
print("status page: job 2 plots epsilon spent over %d rounds" % rounds)
EOF3

step "kill -9 of the coordinator mid-job: the ledger counts the lost attempt"
# agent-3 now allows its data epsilon 0.5 of the job's 1: it answers the
# first rounds, then refuses a task, and that round's attempt stays open
# (however fast the machine) until the coordinator is killed
eval "kill \$agent_3"
sleep 0.5
vagent 3 3 --dp_test_noise 1 --max_epsilon 0.5
job crash 1 20 > "$t/job3.ini"
$CTL job create "$t/job3.ini" > "$t/create.log" 2>&1 || fail "job create: $(cat "$t/create.log")"
committed3() { grep -c "event=round_committed job=3 " "$t/coord.log" 2>/dev/null || true; }
refused() { grep -q "event=task_refused job=3 .*above its max_epsilon 0.5" "$t/agent-3.log"; }
wait_for 60 refused || fail "agent-3 did not refuse past its max_epsilon: $(tail -3 "$t/agent-3.log")"
before=$(committed3)
opened=$(grep -c "event=round_open job=3 " "$t/coord.log")
[ "$before" -ge 1 ] && [ "$opened" -eq $((before + 1)) ] ||
    fail "job 3: $before commits, $opened attempts opened: no attempt in flight"
kill -9 "$coord"
wait "$coord" 2> /dev/null || true # its lock is gone before the restart takes it
# agent-3 back with the job's own budget as its limit
eval "kill \$agent_3"
start_coordinator
grep -q "event=state_loaded" "$t/coord.log" || fail "restart did not load state"
vagent 3 3 --dp_test_noise 1
stopped() { grep -q "event=job_state job=3 state=failed" "$t/coord.log"; }
wait_for 120 stopped || fail "job 3 did not stop: $($CTL jobs 2>&1)"
$CTL jobs > "$t/jobs.txt" 2>&1
grep -q "privacy budget exhausted: 200 of its 200 iterations released" "$t/jobs.txt" ||
    fail "job 3's reason: $(cat "$t/jobs.txt")"
after=$(committed3)
# the lost attempt's 10 iterations count: 19 rounds, not 20, fit the budget
[ "$after" -eq 19 ] || fail "job 3 committed $after rounds, want 19 (the lost attempt counted)"
grep -q "epsilon 1 of 1 spent (rdp [0-9.e+]*, 200 iterations)" "$t/jobs.txt" ||
    fail "ledger of job 3: $(cat "$t/jobs.txt")"
$CTL job history 3 > "$t/history3.csv" 2>&1 || fail "sflctl job history 3"
tail -1 "$t/history3.csv" | grep -q ",200,0\.99999\|,200,1," ||
    fail "job 3's history: $(tail -2 "$t/history3.csv")"
# the agents' ledgers agree: every attempt they answered, the lost one too
grep -q "^reserved 200$" "$t/agent-0/privacy-3.ledger" ||
    fail "agent-0's ledger: $(cat "$t/agent-0/privacy-3.ledger")"
/usr/bin/python3 -c "import urllib.request, sys; sys.stdout.write(urllib.request.urlopen(
    'http://127.0.0.1:$mport/metrics', timeout=5).read().decode())" > "$t/metrics.txt" ||
    fail "GET /metrics"
grep -q '^sfl_job_privacy_iterations{job="3",name="crash"} 200$' "$t/metrics.txt" ||
    fail "no ledger in /metrics: $(grep privacy "$t/metrics.txt")"
awk '$1 == "sfl_job_privacy_epsilon_spent{job=\"2\",name=\"seeded\"}" { v = $2 }
     END { exit !(v > 0.999999 && v < 1.000001) }' "$t/metrics.txt" ||
    fail "job 2's epsilon in /metrics: $(grep privacy "$t/metrics.txt")"
step "bcfw (the broadcast is A x): the history's objective is sfl-sim's at each round's start"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo bcfw --eta 2 --rounds $((ROUNDS * S)) --quiet --no-wall-clock \
    > "$t/sim-bcfw.csv" || fail "sfl-sim bcfw"
cat > "$t/job4.ini" <<EOF2
[job plain]
algo = bcfw
loss = lsq
features = $D
rows = $N
eta = 2
rounds = $ROUNDS
iterations_per_round = $S
cohort = $K
overselect = 0
min_quorum = $K
deadline_ms = 20000
seed = 7
EOF2
$CTL job create "$t/job4.ini" > "$t/create.log" 2>&1 || fail "job create: $(cat "$t/create.log")"
wait_for 120 finished 4 || fail "job 4 did not finish: $($CTL jobs 2>&1)"
$CTL job history 4 > "$t/history4.csv" 2>&1 || fail "sflctl job history 4: $(cat "$t/history4.csv")"
# round r starts at the model of iteration (r - 1) S: sfl-sim's row (r - 1) S
# (and its model's nnz, the history's at round r, is sfl-sim's at r S)
awk -F, -v s=$S -v n=$N 'NR == FNR { if (FNR > 1) { sim[$1] = $2; nnz[$1] = $6 }; next }
    FNR > 1 { if ($11 != n || $3 != "n/a" || $6 != nnz[$1 * s]) { print "round " $1 ": " $0; bad = 1 }
              if ($1 > 1) { want = sim[($1 - 1) * s]; e = $2 - want; if (e < 0) e = -e
                            if (want == "" || e > 1e-9 * want) { print "round " $1 ": " $2 " vs " want; bad = 1 } }
              rows++ }
    END { exit bad || rows == 0 }' "$t/sim-bcfw.csv" "$t/history4.csv" > "$t/cmp4.txt" ||
    fail "bcfw objective: $(cat "$t/cmp4.txt") history: $(cat "$t/history4.csv")"
echo "vertical e2e: ok (job 3: killed with $before commits and round $opened open, $after in all)"
