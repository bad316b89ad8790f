#!/bin/sh
# Round-master failover (issue 28; docs/operations.md, "Failover"): a
# throwaway PostgreSQL cluster, two masters (role = master) on the same store
# with the same fleet identity, three agents given both addresses. A job
# (ordered aggregation) runs; the active master is killed -9 mid-round (frozen
# first at an instant when a round is in flight in the store: lib-ha.sh,
# freeze_inflight; the agents stopped meanwhile); the standby logs
# event=leader with the next epoch, fails the round in flight and resumes. Then PostgreSQL is restarted under load: the
# leader finds its lock lost (event=fenced, exit status 3), a master takes the
# lead with the next epoch and the job resumes. At the end sflctl job history
# shows every round committed exactly once, sflctl fleet names the leader
# and lists the masters (leader, standby, and the killed one as stale),
# and the model equals sfl-sim's bit for bit (what a single coordinator
# gives: federation.sh, crash.sh). About 25 s on a quiet machine.
set -eu
. tests/e2e/lib.sh
. tests/e2e/lib-ha.sh

ROUNDS=60
step "PostgreSQL cluster, masters m1 (leads) and m2 (standby), 3 agents with both addresses"
ha_setup $ROUNDS
master_start m1
wait_for 10 has_epoch 1 || fail "m1 did not lead with epoch 1"
wait_for 10 grep -q "event=started" "$t/m1.log" || fail "m1 did not start serving"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"
grep -q "event=started" "$t/m2.log" && fail "the standby listens"
ha_agents
wait_for 30 at_least 3 || fail "no 3 committed rounds"
# The agents are stopped from here until the job has moved to m2: the
# checks between do not run the job, so however fast rounds go on this
# machine the job cannot run out of rounds before PostgreSQL's restart.
agents() { for _a in "$agent_0" "$agent_1" "$agent_2"; do kill "-$1" "$_a"; done; }
agents STOP
# sflctl fleet lists both masters from the store's masters table: the
# standby writes its row at every try, the leader at every check.
fleet_has() { # $1 = role, $2 = epoch, $3 = live|stale, $4 = its listen port
    $CTL fleet > "$t/fleet.out" 2>&1 &&
        grep -q "^$1 *$2 *[0-9]* *$3 .* listen 127\.0\.0\.1:$4\$" "$t/fleet.out"
}
ctl_leader
wait_for 10 fleet_has standby 1 live "$p2" || fail "sflctl fleet, m2 standby: $(cat "$t/fleet.out")"
fleet_has leader 1 live "$p1" || fail "sflctl fleet, m1 leader: $(cat "$t/fleet.out")"
grep -q "^masters *2$" "$t/fleet.out" || fail "sflctl fleet, 2 masters: $(cat "$t/fleet.out")"

step "kill -9 of the leader mid-round: the standby takes over with epoch 2"
freeze_inflight m1
before=$(committed)
master_kill m1
wait_for 10 has_epoch 2 || fail "m2 did not take over with epoch 2"
[ "$(leader_name)" = m2 ] || fail "epoch 2 is not m2's"
grep -q "event=leader epoch=2 .*rounds_abandoned=1" "$t/m2.log" ||
    fail "m2 did not fail the round in flight: $(grep 'event=leader' "$t/m2.log")"
wait_for 10 grep -q "event=started .*role=master epoch=2" "$t/m2.log" || fail "m2 does not serve"
master_start m1
wait_for 10 grep -q "event=standby" "$t/m1.log" || fail "m1 did not come back as the standby"
# the new leader, the killed one's row going stale (no heartbeat for
# 3 x leader_retry_ms), and m1's new process as the standby
ctl_leader
m2_leads() {
    fleet_has leader 2 live "$p2" && fleet_has leader 1 stale "$p1" &&
        fleet_has standby 2 live "$p1"
}
wait_for 10 m2_leads || fail "sflctl fleet after the kill: $(cat "$t/fleet.out")"
cat "$t/fleet.out"
agents CONT
wait_for 30 at_least $((before + 3)) || fail "the job did not resume on m2"

step "PostgreSQL restarted under load: the leader is fenced, a master leads with epoch 3"
before=$(committed)
finished && fail "the job finished before the restart; make it longer"
tests/pgcluster.sh stop "$t/pg"
tests/pgcluster.sh start "$t/pg" > /dev/null || fail "PostgreSQL did not start again"
wait_for 20 has_epoch 3 || fail "no master took the lead after the restart"
grep -q "event=takeover_failed" "$t/m1.log" "$t/m2.log" && fail "a takeover failed"
grep -q "event=fenced epoch=2 " "$t/m2.log" || fail "m2 was not fenced"
grep -qx 3 "$t/m2.exits" || fail "m2 did not exit with status 3 ($(cat "$t/m2.exits"))"
wait_for 30 at_least $((before + 3)) || fail "the job did not resume after the restart"

step "the job finishes; every round committed once; sflctl fleet; the model"
wait_for 60 finished || fail "the job did not finish ($(committed) commits)"
history_once
ctl_leader
# sflctl with both masters' admin addresses: the standby does not listen,
# the leader answers.
$CTL --coordinator "127.0.0.1:$((p1 + 1)),127.0.0.1:$((p2 + 1))" fleet > "$t/fleet.out" 2>&1 ||
    fail "sflctl fleet: $(cat "$t/fleet.out")"
grep -q "^leader *epoch $(leader_epoch), " "$t/fleet.out" || fail "sflctl fleet: $(cat "$t/fleet.out")"
grep -q "^answering *master (leads)" "$t/fleet.out" || fail "sflctl fleet: $(cat "$t/fleet.out")"
same_as_sim
echo "PASS: kill -9 of the leader mid-round and a PostgreSQL restart: the standby took over" \
    "(epochs 1 -> 2 -> 3), the round in flight failed and was run again, every round" \
    "committed once, the model equals sfl-sim's"
