#!/bin/sh
# Update mode 2 with a hostile member (issue 23 findings 1b, 2): agent-0
# speaks all five stages correctly, deals valid shares, but scales its
# masked input as if its weight were 10 times its public one
# (secagg_test_weight): before issue 23 a member could move the mean's
# divisor through a weight word; now the coordinator divides by the public
# weights' sum and checks the unmasked sum against what clipped inputs of
# those weights can reach. Every attempt it is in fails with "secure sum
# out of bounds ... not attributable", nothing is folded (no round
# commits), and with the cohort being every agent the job pauses after
# max_attempts with that reason (the limit as built, docs/security.md).
# Then the same job with the hostile agent replaced by an honest one
# commits its rounds. Bounded: every wait has a timeout.
set -eu
. tests/e2e/lib.sh

N=4
port=$(pick_port)
mport=$((port + 1))
pki_federation agent-0 agent-1 agent-2 agent-3
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients $N --samples 80 --dim 50 --support 5 --seed 3 \
    --dump-shards "$t/data" > /dev/null

job() { # $1 = name
    cat <<EOF2

[job $1]
algo = fedavg
features = 50
local_steps = 3
lr = 0.1
batch = 80
rounds = 3
cohort = $N
overselect = 0
min_quorum = $N
deadline_ms = 20000
heartbeat_ms = 2000
max_attempts = 2
seed = 7
secure_aggregation = 1
secagg_support = 50
secagg_topk = 50
# values clipped at 0.01 (a round's changes are larger): an input scaled
# 10 times its weight leaves the bound of 4 inputs of weight 80 / 800
secagg_clip = 0.01
secagg_max_weight = 800
EOF2
}
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; fast_rounds
  echo "heartbeat_interval_ms = 300"; job hostile; } > "$t/coordinator.ini"

step "a member inflating its weight: every attempt it is in fails, not attributable; the job pauses"
start_coordinator
sflctl_config
start_agent 0 --secagg_test_weight 800
for i in 1 2 3; do start_agent $i; done
paused() { $CTL jobs 2> /dev/null | grep -q "paused"; }
wait_for 90 paused || fail "the job did not pause: $($CTL jobs 2>&1)"
grep -q "event=secagg_test_weight" "$t/agent-0.log" || fail "agent-0 was not hostile"
n=$(grep -c "event=aggregation_failed job=1 .*secure sum out of bounds: some member's input is not a clipped vector; not attributable" "$t/coord.log" || true)
[ "$n" -eq 2 ] || fail "$n aggregations refused as out of bounds, want 2 (max_attempts): $(grep event=aggregation_failed "$t/coord.log")"
grep -q "event=round_failed job=1 round=1 attempt=1 reason=\"aggregation failed: secure sum out of bounds" "$t/coord.log" ||
    fail "the attempt's reason: $(grep event=round_failed "$t/coord.log")"
grep -q "event=round_committed job=1 " "$t/coord.log" && fail "a round with the hostile sum committed"
$CTL jobs > "$t/jobs.txt" 2>&1 || true
grep -q "secure sum out of bounds" "$t/jobs.txt" || fail "sflctl jobs does not say why: $(cat "$t/jobs.txt")"
grep -E "event=(aggregation_failed|round_failed|job_paused) job=1 " "$t/coord.log"
cat "$t/jobs.txt"

step "the same job with every member honest: the rounds commit"
kill "$agent_0"
wait "$agent_0" 2> /dev/null || true
start_agent 0
job honest > "$t/honest.ini"
$CTL job create "$t/honest.ini" > "$t/create.log" 2>&1 || fail "job create: $(cat "$t/create.log")"
done_job() { grep -q "event=job_state job=2 state=finished" "$t/coord.log"; }
# job 1 stays paused; job 2 takes the agents
wait_for 120 done_job || fail "the honest job did not finish: $($CTL jobs 2>&1)"
grep -q "event=aggregation_failed job=2 " "$t/coord.log" && fail "an honest aggregation was refused"
echo "secagg hostile e2e: ok (2 attempts refused as out of bounds, the job paused; honest: 3 rounds committed)"
