#!/bin/sh
# Secure aggregation per front-end group (secagg_groups = frontend,
# docs/security.md): a master (role single, SQLite), two front-ends and 11
# unmodified agents over mutual TLS - 3 through front-end 0, 4 through
# front-end 1, 4 connected directly - run FedAvg in update mode 2 with
# secagg_min_group = 3. The master runs one session per group: round 1's
# groups are 3, 4 and 4 (ascending ids, ordered by their smallest member).
# Agent 1 (front-end 0's group, threshold 3 of 3) dies when it would send
# its masked input (secagg_test_stop 3): its group falls below its
# threshold and is dropped, alone; the two others complete and round 1
# commits with their 8 inputs. From then on front-end 0's 2 live agents are
# too few for a group and join front-end 1's (groups 6 and 4). Then the
# same FedAvg job on the 10 live agents runs grouped, as one session
# (secagg_groups = none) and in mode 1: the three models agree within mode
# 2's quantization (a group's sum is exact in its ring; grouping changes
# only each group's quantizer, n_max its size, and the rounding). Last,
# sfl-hostile takes agent-1's place with a commitment not of its r_b: its
# group alone is dropped when it unmasks, the culprit is quarantined and
# the round commits with the other two groups. About 17 s.
set -eu
. tests/e2e/lib.sh

N=11
names=""
i=0
while [ $i -lt $N ]; do names="$names agent-$i"; i=$((i + 1)); done
# shellcheck disable=SC2086
pki_federation $names
for f in 0 1; do "$PKI" frontend "$t/pki" "fe$f" > /dev/null; done
mkdir -p "$t/data" "$t/state"
# shellcheck disable=SC2086
"$BIN/sfl-sim" --data synth:sparse --clients $N --samples 40 --dim 50 --support 5 --seed 5 \
    --dump-shards "$t/data" > /dev/null

step "a master, 2 front-ends, $N agents: 3 on front-end 0, 4 on front-end 1, 4 direct"
port=$(pick_port)
# fast_rounds' keys, but a round waits up to 3 s for its full cohort and a
# Subscribe is held for the default 60 s: the groups asserted below are of
# every live agent, whatever the machine's speed. From round 2 on the full
# cohort (11) never comes, so a round takes the agents subscribed when its
# 3 s are up; with fast_rounds' 1 s hold every agent's stream would end
# with a Wait each second and an agent could be between two Subscribes at
# that instant (CI saw front-end 0's two live agents left out so).
{ coordinator_section "127.0.0.1:$port" off
  fast_rounds | sed -e 's/^select_wait_ms = .*/select_wait_ms = 3000/' -e '/^subscribe_hold_ms/d'
  echo "heartbeat_interval_ms = 300"; } > "$t/coordinator.ini"
start_coordinator
sflctl_config
start_fe() { # $1 = front-end number; its port in fe_port
    printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s\nlisten = 127.0.0.1:0\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = off\n' \
        "$port" "$t/pki/frontend/fe$1.crt" "$t/pki/frontend/fe$1.key" "$t/pki/ca.crt" \
        "$t/fe$1" > "$t/fe$1.ini"
    "$BIN/sfl-coordinator" --config "$t/fe$1.ini" >> "$t/fe$1.log" 2>&1 &
    pids="$pids $!"
    wait_for 10 grep -q "event=started role=frontend" "$t/fe$1.log" || fail "front-end $1 did not start"
    fe_port=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$1.log" | tail -1)
    wait_for 10 grep -q "event=master_open" "$t/fe$1.log" || fail "front-end $1 did not reach the master"
}
start_fe 0; p0=$fe_port
start_fe 1; p1=$fe_port
mport=$port
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
# one at a time: agent-i is agent id i + 1
i=0
while [ $i -lt $N ]; do
    case $i in 0 | 1 | 2) port=$p0 ;; 3 | 4 | 5 | 6) port=$p1 ;; *) port=$mport ;; esac
    case $i in
    1) start_agent $i --secagg_test_stop 3 ;;
    *) start_agent $i ;;
    esac
    i=$((i + 1))
    wait_for 20 joined $i || fail "agent-$((i - 1)) did not join"
