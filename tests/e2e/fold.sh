#!/bin/sh
# Front-ends in fold mode (docs/operations.md "Front-ends"), with real
# processes over mutual TLS on loopback: one master (role single, SQLite),
# three front-ends (fold_flush_ms = 50) and six unmodified agents, two on
# each. A streaming FedIter-HT job with frontend_fold = 1: every update is
# verified and folded at its front-end, which sends the master one partial
# sum per group (Fleet.Claim, Fleet.Partial), so the master logs partials -
# fewer than the updates they carry - and no update of the job at all. One
# front-end is killed with SIGKILL mid-job; its agents reconnect to a new
# front-end on its address, any member it had claimed and not sent is lost
# for its attempt (min_quorum = 6: that attempt fails at its deadline and
# runs again). The job finishes with every round committed once, no agent
# counted twice in any attempt (the participation rows), and the model
# equals sfl-sim's to 1e-9 of its largest value: partial sums are added in
# the order they arrive, so the last bits follow arrival order as in any
# streaming job. About 15 s.
set -eu
. tests/e2e/lib.sh

pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5
for f in 0 1 2 3; do "$PKI" frontend "$t/pki" "fe$f" > /dev/null; done

step "start: 6 shards (d = 200, 5-sparse), a master, 3 front-ends folding, 6 agents"
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients 6 --samples 40 --dim 200 --support 5 --seed 11"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
ROUNDS=30
mport=$(pick_port)
{ coordinator_section "127.0.0.1:$mport" off; fast_rounds; cat <<EOF2

[job lsq]
algo = fediterht
features = 200
tau = 5
local_steps = 3
lr = 0.1
batch = 40
rounds = $ROUNDS
cohort = 6
overselect = 0
min_quorum = 6
deadline_ms = 3000
seed = 11
frontend_fold = 1
EOF2
} > "$t/coordinator.ini"
start_coordinator

# Front-end $1 listening on $2 (0: any port); its port in fe_port.
start_fe() {
    printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s\nlisten = 127.0.0.1:%s\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nfold_flush_ms = 50\nmetrics_listen = off\n' \
        "$mport" "$2" "$t/pki/frontend/fe$1.crt" "$t/pki/frontend/fe$1.key" "$t/pki/ca.crt" \
        "$t/fe$1" > "$t/fe$1.ini"
    "$BIN/sfl-coordinator" --config "$t/fe$1.ini" >> "$t/fe$1.log" 2>&1 &
    eval "fe_$1=$!"
    pids="$pids $!"
    wait_for 10 grep -q "event=started role=frontend" "$t/fe$1.log" || fail "front-end $1 did not start"
    fe_port=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$1.log" | tail -1)
    wait_for 10 grep -q "event=master_open" "$t/fe$1.log" || fail "front-end $1 did not reach the master"
}
start_fe 0 0; p0=$fe_port
start_fe 1 0; p1=$fe_port
start_fe 2 0; p2=$fe_port
joined() { [ "$(grep -c "event=join " "$t/coord.log" 2>/dev/null || true)" -ge "$1" ]; }
# One at a time, so that agent ids 1..6 follow shards 0..5 as sfl-sim's
# clients do.
for i in 0 1 2 3 4 5; do
    case $i in 0|1) port=$p0 ;; 2|3) port=$p1 ;; *) port=$p2 ;; esac
    start_agent $i
    wait_for 20 joined $((i + 1)) || fail "agent-$i did not join through its front-end"
done

committed() { grep -c "event=round_committed job=1 " "$t/coord.log" 2>/dev/null || true; }
at_least() { [ "$(committed)" -ge "$1" ]; }
wait_for 30 at_least 4 || fail "no 4 committed rounds"
grep -q "event=partial frontend=fe" "$t/coord.log" || fail "the master got no partial sum"

step "kill -9 front-end 1 mid-job; a new front-end takes its address"
kill -9 "$fe_1"
wait "$fe_1" 2> /dev/null || true
before=$(committed)
[ "$before" -lt "$ROUNDS" ] || fail "the job finished before the kill; make it longer"
start_fe 3 "$p1"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 60 finished || fail "job did not finish ($(committed) commits logged)"
folded_fe3() { grep -q "event=partial frontend=fe3 " "$t/coord.log"; }
folded_fe3 || fail "the new front-end sent no partial"

step "partials, not updates; every round committed once, no agent counted twice"
# Every update of the job came through a partial: the master judged none.
! grep "event=update " "$t/coord.log" | grep -q " job=1 " ||
    fail "the master judged updates of the fold job: $(grep "event=update " "$t/coord.log" | head -3)"
partials=$(grep -c "event=partial frontend=" "$t/coord.log")
members=$(sed -n 's/.*event=partial frontend=.* members=\([0-9]*\) .*/\1/p' "$t/coord.log" |
    awk '{ n += $1 } END { print n + 0 }')
[ "$partials" -lt "$members" ] || fail "$partials partials for $members updates: no folding"
n=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT count(*) FROM rounds WHERE job_id = 1 AND state = 'committed';")
[ "$n" -eq "$ROUNDS" ] || fail "$n committed rounds, want $ROUNDS"
# At most one acceptance per agent and attempt, every committed attempt 6.
bad=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT round, attempt, agent_id, count(*) FROM participation
     WHERE job_id = 1 AND status = 'accepted' GROUP BY round, attempt, agent_id
     HAVING count(*) > 1;")
[ -z "$bad" ] || fail "agents counted twice in an attempt (round|attempt|agent|rows): $bad"
bad=$(sqlite3 "file:$t/state/coordinator.db?mode=ro" \
    "SELECT p.round, count(DISTINCT p.agent_id) FROM participation p
     JOIN rounds r USING (job_id, round, attempt)
     WHERE p.job_id = 1 AND p.status = 'accepted' AND r.state = 'committed' GROUP BY p.round
     HAVING count(DISTINCT p.agent_id) != 6;")
[ -z "$bad" ] || fail "committed rounds without 6 agents (round|agents): $bad"
sflctl_config
$CTL model export 1 "$t/net.model" > "$t/ctl.log" 2>&1 || fail "sflctl model export: $(cat "$t/ctl.log")"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 5 --local-steps 3 --lr 0.1 --batch 40 \
    --rounds $ROUNDS --quiet --model-out "$t/sim.model" > /dev/null
/usr/bin/python3 - "$t/net.model" "$t/sim.model" <<'EOF3' || fail "network and simulation models differ"
import sys
def load(p):
    return {int(a): float(b) for a, b in (l.split() for l in open(p) if not l.startswith("#"))
            if float(b) != 0.0}
net, sim = load(sys.argv[1]), load(sys.argv[2])
assert net.keys() == sim.keys(), (sorted(net), sorted(sim))
scale = max(abs(v) for v in sim.values())
worst = max(abs(net[k] - sim[k]) for k in sim)
print(f"network vs sfl-sim: same support ({len(sim)} nonzeros), largest difference "
      f"{worst:.3g} ({worst / scale:.3g} of the largest value)")
assert worst <= 1e-9 * scale, worst
EOF3
lost=$(grep -c "event=round_failed job=1 " "$t/coord.log" || true)
echo "fold: $members updates in $partials partials over 3 front-ends, front-end 1 killed after" \
    "$before of $ROUNDS rounds ($lost attempts failed and ran again): ok"
