#!/bin/sh
# A round master that lost its PostgreSQL session cannot commit (issue 28;
# docs/operations.md, "Failover"). m1 leads with a round in flight (durable,
# one agent paused so it cannot complete); m1 is frozen with SIGSTOP and its
# session, the one holding the leader lock, is ended with
# pg_terminate_backend, as a partition that PostgreSQL's keepalives
# eventually notice would end it; m2 takes the lock (epoch 2), fails the
# round in flight and commits further rounds. Then m1 runs again (SIGCONT)
# with its round, its agents and its epoch in memory: whatever it writes
# first is refused (its session is gone, the new one does not hold the lock,
# and every write is fenced with epoch 1 while the row says 2), so it logs
# event=fenced, exits with status 3 and comes back as the standby, having
# committed nothing. No timing luck: m1 is frozen through the whole takeover,
# so the order of events does not depend on the machine's speed. At the end
# every round is committed once and the model equals sfl-sim's. About 20 s.
set -eu
. tests/e2e/lib.sh
. tests/e2e/lib-ha.sh

ROUNDS=16
step "PostgreSQL cluster, m1 leads, m2 standby, 3 agents"
ha_setup $ROUNDS
master_start m1
wait_for 10 has_epoch 1 || fail "m1 did not lead with epoch 1"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"
ha_agents
wait_for 30 at_least 3 || fail "no 3 committed rounds"

step "m1 frozen mid-round, its leader session ended: m2 takes over with epoch 2"
kill -STOP "$agent_2"
inflight() {
    r=$(sed -n 's/.* event=round_open job=1 round=\([0-9]*\) .*/\1/p' "$t/m1.log" | tail -1)
    [ -n "$r" ] && ! grep -q "event=round_committed job=1 round=$r " "$t/m1.log" &&
        [ "$(grep -c "event=update agent=[0-9]* job=1 round=$r .*verdict=accepted" "$t/m1.log")" -ge 1 ]
}
wait_for 20 inflight || fail "no round in flight on m1"
m1pid=$(cat "$t/m1.pid")
kill -STOP "$m1pid"
ended=$("$PSQL" "$conninfo" -tAc "SELECT count(pg_terminate_backend(pid)) FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()") ||
    fail "psql: cannot end m1's session"
[ "$ended" -ge 1 ] || fail "no session held the leader lock"
wait_for 10 has_epoch 2 || { kill -CONT "$m1pid"; fail "m2 did not take over"; }
[ "$(leader_name)" = m2 ] || fail "epoch 2 is not m2's"
grep -q "event=leader epoch=2 .*rounds_abandoned=1" "$t/m2.log" ||
    fail "m2 did not fail m1's round in flight"
kill -CONT "$agent_2"
m2_at_least() { [ "$(grep -c "event=round_committed job=1 " "$t/m2.log")" -ge "$1" ]; }
wait_for 30 m2_at_least 2 || fail "m2 does not commit rounds"

step "m1 runs again: refused, fenced, exit status 3, nothing committed"
m1_commits=$(grep -c "event=round_committed job=1 " "$t/m1.log")
m1_lines=$(wc -l < "$t/m1.log")
kill -CONT "$m1pid"
wait_for 10 grep -q "event=fenced epoch=1 " "$t/m1.log" || fail "m1 was not fenced"
wait_for 10 grep -qx 3 "$t/m1.exits" || fail "m1 did not exit with status 3"
[ "$(grep -c "event=round_committed job=1 " "$t/m1.log")" -eq "$m1_commits" ] ||
    fail "m1 committed a round after losing the lead"
tail -n +"$((m1_lines + 1))" "$t/m1.log" | grep "event=fenced\|event=store_error" | head -3
wait_for 10 grep -q "event=standby" "$t/m1.log" || fail "m1 did not come back as the standby"

step "the job finishes on m2; every round committed once; the model"
wait_for 60 finished || fail "the job did not finish ($(committed) commits)"
history_once
same_as_sim
echo "PASS: a master whose session was ended while it was frozen mid-round committed" \
    "nothing once it ran again (fenced, exit 3, back as standby); every round once; model right"