done
port=$mport

job() { # $1 = name, $2 = secure_aggregation, $3 = secagg_groups, $4 = cohort, $5 = rounds
    cat <<EOF2
[job $1]
algo = fedavg
features = 50
local_steps = 3
lr = 0.1
batch = 40
rounds = $5
cohort = $4
overselect = 0
min_quorum = 6
deadline_ms = 20000
heartbeat_ms = 2000
seed = 5
secure_aggregation = $2
secagg_support = 50
secagg_topk = 50
secagg_clip = 100
secagg_max_weight = 40
secagg_groups = $3
secagg_min_group = 3
EOF2
}
run_job() { # $1 = job id, $2 = name, then job's $2..$5
    _id=$1; _name=$2; shift 2
    job "$_name" "$@" > "$t/$_name.ini"
    $CTL job create "$t/$_name.ini" > "$t/create-$_name.log" 2>&1 ||
        fail "job create $_name: $(cat "$t/create-$_name.log")"
    done_job() { grep -q "event=job_state job=$1 state=finished" "$t/coord.log"; }
    wait_for 60 done_job "$_id" || fail "job $_name did not finish: $($CTL jobs 2>&1)"
    $CTL model export "$_id" "$t/$_name.model" > "$t/export-$_name.log" 2>&1 || fail "export $_name"
}

step "round 1: groups 3, 4, 4; agent 1 dies at stage 3: its group alone is dropped"
run_job 1 drop 1 frontend $N 3
grep -q "event=secagg_groups job=1 round=1 attempt=0 groups=3 sizes=3,4,4 " "$t/coord.log" ||
    fail "round 1's groups: $(grep "event=secagg_groups job=1 " "$t/coord.log")"
grep -q "event=secagg_test_stop" "$t/agent-1.log" || fail "agent-1 did not drop out"
dropped=$(grep "event=secagg_group_dropped job=1 " "$t/coord.log" || true)
echo "$dropped"
if [ "$(echo "$dropped" | grep -c .)" -ne 1 ] ||
    ! echo "$dropped" | grep -q "round=1 attempt=0 group=0 members=3 stage=3 "; then
    fail "dropped groups: $dropped"
fi
grep -q "event=round_committed job=1 round=1 attempt=0 accepted=8 " "$t/coord.log" ||
    fail "round 1 did not commit in its first attempt: $(grep "job=1 round=1" "$t/coord.log" | tail -5)"
# the committed attempt folded the two groups that completed: 8 inputs
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(*) FROM participation p JOIN rounds r USING (job_id, round, attempt)
     WHERE p.job_id = 1 AND p.round = 1 AND p.status = 'accepted' AND r.state = 'committed';")
[ "$n" -eq 8 ] || fail "round 1 folded $n inputs, want 8 (groups of 4 and 4)"
# front-end 0's 2 live agents join front-end 1's 4 (the smallest group of 3 or more)
grep -q "event=secagg_groups job=1 round=2 attempt=0 groups=2 sizes=6,4 " "$t/coord.log" ||
    fail "round 2's groups: $(grep "event=secagg_groups job=1 round=2" "$t/coord.log")"

step "the same job grouped, as one session and in mode 1: the models agree within the quantization"
live=$((N - 1))
run_job 2 grouped 1 frontend $live 4
run_job 3 single 1 none $live 4
run_job 4 plain 0 none $live 4
grep -q "event=secagg_groups job=2 round=4 attempt=0 groups=2 sizes=6,4 " "$t/coord.log" ||
    fail "job 2's groups: $(grep "event=secagg_groups job=2 " "$t/coord.log")"
