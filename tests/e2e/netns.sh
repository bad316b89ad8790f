#!/bin/sh
# End-to-end: the docker-compose topology in network namespaces, through
# deploy/netns-federation.sh (the image's entrypoint, one namespace per
# service, veths to a bridge, service names from /etc/netns/NS/hosts):
#   (a) pki and data run once, the coordinator and 4 agents take their
#       identities and shards; one agent's link is cut (ip link set down at
#       the bridge) and restored, twice: the round it was selected for
#       completes by quorum (or is retried); after a short cut its TCP
#       connection carries on, after a long one (beyond TCP's retransmission
#       budget) it reconnects and joins again; its updates are accepted
#       again; the coordinator is restarted as by `docker compose restart
#       coordinator` and resumes the job from SQLite; the job finishes with
#       rounds 1..R committed exactly once (log and sflctl); a restarted agent
#       keeps its shard, a fifth agent waits for one and takes over the shard
#       of an agent that stopped;
#   (b) netem delay 75ms loss 1% on every service's veth (an RTT of 150 ms):
#       a job completes; the wall time per round is printed next to the same
#       job without delay. tc netem, or where the kernel lacks sch_netem the
#       script's userspace switch with the same semantics (python3);
#   (c) when docker-compose is installed, `docker-compose config` accepts
#       docker-compose.yml and its services run the roles used here.
# Needs root and iproute2; skips otherwise. Bounded: about 60 s.
set -eu
. tests/e2e/lib-step.sh
BIN=${SFL_BIN:-build}
ROOT=$(pwd)
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null 2>&1 || skip "needs ip (iproute2)"
probe=sfle2e-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
netem=0 # tc qdisc add dev lo root netem delay 1ms, in a namespace
if ip netns exec "$probe" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then netem=1; fi
ip netns del "$probe"

