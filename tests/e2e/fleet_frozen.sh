#!/bin/sh
# A frozen round master behind front-ends (issue 28; docs/operations.md
# "Front-ends", master_silent_ms). m1 leads, m2 waits as the standby, two
# front-ends know both, three agents reach m1 through them. m1 is frozen
# (SIGSTOP) mid-round and its leader session ended (ha_fence.sh's
# partition): m2 takes over with epoch 2. m1's TCP connections stay open, so
# nothing closes the front-ends' links to it; each front-end finds it silent
# (no answer to a relayed call, or to its keepalive ping, for
# master_silent_ms = 2000), drops the link, reaches m2, and the job goes on
# there. Then m1 runs again: fenced, exit 3, back as the standby, having
# committed nothing. Every round is committed once and the model equals
# sfl-sim's. Before any agent, m1 is frozen once with nothing relayed (what
# idle agents look like: the front-ends answer their heartbeats): the pings
# alone find it silent, and the front-ends come back to it once it runs.
# No timing luck: m1 stays frozen until the front-ends have moved. About
# 25 s.
set -eu
. tests/e2e/lib.sh
. tests/e2e/lib-ha.sh

ROUNDS=40
step "PostgreSQL, m1 leads, m2 standby, 2 front-ends (master_silent_ms 2000), 3 agents"
ha_setup $ROUNDS
master_start m1
wait_for 10 grep -q "event=started" "$t/m1.log" || fail "m1 did not start serving"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"
for f in 0 1; do
    fe_start $f 'master_silent_ms = 2000\n'
    grep -q "event=master_open master=127.0.0.1:$p1 " "$t/fe$f.log" || fail "front-end $f did not reach m1"
done
m1pid=$(cat "$t/m1.pid")
silent_m1() { [ "$(grep -c "event=master_silent master=127.0.0.1:$p1 " "$t/fe$1.log")" -ge "$2" ]; }
opened_m1() { [ "$(grep -c "event=master_open master=127.0.0.1:$p1 " "$t/fe$1.log")" -ge "$2" ]; }

step "m1 frozen before any agent: no call is relayed, the front-ends' keepalive pings find it silent"
kill -STOP "$m1pid"
for f in 0 1; do
    wait_for 20 silent_m1 $f 1 ||
        { kill -CONT "$m1pid"; fail "front-end $f did not find the frozen m1 silent: $(grep -E 'event=master_' "$t/fe$f.log")"; }
done
kill -CONT "$m1pid"
for f in 0 1; do
    wait_for 20 opened_m1 $f 2 || fail "front-end $f did not come back to m1: $(grep -E 'event=master_' "$t/fe$f.log")"
done
grep -q "event=leader epoch=1 " "$t/m1.log" && ! grep -q "event=fenced" "$t/m1.log" ||
    fail "m1 lost the lead while frozen with no round in flight"

joins() { cat "$t"/m1.log "$t"/m2.log 2>/dev/null | grep -c "event=join " || true; }
at_joins() { [ "$(joins)" -ge "$1" ]; }
# agents 0 and 2 try front-end 0 first, agent 1 front-end 1
for i in 0 1 2; do
    case $i in
    1) addrs="127.0.0.1:$fp1,127.0.0.1:$fp0" ;;
    *) addrs="127.0.0.1:$fp0,127.0.0.1:$fp1" ;;
    esac
    fleet_agent $i "$addrs"
    wait_for 20 at_joins $((i + 1)) || fail "agent-$i did not join"
done
wait_for 30 at_least 3 || fail "no 3 committed rounds"

step "m1 frozen mid-round, its session ended: m2 leads; the front-ends find m1 silent and move"
freeze_inflight m1
ended=$("$PSQL" "$conninfo" -tAc "SELECT count(pg_terminate_backend(pid)) FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()") ||
    { kill -CONT "$m1pid"; fail "psql: cannot end m1's session"; }
[ "$ended" -ge 1 ] || { kill -CONT "$m1pid"; fail "no session held the leader lock"; }
wait_for 10 has_epoch 2 || { kill -CONT "$m1pid"; fail "m2 did not take over"; }
for f in 0 1; do
    wait_for 20 grep -q "event=master_open master=127.0.0.1:$p2 " "$t/fe$f.log" ||
        { kill -CONT "$m1pid"; fail "front-end $f did not leave the frozen m1 for m2: $(grep -E 'event=master_' "$t/fe$f.log")"; }
    silent_m1 $f 2 ||
        { kill -CONT "$m1pid"; fail "front-end $f did not log m1 silent"; }
done
m2_at_least() { [ "$(grep -c "event=round_committed job=1 " "$t/m2.log")" -ge "$1" ]; }
wait_for 30 m2_at_least 2 || { kill -CONT "$m1pid"; fail "the job did not go on on m2"; }

step "m1 runs again: fenced, exit status 3, nothing committed, back as the standby"
m1_commits=$(grep -c "event=round_committed job=1 " "$t/m1.log")
kill -CONT "$m1pid"
wait_for 10 grep -qx 3 "$t/m1.exits" || fail "m1 did not exit with status 3"
[ "$(grep -c "event=round_committed job=1 " "$t/m1.log")" -eq "$m1_commits" ] ||
    fail "m1 committed a round after losing the lead"
wait_for 10 grep -q "event=standby" "$t/m1.log" || fail "m1 did not come back as the standby"

step "the job finishes on m2; every round committed once; the model"
wait_for 60 finished || fail "the job did not finish ($(committed) commits)"
history_once
same_as_sim
echo "PASS: a frozen master behind front-ends: they found it silent and moved to the standby" \
    "that took over; every round committed once; the model equals sfl-sim's"
