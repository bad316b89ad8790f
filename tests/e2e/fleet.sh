#!/bin/sh
# The whole fleet (issue 28; docs/operations.md "Front-ends" and "Failover")
# with real processes over mutual TLS on loopback: a throwaway PostgreSQL
# cluster, two masters on it (m1 leads, m2 waits as the standby), three
# front-ends that know both masters, and three unmodified agents, each given
# the three front-ends' addresses starting with a different one. An ordered
# job runs; a front-end is killed -9 (its agent moves to the next front-end
# of its list), then the leading master is killed -9 mid-round (the standby
# takes over with epoch 2, the front-ends find it, the round in flight fails
# and runs again). At the end sflctl fleet lists the two front-ends left and
# the three agents they hold, every round is committed exactly once and the
# model equals sfl-sim's bit for bit: what one coordinator gives
# (federation.sh). About 15 s.
set -eu
. tests/e2e/lib.sh
. tests/e2e/lib-ha.sh

ROUNDS=60
step "PostgreSQL, masters m1 (leads) and m2 (standby), 3 front-ends, 3 agents over them"
ha_setup $ROUNDS
master_start m1
wait_for 10 grep -q "event=started" "$t/m1.log" || fail "m1 did not start serving"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"

fe_up() { # $1: front-end number; fe<N>.log says it reached a master N times
    [ "$(grep -c "event=master_open" "$t/fe$1.log" 2>/dev/null || true)" -ge "$2" ]
}
for f in 0 1 2; do fe_start $f; done
grep -q "event=master_open master=127.0.0.1:$p1 " "$t/fe0.log" ||
    fail "front-end 0 did not reach m1: $(grep event=master_open "$t/fe0.log")"

joins() { cat "$t"/m1.log "$t"/m2.log 2>/dev/null | grep -c "event=join " || true; }
at_joins() { [ "$(joins)" -ge "$1" ]; }
# Agent i tries front-end i first, then the next ones; one at a time, so
# that agent ids follow the shards as sfl-sim's clients do.
for i in 0 1 2; do
    case $i in
    0) addrs="127.0.0.1:$fp0,127.0.0.1:$fp1,127.0.0.1:$fp2" ;;
    1) addrs="127.0.0.1:$fp1,127.0.0.1:$fp2,127.0.0.1:$fp0" ;;
    *) addrs="127.0.0.1:$fp2,127.0.0.1:$fp0,127.0.0.1:$fp1" ;;
    esac
    fleet_agent $i "$addrs"
    wait_for 20 at_joins $((i + 1)) || fail "agent-$i did not join through front-end $i"
done
# Every join came through a front-end (the master's join lines name the
# front-end's address and the agent's connection number there).
grep "event=join " "$t/m1.log" | grep -vq "addr=127.0.0.1:[0-9]*/[0-9]" &&
    fail "a join did not come through a front-end: $(grep "event=join " "$t/m1.log")"
wait_for 30 at_least 3 || fail "no 3 committed rounds"

step "kill -9 of front-end 1: its agent moves to front-end 2, the job goes on"
kill -9 "$fe_1"
wait "$fe_1" 2> /dev/null || true
before=$(committed)
wait_for 20 at_joins 4 || fail "agent-1 did not join again through another front-end"
wait_for 30 at_least $((before + 3)) || fail "the job did not go on after the front-end's kill"

step "kill -9 of the leading master mid-round: m2 leads with epoch 2, the front-ends follow"
freeze_inflight m1
before=$(committed)
finished && fail "the job finished before the master's kill; make it longer"
master_kill m1
wait_for 10 has_epoch 2 || fail "m2 did not take over with epoch 2"
grep -q "event=leader epoch=2 .*rounds_abandoned=1" "$t/m2.log" ||
    fail "m2 did not fail the round in flight: $(grep 'event=leader' "$t/m2.log")"
for f in 0 2; do
    wait_for 20 fe_up "$f" 2 || fail "front-end $f did not reach m2"
done
wait_for 30 at_least $((before + 3)) || fail "the job did not resume on m2"

step "the job finishes; sflctl fleet; every round committed once; the model"
wait_for 60 finished || fail "the job did not finish ($(committed) commits)"
ctl_leader
$CTL fleet > "$t/fleet.out" 2>&1 || fail "sflctl fleet: $(cat "$t/fleet.out")"
grep -q "^leader *epoch 2, " "$t/fleet.out" || fail "sflctl fleet: $(cat "$t/fleet.out")"
grep -q "^front-ends *2$" "$t/fleet.out" || fail "sflctl fleet, 2 front-ends: $(cat "$t/fleet.out")"
held=$(awk '$1 ~ /^fe[02]$/ { n += $3 } END { print n + 0 }' "$t/fleet.out")
[ "$held" -eq 3 ] || fail "sflctl fleet: the front-ends hold $held agents, not 3: $(cat "$t/fleet.out")"
history_once
same_as_sim
echo "PASS: 3 front-ends and 2 masters on PostgreSQL: a front-end and the leading master" \
    "killed -9, the agents moved, the standby took over, every round committed once, the" \
    "model equals sfl-sim's"