t=$(mktemp -d)
export SFL_BIN="$BIN" SFL_NETNS_DIR="$t/fed" SFL_NETNS_PREFIX="sfle2e$$" SFL_NETNS_STOP_S=10
NSF="$ROOT/deploy/netns-federation.sh"
fed() { sh "$NSF" "$@"; }
cleanup() {
    fed down >/dev/null 2>&1 || true
    rm -rf "$t"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
LOG=$t/fed/logs
fail() {
    echo "FAIL: $*"
    for f in "$LOG"/*.log; do
        [ -e "$f" ] || continue
        echo "== $f"
        tail -25 "$f"
    done
    exit 1
}
wait_for() { # $1 = seconds (idle need), rest = condition; bound x SFL_WAIT_SCALE, as in lib.sh
    n=$(($1 * 10 * ${SFL_WAIT_SCALE:-10}))
    shift
    while [ $n -gt 0 ]; do
        if "$@"; then return 0; fi
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(now)

# Four shards of a noiseless 8-sparse problem; a job whose full selection
# (cohort 4 + 25 %) exceeds the 4 agents, so every round first gathers
# subscribers for select_wait_ms: ~3 rounds a second, slow enough to cut a
# link mid-job. A selected agent silent for 2 s is dead for the attempt
# (agents heartbeat every second).
step "start: 4 shards and a job; pki, data, coordinator and 4 agents in namespaces"
export SFL_SHARDS=4 SFL_SAMPLES=100 SFL_DIM=300 SFL_SUPPORT=8 SFL_SEED=5
ROUNDS=40
export SFL_JOB_NAME=cut SFL_JOB_ROUNDS=$ROUNDS SFL_JOB_COHORT=4 SFL_JOB_OVERSELECT=0.25 \
    SFL_JOB_MIN_QUORUM=3 SFL_JOB_TAU=8 SFL_JOB_BATCH=100 SFL_JOB_LOCAL_STEPS=5 SFL_JOB_LR=0.1 \
    SFL_JOB_DEADLINE_MS=10000 SFL_JOB_HEARTBEAT_MS=2000 SFL_JOB_SEED=5
export SFL_COORDINATOR_ARGS="--select_wait_ms 300 --tick_ms 50 --pace_min_ms 100 --idle_retry_ms 300 --heartbeat_interval_ms 1000"
export SFL_AGENT_ARGS="--backoff_min_ms 200 --backoff_max_ms 1000 --heartbeat_ms 1000 --connect_timeout_ms 2000"
# Shard leases: refreshed every second, stale after 4 s (45 s in compose).
export SFL_LEASE_REFRESH_S=1 SFL_LEASE_TTL_S=4

C=$LOG/coordinator.log
count() { grep -c "$1" "$2" 2>/dev/null || true; }
commits() { count "event=round_committed job=$1 " "$C"; }
at_least() { [ "$(commits "$1")" -ge "$2" ]; }
finished() { grep -q "event=job_state job=$1 state=finished" "$C"; }

# ---- (a) link cut and restore, coordinator restart ------------------------------------
step "(a) link cut and restore, coordinator restart"
fed up 4 > "$t/up.log" 2>&1 || fail "netns-federation up: $(cat "$t/up.log")"
for i in 1 2 3 4; do
    wait_for 10 grep -q "claimed shard [0-3] of 4" "$LOG/agent-$i.log" || fail "agent-$i claimed no shard"
done
[ "$(cat "$LOG"/agent-*.log | sed -n 's/.*claimed shard \([0-9]*\) of 4.*/\1/p' | sort -u | wc -l)" -eq 4 ] ||
    fail "the agents did not claim 4 different shards"
fed exec agent-1 getent hosts coordinator > "$t/hosts.out" || fail "agent-1 cannot resolve 'coordinator'"
grep -q "^10\.77\.0\.2 " "$t/hosts.out" || fail "coordinator resolves to $(cat "$t/hosts.out")"
wait_for 30 at_least 1 5 || fail "no 5 committed rounds"

# Cut agent-4's link. A round trains for milliseconds and then waits
# select_wait_ms for the next selection, so the cut lands mid-round only by
# chance; either way the coordinator still counts agent-4 as subscribed, so
# the round in flight or the next one has it among the selected: that round
# must commit with the quorum, or fail and be retried.
outcome() { # the outcome of the first round after line $1 that lost agent-4
    tail -n +"$1" "$C" | awk '
        function rnd() { match($0, / round=[0-9]+/); return substr($0, RSTART + 7, RLENGTH - 7) }
        /event=round_open job=1 / && / selected=4 / { open[rnd()] = 1 }
        /event=round_committed job=1 / && / accepted=3 / { r = rnd(); if (r in open) { print "round " r " committed by quorum (3 of 4 selected)"; exit } }
        /event=round_failed job=1 / { r = rnd(); if (r in open) { print "round " r " failed without agent-4 and was retried"; exit } }'
}
has_outcome() { [ -n "$(outcome "$1")" ]; }
a4id=$(sed -n 's/.*event=join agent=\([0-9]*\) name=agent-4 .*/\1/p' "$C" | head -n 1)
[ -n "$a4id" ] || fail "agent-4 has not joined"
a4_accepted() { tail -n +"$1" "$C" | grep -q "event=update agent=$a4id .* verdict=accepted"; }
joins() { count "event=joined" "$LOG/agent-4.log"; }
cut_agent4() { # SECONDS CMD: cut; a round loses agent-4; after SECONDS and CMD, restore
    from=$(grep -n "event=round_open job=1 " "$C" | tail -n 1 | cut -d: -f1)
    fed cut agent-4
    cut_at=$(now)
    wait_for 20 has_outcome "$from" || fail "no round completed by quorum or retry after the cut"
    while [ "$(awk -v a="$cut_at" -v b="$(now)" 'BEGIN { print (b - a < '"$1"') }')" = 1 ]; do sleep 0.1; done
    "$2" || true
    held=$(elapsed "$cut_at")
    back_line=$(wc -l < "$C")
    fed restore agent-4
}

# A short outage (4 s) with the kernel's defaults: TCP retransmits through
# it, so the connection survives - unless agent-4 missed 3 heartbeats
# meanwhile and dropped it (coordinator_silent: then it joins again); either
# way agent-4 carries on.
step "a short outage (4 s): TCP retransmits through it"
j0=$(joins)
cut_agent4 4 true
wait_for 30 a4_accepted "$back_line" || fail "no update of agent-4 accepted after the short cut"
if [ "$(joins)" -gt "$j0" ]; then how="joined again"; else how="its TCP connection survived, no new Join"; fi
echo "(a) short cut ($held s): $(outcome "$from"); agent-4 back ($how), its updates accepted"

# A long outage: longer than TCP's retransmission budget (tcp_retries2; the
# default 15 is ~15 minutes, here 3 is ~3 s in the namespaces of agent-4 and
# the coordinator). Both ends drop the connection; agent-4 reconnects with
# backoff and joins again once the link is back.
step "a long outage, beyond TCP's retransmission budget"
for s in agent-4 coordinator; do
    fed exec "$s" sh -c 'echo 3 > /proc/sys/net/ipv4/tcp_retries2' || fail "cannot set tcp_retries2"
done
j0=$(joins)
# a disconnect of this cut: the short one may have had its own (the agent
# drops a coordinator silent for 3 heartbeats: coordinator_silent)
d0=$(count "event=disconnected" "$LOG/agent-4.log")
a4_gone() { [ "$(count "event=disconnected" "$LOG/agent-4.log")" -gt "$d0" ]; }
wait_gone() { wait_for 30 a4_gone || fail "agent-4 did not notice the long cut"; }
cut_agent4 2 wait_gone
committed_during=$(commits 1)
a4_back() { [ "$(joins)" -gt "$j0" ]; }
wait_for 20 a4_back || fail "agent-4 did not join again after the long cut"
wait_for 20 a4_accepted "$back_line" || fail "no update of agent-4 accepted after it joined again"
[ "$(count "event=join .*name=agent-4 " "$C")" -ge 2 ] || fail "the coordinator saw agent-4 join only once"
echo "(a) long cut ($held s): $(outcome "$from"); agent-4 disconnected, joined again, its updates accepted"
[ "$committed_during" -lt "$ROUNDS" ] || fail "the job finished during the cut; make it longer"

# `docker compose restart coordinator`: SIGTERM, the state volume stays.
step "\`docker compose restart coordinator\`: SIGTERM, the state volume stays"
before_restart=$(commits 1)
[ "$before_restart" -lt "$ROUNDS" ] || fail "the job finished before the restart; make it longer"
restart_line=$(wc -l < "$C")
r0=$(now)
fed restart coordinator > "$t/restart.log" 2>&1 || fail "restart coordinator: $(cat "$t/restart.log")"
restart_s=$(elapsed "$r0")
tail -n +"$restart_line" "$C" | grep -q "event=job_resumed job=1 .*state=running" ||
    fail "the restarted coordinator did not resume job 1"
wait_for 60 finished 1 || fail "job 1 did not finish after the restart ($(commits 1) commits)"

# Nothing lost: rounds 1..R committed, each exactly once, across the cut and
# the restart; sflctl (in its own namespace, as `docker compose run ctl`)
# agrees.
step "Nothing lost: rounds 1..R committed, each exactly once, across the cut and"
grep "event=round_committed job=1 " "$C" | sed 's/.* round=\([0-9]*\) .*/\1/' > "$t/rounds"
seq 1 $ROUNDS | cmp -s - "$t/rounds" ||
    fail "committed rounds are not 1..$ROUNDS exactly once: $(tr '\n' ' ' < "$t/rounds")"
fed ctl jobs > "$t/jobs.out" 2>&1 || fail "sflctl jobs: $(cat "$t/jobs.out")"
grep -Eq "^1 +cut +fediterht +finished +$ROUNDS/$ROUNDS " "$t/jobs.out" || fail "sflctl jobs: $(cat "$t/jobs.out")"
fed ctl agents > "$t/agents.out" 2>&1 || fail "sflctl agents: $(cat "$t/agents.out")"
[ "$(grep -Ec '^[0-9]+ +agent-[1-4] +yes ' "$t/agents.out")" -eq 4 ] || fail "sflctl agents: $(cat "$t/agents.out")"
echo "(a) job 1: rounds 1..$ROUNDS committed once each ($before_restart before the coordinator restart, which took $restart_s s until healthy, the rest after); 4 agents connected ($(elapsed "$T0") s so far)"

# Identities under scaling: a restarted agent keeps its name and shard; a
# fifth agent finds all 4 shards claimed and waits; when agent-2 stops, its
# lease expires and agent-5 takes its shard over, with its own certificate.
shard_of() { sed -n 's/.* \(claimed\|keeps\|took over\) shard \([0-9]*\) .*/\2/p' "$LOG/$1.log" | tail -n 1; }
s1=$(shard_of agent-1)
fed restart agent-1
wait_for 10 grep -q "agent agent-1: keeps shard $s1\$" "$LOG/agent-1.log" || fail "restarted agent-1 did not keep shard $s1"
fed scale 5
wait_for 10 grep -q "all 4 shards are claimed" "$LOG/agent-5.log" || fail "agent-5 did not wait for a shard"
s2=$(shard_of agent-2)
fed stop agent-2
wait_for 20 grep -q "agent agent-5: took over shard $s2 " "$LOG/agent-5.log" ||
    fail "agent-5 did not take over agent-2's shard $s2"
wait_for 10 grep -q "event=join .*name=agent-5 " "$C" || fail "agent-5 did not join"
echo "(a) scaling: restarted agent-1 kept shard $s1; agent-5 waited, then took over shard $s2 of the stopped agent-2 and joined as agent-5"

# ---- (b) WAN emulation ---------------------------------------------------------------
# The wall time per round of a job from the coordinator's log: first to last
# commit over the rounds in between, split into round open -> commit (task
# out, training, updates in) and commit -> next open (selection: gathering
# subscribers), and the agents per round.
per_round() { # JOB
    grep -E "event=round_(open|committed) job=$1 " "$C" | awk '
        function t(  a) { split(substr($1, 15, 12), a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        / event=round_open / { o = t(); if (c) { gap += o - c; ng++ } }
        / event=round_committed / {
            c = t(); if (!n) first = c; last = c; n++; run += c - o
            match($0, / accepted=[0-9]+/); acc += substr($0, RSTART + 10, RLENGTH - 10) }
        END {
            if (n < 2 || !ng) { print "?"; exit }
            printf "%.0f ms per round (open -> commit %.0f ms, commit -> next open %.0f ms, %.1f agents per round)",
                (last - first) * 1000 / (n - 1), run * 1000 / n, gap * 1000 / ng, acc / n }'
}
job() { # ID NAME ROUNDS COHORT: a job whose full selection is COHORT agents; wait for it
    cat > "$t/job-$2.ini" <<EOF
[job $2]
algo = fediterht
features = 300
tau = 8
local_steps = 5
lr = 0.1
batch = 100
rounds = $3
cohort = $4
overselect = 0
min_quorum = 3
deadline_ms = 20000
seed = 5
EOF
    s=$(now)
    fed ctl job create "$t/job-$2.ini" > "$t/ctl.out" 2>&1 || fail "sflctl job create: $(cat "$t/ctl.out")"
    grep -q "^job $1 $2: running" "$t/ctl.out" || fail "sflctl job create: $(cat "$t/ctl.out")"
    wait_for 90 finished "$1" || fail "job $1 ($2) did not finish ($(commits "$1") commits)"
    echo "job $1 ($2, cohort $4 of 4): $3 rounds in $(elapsed "$s") s, $(per_round "$1")"
}
# Median TCP connect time agent-1 -> coordinator (one SYN/SYN-ACK round trip).
rtt() {
    # shellcheck disable=SC2016 # expanded by bash in the namespace
    fed exec agent-1 bash -c 'for i in 1 2 3 4 5; do
        s=$(date +%s%N); exec 3<>/dev/tcp/coordinator/7443; e=$(date +%s%N); exec 3>&-
        echo $(((e - s) / 1000)); done' | sort -n | awk 'NR == 3 { printf "%.1f", $1 / 1000 }'
}
R2=20
if [ $netem = 1 ] || command -v python3 > /dev/null 2>&1; then
    echo "(b) no delay: TCP connect RTT $(rtt) ms"
    echo "(b) $(job 2 lan4 $R2 4)"
    echo "(b) $(job 3 lan3 $R2 3)"
    fed netem 75ms 1% > "$t/netem.out" 2>&1 || fail "netem: $(cat "$t/netem.out")"
    case $(cat "$t/netem.out") in
    *"netem (tc)"*) how="tc netem" ;;
    *) how="this kernel has no sch_netem: the script's userspace switch, same semantics" ;;
    esac
    echo "(b) delay 75ms loss 1% on every service link ($how): TCP connect RTT $(rtt) ms"
    echo "(b) $(job 4 wan4 $R2 4)"
    echo "(b) $(job 5 wan3 $R2 3)"
    fed netem off > /dev/null 2>&1
else
    echo "(b) SKIP: tc netem is unavailable here (no sch_netem) and there is no python3 for the userspace switch"
fi

# ---- (c) the compose file describes the same services --------------------------------
step "(c) the compose file describes the same services"
if command -v docker-compose >/dev/null 2>&1; then
    (cd "$ROOT" && docker-compose -f docker-compose.yml --profile tools config) > "$t/compose.yml" 2> "$t/compose.err" ||
        fail "docker-compose config: $(cat "$t/compose.err")"
    for s in pki data coordinator agent; do
        # each service's command is the role this test ran
        awk -v s="  $s:" '$0 == s { f = 1; next } f && /^  [a-z]/ { f = 0 } f' "$t/compose.yml" |
            grep -A1 "^    command:" | grep -q "^    - $s\$" || fail "compose service $s does not run role $s"
    done
    grep -q "sfl-entrypoint" "$t/compose.yml" || fail "compose: no ctl entrypoint"
    echo "(c) docker-compose $(docker-compose version --short 2>/dev/null) config: valid, services run the roles used here"
else
    echo "(c) SKIP: docker-compose not installed (apt-get install docker-compose)"
fi
fed down > /dev/null 2>&1
[ -z "$(ip netns list | grep "^sfle2e$$-" || true)" ] || fail "namespaces left after down"
[ ! -e "/etc/netns/sfle2e$$-coordinator" ] || fail "/etc/netns entries left after down"
echo "netns e2e: ok in $(elapsed "$T0") s"