grep -q "event=secagg_groups job=3 " "$t/coord.log" && fail "a job with secagg_groups = none was grouped"
grep -q "event=secagg_group_dropped job=[234] " "$t/coord.log" && fail "a group was dropped"
cmp=$(/usr/bin/python3 - "$t" <<'EOF2'
import sys
t = sys.argv[1]
def model(name):
    w = {}
    for line in open('%s/%s.model' % (t, name)):
        if not line.startswith('#') and line.strip():
            i, v = line.split()
            w[int(i)] = float(v)
    return w
g, s, p = model('grouped'), model('single'), model('plain')
def diff(a, b):
    return max(abs(a.get(i, 0.0) - b.get(i, 0.0)) for i in set(a) | set(b))
print('%.3g %.3g %.3g' % (diff(g, s), diff(g, p), diff(s, p)))
EOF2
) || fail "comparing the models"
# shellcheck disable=SC2086
set -- $cmp
echo "max |w| differences: grouped vs one session $1, grouped vs mode 1 $2, one session vs mode 1 $3"
awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { exit !(a < 1e-4 && b < 1e-4 && c < 1e-4) }' ||
    fail "the models differ beyond the quantization: $cmp"
step "a hostile member in front-end 0's group (a commitment not of its r_b): that group alone is dropped"
# sfl-hostile (tests/e2e/hostile_tool.c) speaks mode 2 with agent-1's
# certificate and identity key (its state_dir) through front-end 0: its
# group (3 again) cannot rebuild its self-mask seed from good shares and
# names it (bad_share_dealt) when it unmasks; that group alone is dropped,
# the culprit quarantined, the two others commit the round in its first
# attempt
HOSTILE="$BIN/tests/e2e/sfl-hostile"
[ -x "$HOSTILE" ] || fail "$HOSTILE is missing (make $HOSTILE)"
"$HOSTILE" --attack commit --coordinator "127.0.0.1:$p0" --server_name 127.0.0.1 \
    --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-1.crt" --key "$t/pki/agent/agent-1.key" \
    --coordinator_pk "$PK" --data "libsvm:$t/data/client-1.svm" --state_dir "$t/agent-1" \
    --backoff_min_ms 100 --backoff_max_ms 500 >> "$t/hostile.log" 2>&1 &
pids="$pids $!"
wait_for 20 joined $((N + 1)) || fail "sfl-hostile did not join"
run_job 5 culprit 1 frontend $N 2
grep -E "event=(secagg_groups|secagg_culprit|secagg_group_dropped|round_committed) job=5 round=1 " "$t/coord.log"
grep -q "event=secagg_groups job=5 round=1 attempt=0 groups=3 sizes=3,4,4 " "$t/coord.log" ||
    fail "job 5's groups: $(grep "event=secagg_groups job=5 " "$t/coord.log")"
grep -q "event=secagg_culprit job=5 round=1 " "$t/coord.log" || fail "no culprit named in job 5"
dropped=$(grep "event=secagg_group_dropped job=5 " "$t/coord.log" || true)
if [ "$(echo "$dropped" | grep -c .)" -ne 1 ] ||
    ! echo "$dropped" | grep -q "round=1 attempt=0 group=0 members=3 "; then
    fail "job 5's dropped groups: $dropped"
fi
grep -q "event=round_committed job=5 round=1 attempt=0 accepted=8 " "$t/coord.log" ||
    fail "job 5's round 1 did not commit in its first attempt"
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(*) FROM participation p JOIN rounds r USING (job_id, round, attempt)
     WHERE p.job_id = 5 AND p.round = 1 AND p.status = 'accepted' AND r.state = 'committed';")
[ "$n" -eq 8 ] || fail "job 5's round 1 folded $n inputs, want 8 (groups of 4 and 4)"
grep -q "event=agent_quarantined job=5 " "$t/coord.log" || fail "the culprit was not quarantined"

echo "sagroup e2e: ok (groups 3,4,4 then 6,4; one group dropped at stage 3, one for a culprit; grouped / one session / mode 1 within $1 / $2)"
