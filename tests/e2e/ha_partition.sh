#!/bin/sh
# A partitioned round master cannot commit (issue 28; docs/operations.md,
# "Failover"). m1 runs in a network namespace, joined to the host by a veth
# pair: PostgreSQL (on the host, also listening on the veth's host address,
# with server TCP keepalives of about 3 s) and the agents reach it only
# through that link; m2 runs on the host. Mid-job the link is cut (ip link
# set down in the namespace): m1's session stays open on m1's side, the server's keepalives
# end it on the server's side and free the lock; m2 takes over (epoch 2) and
# the agents, finding m1 silent, move to m2, which commits further rounds.
# While cut off m1 commits nothing (every write needs the server). Then the
# link comes back: m1's pending statement meets a connection the server has
# closed, m1 finds its lock gone, logs event=fenced, exits with status 3 and
# comes back as the standby, having committed nothing after the cut. Every
# round once, the model equals sfl-sim's. Needs root and iproute2; skips
# otherwise. About 25 s.
set -eu
. tests/e2e/lib.sh
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
command -v ip > /dev/null 2>&1 || skip "needs ip (iproute2)"
NS=sflha$$
VH=sflh$$
VN=sfln$$
NET=10.231.$(($$ % 250 + 1))
ip netns add "$NS" 2> /dev/null || skip "cannot create a network namespace"
. tests/e2e/lib-ha.sh
part_cleanup() {
    ip link del "$VH" 2> /dev/null || true
    ip netns del "$NS" 2> /dev/null || true
    ha_cleanup
}
trap part_cleanup EXIT
ip link add "$VH" type veth peer name "$VN"
ip link set "$VN" netns "$NS"
ip addr add "$NET.1/24" dev "$VH"
ip link set "$VH" up
ip netns exec "$NS" ip addr add "$NET.2/24" dev "$VN"
ip netns exec "$NS" ip link set "$VN" up
ip netns exec "$NS" ip link set lo up

# The server also on the veth's host address, trusting that /24, with TCP
# keepalives (an idle session) and tcp_user_timeout (unacknowledged data)
# that end a silent client's session in about 3 s.
export SFL_PG_LISTEN="127.0.0.1,$NET.1"
pg_open() {
    echo "host all all $NET.0/24 trust" >> "$(cat "$t/pg/data")/db/pg_hba.conf"
    for kv in tcp_keepalives_idle=1 tcp_keepalives_interval=1 tcp_keepalives_count=2 \
        tcp_user_timeout=3000; do
        "$PSQL" "$conninfo" -qtAc "ALTER SYSTEM SET ${kv%=*} = ${kv#*=}" ||
            fail "cannot set $kv"
    done
    "$PSQL" "$conninfo" -qtAc "SELECT pg_reload_conf()" > /dev/null
}
HA_PG_SETUP=pg_open

ROUNDS=40
step "m1 in a namespace (leads), m2 on the host (standby), 3 agents"
ha_setup $ROUNDS
# m1: listens on its namespace's address, reaches the server through the veth
sed -i -e "s/^listen = 127.0.0.1:/listen = $NET.2:/" \
    -e "s/^store = postgresql:host=127.0.0.1 /store = postgresql:host=$NET.1 /" "$t/m1.ini"
grep -q "^store = postgresql:host=$NET.1 " "$t/m1.ini" || fail "m1.ini: no store through the veth"
HA_WRAP_m1="ip netns exec $NS"
HA_ADDRS="$NET.2:$p1,127.0.0.1:$p2"
master_start m1
wait_for 10 has_epoch 1 || fail "m1 did not lead"
master_start m2
wait_for 10 grep -q "event=standby" "$t/m2.log" || fail "m2 did not wait as the standby"
ha_agents
wait_for 30 at_least 3 || fail "no 3 committed rounds"

step "the link is cut: the server ends m1's session, m2 takes over, agents move"
finished && fail "the job finished before the cut; make it longer"
# Cut at the namespace's end: the host keeps its route to $NET.0/24 (a
# route over a link without carrier is still used), so nothing reaches m1
# by another way.
ip netns exec "$NS" ip link set "$VN" down
cut_lines=$(wc -l < "$t/m1.log")
wait_for 10 has_epoch 2 || fail "m2 did not take over"
[ "$(leader_name)" = m2 ] || fail "epoch 2 is not m2's"
m2_at_least() { [ "$(grep -c "event=round_committed job=1 " "$t/m2.log")" -ge "$1" ]; }
wait_for 30 m2_at_least 3 || fail "m2 does not commit rounds"
# Nothing committed by m1 since the cut (it is cut off: its statements
# wait on a connection nobody answers, or fail and it steps down).
tail -n +"$((cut_lines + 1))" "$t/m1.log" | grep -q "event=round_committed" &&
    fail "m1 committed a round while cut off"

step "the link is back: m1 is fenced (exit 3), comes back as the standby"
ip netns exec "$NS" ip link set "$VN" up
wait_for 20 grep -q "event=fenced epoch=1 " "$t/m1.log" || fail "m1 was not fenced"
wait_for 10 grep -qx 3 "$t/m1.exits" || fail "m1 did not exit with status 3"
tail -n +"$((cut_lines + 1))" "$t/m1.log" | grep -q "event=round_committed" &&
    fail "m1 committed a round after the cut"
grep "event=fenced" "$t/m1.log" | head -1
wait_for 10 grep -q "event=standby" "$t/m1.log" || fail "m1 did not come back as the standby"

step "the job finishes on m2; every round committed once; the model"
wait_for 60 finished || fail "the job did not finish ($(committed) commits)"
history_once
same_as_sim
echo "PASS: a master cut off from PostgreSQL in a namespace committed nothing; the standby" \
    "took over; back online it was fenced (exit 3); every round once; model right"
