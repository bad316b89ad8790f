#!/bin/sh
# Update mode 2 with a hostile member (issue 23 findings 1, 2): agent-0
# speaks all five stages correctly, deals valid shares, but scales its
# masked input as if its weight were 10 times its public one
# (secagg_test_weight): before issue 23 a member could move the mean's
# divisor through a weight word; now the coordinator divides by the public
# weights' sum and checks the unmasked sum against what clipped inputs of
# those weights can reach. An attempt it is in fails with "secure sum out
# of bounds ... not attributable" and nothing is folded; nobody can be
# named, so every member of that attempt's U3 becomes suspect
# (server/round/suspect.c) and the retry draws the smallest cohort (3 of the 4)
# from the least suspect. The target: the job is never paused (those
# failures are excused while another subset can be left out, at most one
# per candidate a round), all its rounds commit with agent-0 connected and
# subscribed, the failures are logged as unattributable with their
# suspects, agent-0 is left out of every round after the first commit, and
# /metrics counts the suspects. Then the same job with every member honest
# commits without a failure. Bounded: every wait has a timeout.
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
min_quorum = 3
deadline_ms = 20000
heartbeat_ms = 2000
max_attempts = 2
seed = 7
secure_aggregation = 1
secagg_support = 50
secagg_topk = 50
# values clipped at 0.01 (a round's changes are larger): an input scaled
# 10 times its weight leaves the bound of 3 or 4 inputs of weight 80 / 800
secagg_clip = 0.01
secagg_max_weight = 800
EOF2
}
# fast_rounds, but a round waits for all 4 subscribers (select_wait_ms far
# above what it needs): every attempt draws from all of them, so agent-0 is
# a candidate in each, whatever the machine's speed
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"
  fast_rounds | sed 's/^select_wait_ms = .*/select_wait_ms = 60000/'
  echo "heartbeat_interval_ms = 300"; job hostile; } > "$t/coordinator.ini"

step "a member inflating its weight: its attempts fail unattributably, it is cornered, the job commits"
start_coordinator
sflctl_config
start_agent 0 --secagg_test_weight 800 --log_level debug # secagg_round lines are read
for i in 1 2 3; do start_agent $i; done
ended() { grep -Eq "event=job_state job=1 state=(finished|paused|failed)" "$t/coord.log"; }
wait_for 120 ended || fail "job 1 did not end: $($CTL jobs 2>&1)"
grep -q "event=job_state job=1 state=finished" "$t/coord.log" ||
    fail "job 1 did not finish: $(grep -E "event=(round_failed|job_paused|job_state) job=1 " "$t/coord.log")"
grep -q "event=job_paused job=1 " "$t/coord.log" && fail "job 1 paused"
grep -q "event=secagg_test_weight" "$t/agent-0.log" || fail "agent-0 was not hostile"
h=$($CTL agents 2>/dev/null | awk '$2 == "agent-0" { print $1 }')
[ -n "$h" ] || fail "agent-0 is not listed: $($CTL agents 2>&1)"
$CTL agents 2>/dev/null | awk -v h="$h" '$1 == h' | grep -q ' yes ' ||
    fail "agent-0 is not connected: $($CTL agents 2>&1)"
nfail=$(grep -c "event=aggregation_failed job=1 .*attributable=no suspects=\"[^\"]*agent $h ([0-9]*)[^\"]*\" error=.*secure sum out of bounds: some member's input is not a clipped vector; not attributable" "$t/coord.log" || true)
[ "$nfail" -ge 1 ] || fail "no aggregation refused as out of bounds and unattributable, naming the suspects: $(grep event=aggregation_failed "$t/coord.log")"
# every unattributable failure excused (within the bound), none counted
grep "event=round_unattributable job=1 " "$t/coord.log" | grep -qv "excused=yes" &&
    fail "an unattributable failure counted: $(grep event=round_unattributable "$t/coord.log")"
[ "$(grep -c "event=round_unattributable job=1 .*excused=yes" "$t/coord.log")" -eq "$nfail" ] ||
    fail "$nfail failures but: $(grep event=round_unattributable "$t/coord.log")"
# the failures are all in round 1 (the first attempt drew all 4, so
# agent-0): cornered there, it takes no later round, left out from each
# one's first attempt while connected and subscribed
grep "event=aggregation_failed job=1 " "$t/coord.log" | grep -qv "job=1 round=1 " &&
    fail "a round after the first failed: $(grep event=aggregation_failed "$t/coord.log")"
for r in 2 3; do
    grep -q "event=suspects_left_out job=1 round=$r attempt=0 candidates=4 drawn_from=3 left_out=\"agent $h (" "$t/coord.log" ||
        fail "round $r did not leave agent-0 out: $(grep "event=suspects_left_out job=1" "$t/coord.log")"
    grep -q "event=secagg_round job=1 round=$r " "$t/agent-0.log" && fail "agent-0 took round $r"
done
[ "$(grep -c "event=round_committed job=1 " "$t/coord.log")" -eq 3 ] || fail "not 3 rounds committed"
curl_metrics() {
    /usr/bin/python3 - "$mport" <<'EOF_M'
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode())
EOF_M
}
curl_metrics > "$t/metrics.txt" || fail "no /metrics"
grep -Eq '^sfl_job_suspects\{job="1",name="hostile"\} [1-9]' "$t/metrics.txt" ||
    fail "/metrics: $(grep sfl_job_suspects "$t/metrics.txt")"
grep -E "event=(aggregation_failed|round_unattributable|suspects_left_out|round_committed) job=1 " "$t/coord.log"

step "the same job with every member honest: the rounds commit"
kill "$agent_0"
wait "$agent_0" 2> /dev/null || true
start_agent 0 --log_level debug
job honest > "$t/honest.ini"
$CTL job create "$t/honest.ini" > "$t/create.log" 2>&1 || fail "job create: $(cat "$t/create.log")"
done_job() { grep -q "event=job_state job=2 state=finished" "$t/coord.log"; }
# job 1 is over; job 2 takes the agents
wait_for 120 done_job || fail "the honest job did not finish: $($CTL jobs 2>&1)"
grep -q "event=aggregation_failed job=2 " "$t/coord.log" && fail "an honest aggregation was refused"
echo "secagg hostile e2e: ok ($nfail attempts refused as out of bounds and unattributable, agent-0 cornered, 3 rounds committed; honest: 3 rounds committed)"
