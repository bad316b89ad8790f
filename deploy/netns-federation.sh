#!/bin/sh
# netns-federation.sh: the services of docker-compose.yml as real processes,
# one network namespace per service, without a container engine.
#
# Same topology as the compose file: one-shot pki and data, the coordinator,
# N agents, each in its own network namespace with a veth to a bridge (in a
# namespace of its own), addresses $SFL_NETNS_SUBNET.0/24, service names in
# /etc/netns/NS/hosts (which `ip netns exec` mounts over /etc/hosts). Each
# service runs deploy/docker/entrypoint.sh, the image's entrypoint, with the
# compose volumes as directories under $SFL_NETNS_DIR. Needs root and
# iproute2; netem uses tc's sch_netem, or without it a userspace switch in
# python3 with the same delay and loss. docs/docker.md.
set -eu

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${SFL_NETNS_PREFIX:-sflfed}
DIR=${SFL_NETNS_DIR:-/run/sfl-netns}
BIN=${SFL_BIN:-$ROOT/build}
SUBNET=${SFL_NETNS_SUBNET:-10.77.0}
ENTRY=$ROOT/deploy/docker/entrypoint.sh
NETNS=$PREFIX-net
STOP_S=${SFL_NETNS_STOP_S:-15}

usage() {
    cat <<EOF
Usage: $PROG COMMAND [ARGS]

  up N              start pki and data (one-shot), the coordinator (waits until
                    healthy) and agents agent-1..agent-N; a previous run's
                    namespaces and processes are removed first, its volumes kept
  run N             up N, then wait; Ctrl-C or SIGTERM runs down
  down [-v]         stop every service, delete namespaces, links and
                    /etc/netns entries; -v also removes the volumes ($DIR)
  scale N           start or stop agents until there are N
  stop|start|restart SERVICE
                    like docker compose stop/start/restart (volumes kept)
  exec SERVICE CMD...  run CMD in SERVICE's namespace with its environment
  ctl ARGS...       sflctl as the admin (docker compose run --rm ctl ARGS)
  cut SERVICE       take SERVICE's link down (at the bridge)
  restore SERVICE   bring it back up
  netem DELAY LOSS  delay and loss on every service's veth: e.g. 75ms 1% (an
                    RTT of 2 x DELAY between two services); tc netem, or a
                    userspace switch when the kernel has no sch_netem
                    (SFL_NETEM=tc|user forces one); 'netem off' removes it
  status            services, addresses, processes
  logs SERVICE      the service's output

Environment: SFL_NETNS_DIR (volumes, logs; default /run/sfl-netns),
SFL_NETNS_PREFIX (namespace names; default sflfed), SFL_NETNS_SUBNET
(default 10.77.0), SFL_BIN (programs; default build/ of this tree), and the
SFL_* settings of docker-compose.yml (SFL_SHARDS, SFL_JOB_ROUNDS, ...;
SFL_INPUT is a host path here).
EOF
}

die() {
    echo "$PROG: $*" >&2
    exit 1
}
say() { echo "$PROG: $*" >&2; }

ns() { echo "$PREFIX-$1"; }
have_ns() { ip netns list | awk '{ print $1 }' | grep -qx "$1"; }
our_namespaces() { ip netns list | awk '{ print $1 }' | grep "^$PREFIX-" || true; }

# Services and their addresses: coordinator .2, pki .3, data .4, ctl .5,
# agent-i .(10 + i).
addr() {
    case $1 in
    coordinator) echo "$SUBNET.2" ;;
    pki) echo "$SUBNET.3" ;;
    data) echo "$SUBNET.4" ;;
    ctl) echo "$SUBNET.5" ;;
    agent-*)
        ad_i=${1#agent-}
        case $ad_i in '' | *[!0-9]*) die "bad service '$1'" ;; esac
        if [ "$ad_i" -lt 1 ] || [ "$ad_i" -gt 240 ]; then die "agents are numbered 1..240"; fi
        echo "$SUBNET.$((10 + ad_i))"
        ;;
    *) die "unknown service '$1' (coordinator, pki, data, ctl, agent-N)" ;;
    esac
}

# /etc/hosts of every service namespace: every service with an address.
# (Shell functions share variables: each function uses its own names.)
write_hosts() {
    wh_f=$DIR/hosts
    {
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        for wh_n in $(our_namespaces); do
            wh_s=${wh_n#"$PREFIX"-}
            case $wh_s in net | pki | data) ;; *) echo "$(addr "$wh_s") $wh_s" ;; esac
        done
    } >"$wh_f.tmp"
    mv -f "$wh_f.tmp" "$wh_f"
    for wh_n in $(our_namespaces); do
        case $wh_n in "$NETNS" | "$(ns pki)" | "$(ns data)") continue ;; esac
        mkdir -p "/etc/netns/$wh_n"
        cp "$wh_f" "/etc/netns/$wh_n/hosts"
    done
}

bridge_up() {
    have_ns "$NETNS" && return 0
    ip netns add "$NETNS"
    ip -n "$NETNS" link set lo up
    ip -n "$NETNS" link add br0 type bridge
    ip -n "$NETNS" link set br0 up
}

# The namespace of service $1, its veth pair (eth0 inside, v-$1 on the
# bridge) and its address. pki and data have only loopback, as with
# `network_mode: none` in docker-compose.yml.
link_up() {
    lu_n=$(ns "$1")
    have_ns "$lu_n" && return 0
    lu_a=$(addr "$1")
    bridge_up
    ip netns add "$lu_n"
    ip -n "$lu_n" link set lo up
    case $1 in pki | data) return 0 ;; esac
    ip -n "$NETNS" link add "v-$1" type veth peer name eth0 netns "$lu_n"
    ip -n "$NETNS" link set "v-$1" master br0 up
    ip -n "$lu_n" addr add "$lu_a/24" dev eth0
    ip -n "$lu_n" link set eth0 up
    write_hosts
    if [ -s "$DIR/netem" ]; then
        # shellcheck disable=SC2046 # MODE DELAY LOSS
        set -- $(cat "$DIR/netem")
        if [ "$1" = tc ]; then netem_on "$lu_n" "$2" "$3"; else wan_start "$2" "$3"; fi
    fi
}

link_down() {
    ld_n=$(ns "$1")
    have_ns "$ld_n" || return 0
    ip netns del "$ld_n"
    rm -rf "/etc/netns/$ld_n"
    write_hosts
    if [ -s "$DIR/netem" ]; then
        # shellcheck disable=SC2046 # MODE DELAY LOSS
        set -- $(cat "$DIR/netem")
        [ "$1" = tc ] || wan_start "$2" "$3" # without the port that is gone
    fi
}

netem_on() { # NS DELAY LOSS
    ip netns exec "$1" tc qdisc replace dev eth0 root netem delay "$2" loss "$3"
}

# Without sch_netem: the bridge's ports leave br0 and a python3 switch in the
# bridge's namespace forwards every frame between them after DELAY, dropping
# LOSS of them: what netem does on each service's egress (one delay and one
# loss chance per frame). PACKET_VNET_HDR keeps TSO/GSO frames whole.
WAN_PY='
import heapq, random, select, socket, sys, time
SOL_PACKET, PACKET_VNET_HDR, ETH_P_ALL, HDR = 263, 15, 3, 10
def ms(v):
    for suffix, k in (("ms", 1.0), ("us", 1e-3), ("s", 1e3)):
        if v.endswith(suffix):
            return float(v[: -len(suffix)]) * k
    return float(v)
delay, loss = ms(sys.argv[1]) / 1e3, float(sys.argv[2].rstrip("%")) / 100
ports, where, due, seq, rng = {}, {}, [], 0, random.Random()
poll = select.poll()
for name in sys.argv[3:]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.bind((name, ETH_P_ALL))
    s.setblocking(False)
    ports[s.fileno()] = s
    poll.register(s.fileno(), select.POLLIN)
print("wan: %d ports, delay %.1f ms, loss %.2f %%" % (len(ports), delay * 1e3, loss * 100), flush=True)
while True:
    now = time.monotonic()
    while due and due[0][0] <= now:
        out, data = heapq.heappop(due)[2:]
        try:
            out.send(data)
        except OSError:
            pass  # the port is down (cut): the frame is lost
    wait = None if not due else max(0, int((due[0][0] - now) * 1e3) + 1)
    for fd, _ in poll.poll(wait):
        s = ports[fd]
        while True:
            try:
                data, addr = s.recvfrom(262144)
            except OSError:
                break
            if addr[2] == socket.PACKET_OUTGOING or len(data) < HDR + 14:
                continue
            dst, src = data[HDR:HDR + 6], data[HDR + 6:HDR + 12]
            where[src] = s
            if rng.random() < loss:
                continue
            if dst in where and not dst[0] & 1:
                outs = [where[dst]] if where[dst] is not s else []
            else:
                outs = [o for o in ports.values() if o is not s]
            t = time.monotonic() + delay
            for o in outs:
                seq += 1
                heapq.heappush(due, (t, seq, o, data))
'

ports() { # the bridge-side ends of the service links
    ip -n "$NETNS" -o link show type veth 2>/dev/null | sed -n 's/^[0-9]*: \(v-[^@:]*\).*/\1/p'
}

wan_stop() {
    if ws_p=$(cat "$DIR/run/wan.pid" 2>/dev/null); then
        kill "$ws_p" 2>/dev/null || true
        rm -f "$DIR/run/wan.pid"
    fi
    for ws_v in $(ports); do ip -n "$NETNS" link set "$ws_v" master br0 2>/dev/null || true; done
}

wan_start() { # DELAY LOSS: (re)start the userspace switch over every port
    wan_stop
    ws_py=$(command -v /usr/bin/python3 || command -v python3) || die "the userspace netem needs python3"
    # shellcheck disable=SC2046
    set -- "$1" "$2" $(ports)
    for ws_v in $(ports); do ip -n "$NETNS" link set "$ws_v" nomaster; done
    mkdir -p "$DIR/logs" "$DIR/run"
    setsid ip netns exec "$NETNS" "$ws_py" -c "$WAN_PY" "$@" >"$DIR/logs/wan.log" 2>&1 </dev/null &
    echo $! >"$DIR/run/wan.pid"
    ws_t=0
    until grep -q "^wan: $(($# - 2)) ports" "$DIR/logs/wan.log" 2>/dev/null; do
        kill -0 "$(cat "$DIR/run/wan.pid")" 2>/dev/null || die "the userspace netem failed: $(tail -3 "$DIR/logs/wan.log")"
        ws_t=$((ws_t + 1))
        [ $ws_t -le 100 ] || die "the userspace netem did not start"
        sleep 0.1
    done
}

# The environment the entrypoint gets in service $1: the compose volumes as
# directories; everything else (SFL_JOB_*, SFL_SHARDS, ...) is inherited.
svc_env() {
    mkdir -p "$DIR/run/$1" "$DIR/vol"
    echo "SFL_BIN_DIR=$BIN"
    echo "SFL_PKI_TOOL=$ROOT/deploy/pki/sfl-pki"
    echo "SFL_PKI_DIR=$DIR/vol/pki"
    echo "SFL_DATA_DIR=$DIR/vol/data"
    echo "SFL_STATE_DIR=$DIR/vol/coordinator-state"
    echo "SFL_AGENT_STATE_DIR=$DIR/vol/$1"
    echo "SFL_RUN_DIR=$DIR/run/$1"
    echo "TMPDIR=$DIR/run/$1"
    # A container's hostname: what the agent's name is made from.
    case $1 in agent-*) echo "SFL_AGENT_NAME=$1" ;; esac
}

in_svc() { # SERVICE CMD...: CMD in the service's namespace and environment
    is_s=$1
    shift
    have_ns "$(ns "$is_s")" || die "service $is_s is not up"
    # shellcheck disable=SC2046 # one VAR=value word per line, no spaces
    ip netns exec "$(ns "$is_s")" env $(svc_env "$is_s") "$@"
}

pidfile() { echo "$DIR/run/$1.pid"; }
running() {
    rn_p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
    kill -0 "$rn_p" 2>/dev/null
}

# A long-running service in the background, detached (its own session).
start_svc() {
    running "$1" && return 0
    link_up "$1"
    mkdir -p "$DIR/logs"
    case $1 in
    coordinator) st_role=coordinator ;;
    agent-*) st_role=agent ;;
    *) die "$1 is not long-running" ;;
    esac
    # shellcheck disable=SC2046
    setsid ip netns exec "$(ns "$1")" env $(svc_env "$1") sh "$ENTRY" "$st_role" \
        >>"$DIR/logs/$1.log" 2>&1 </dev/null &
    echo $! >"$(pidfile "$1")"
}

# A one-shot service in the foreground; it must succeed
# (service_completed_successfully).
oneshot() {
    link_up "$1"
    mkdir -p "$DIR/logs"
    in_svc "$1" sh "$ENTRY" "$1" >>"$DIR/logs/$1.log" 2>&1 ||
        die "$1 failed: $(tail -5 "$DIR/logs/$1.log")"
}

wait_healthy() { # the coordinator's healthcheck, bounded
    wh_t=0
    until in_svc coordinator sh "$ENTRY" health coordinator >/dev/null 2>&1; do
        running coordinator || die "the coordinator exited: $(tail -5 "$DIR/logs/coordinator.log")"
        wh_t=$((wh_t + 1))
        [ $wh_t -le 300 ] || die "the coordinator is not healthy after 30 s"
        sleep 0.1
    done
}

# SIGTERM, then SIGKILL after STOP_S seconds (stop_grace_period); then any
# process still in the namespace (an agent's lease refresher, ...).
stop_svc() {
    if ss_p=$(cat "$(pidfile "$1")" 2>/dev/null) && kill -0 "$ss_p" 2>/dev/null; then
        kill -TERM "$ss_p" 2>/dev/null || true
        ss_t=0
        while kill -0 "$ss_p" 2>/dev/null && [ $ss_t -lt $((STOP_S * 10)) ]; do
            sleep 0.1
            ss_t=$((ss_t + 1))
        done
        kill -KILL "$ss_p" 2>/dev/null || true
    fi
    rm -f "$(pidfile "$1")"
    kill_ns "$(ns "$1")"
}

# Whatever still runs in namespace $1: all of it was started here.
kill_ns() {
    have_ns "$1" || return 0
    for kn_p in $(ip netns pids "$1" 2>/dev/null); do kill -KILL "$kn_p" 2>/dev/null || true; done
}

agents() { # running agents' numbers, ascending
    for ag_n in $(our_namespaces); do
        case $ag_n in "$PREFIX"-agent-*) echo "${ag_n#"$PREFIX"-agent-}" ;; esac
    done | sort -n
}

cmd_down() {
    # Dependents first, as docker compose down: agents, then the coordinator.
    for dn_k in $(agents); do stop_svc "agent-$dn_k"; done
    for dn_n in $(our_namespaces); do
        dn_s=${dn_n#"$PREFIX"-}
        [ "$dn_s" = net ] || stop_svc "$dn_s"
    done
    for dn_n in $(our_namespaces); do
        kill_ns "$dn_n"
        ip netns del "$dn_n" 2>/dev/null || true
        rm -rf "/etc/netns/$dn_n"
    done
    # /etc/netns entries of namespaces that are already gone
    for dn_d in /etc/netns/"$PREFIX"-*; do
        [ -e "$dn_d" ] && rm -rf "$dn_d"
    done
    rmdir /etc/netns 2>/dev/null || true
    rm -f "$DIR"/run/*.pid "$DIR/netem" "$DIR/hosts" 2>/dev/null || true
    if [ "${1:-}" = -v ]; then
        rm -rf "$DIR"
    fi
    return 0
}

cmd_scale() {
    want=$1
    case $want in '' | *[!0-9]*) die "scale: N must be a number" ;; esac
    [ "$want" -le 240 ] || die "at most 240 agents"
    k=1
    while [ $k -le "$want" ]; do
        start_svc "agent-$k"
        k=$((k + 1))
    done
    for k in $(agents); do
        if [ "$k" -gt "$want" ]; then
            stop_svc "agent-$k"
            link_down "agent-$k"
        fi
    done
}

cmd_up() {
    [ $# -eq 1 ] || die "usage: $PROG up N"
    cmd_down
    mkdir -p "$DIR/run" "$DIR/logs" "$DIR/vol"
    # A failure half-way leaves nothing behind but the volumes and logs.
    trap 'cmd_down' EXIT
    trap 'exit 130' INT TERM
    oneshot pki
    oneshot data
    start_svc coordinator
    wait_healthy
    cmd_scale "$1"
    trap - EXIT INT TERM
    say "up: coordinator $(addr coordinator):7443 and $1 agents; logs in $DIR/logs"
}

cmd_status() {
    for cs_n in $(our_namespaces); do
        cs_s=${cs_n#"$PREFIX"-}
        [ "$cs_s" = net ] && continue
        if running "$cs_s"; then cs_st="running pid $(cat "$(pidfile "$cs_s")")"; else cs_st="not running"; fi
        case $cs_s in
        pki | data) cs_l=none cs_a=- ;;
        *)
            cs_a=$(addr "$cs_s") cs_l=down
            if ip -n "$NETNS" -o link show "v-$cs_s" 2>/dev/null | grep -q "[<,]UP[,>]"; then cs_l=up; fi
            ;;
        esac
        printf '%-12s %-14s link %-4s %s\n' "$cs_s" "$cs_a" "$cs_l" "$cs_st"
    done
}

[ $# -ge 1 ] || {
    usage >&2
    exit 2
}
cmd=$1
shift
case $cmd in
-h | --help | help)
    usage
    exit 0
    ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
command -v ip >/dev/null 2>&1 || die "needs ip (iproute2)"
[ -x "$BIN/sfl-coordinator" ] || die "no $BIN/sfl-coordinator (run make, or set SFL_BIN)"
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
case $DIR$BIN$ROOT in *[[:space:]]*) die "SFL_NETNS_DIR, SFL_BIN and the tree's path must not contain spaces" ;; esac

case $cmd in
up) cmd_up "$@" ;;
run)
    cmd_up "$@"
    trap 'cmd_down' EXIT
    trap 'exit 0' INT TERM
    say "running; Ctrl-C stops"
    while :; do sleep 1; done
    ;;
down) cmd_down "$@" ;;
scale)
    [ $# -eq 1 ] || die "usage: $PROG scale N"
    cmd_scale "$1"
    ;;
stop)
    addr "$1" >/dev/null
    stop_svc "$1"
    ;;
start)
    addr "$1" >/dev/null
    start_svc "$1"
    [ "$1" != coordinator ] || wait_healthy
    ;;
restart)
    addr "$1" >/dev/null
    stop_svc "$1"
    start_svc "$1"
    [ "$1" != coordinator ] || wait_healthy
    ;;
exec)
    [ $# -ge 2 ] || die "usage: $PROG exec SERVICE CMD..."
    in_svc "$@"
    ;;
ctl)
    link_up ctl
    in_svc ctl sh "$ENTRY" ctl "$@"
    ;;
cut | restore)
    [ $# -eq 1 ] || die "usage: $PROG $cmd SERVICE"
    addr "$1" >/dev/null
    have_ns "$(ns "$1")" || die "service $1 is not up"
    if [ "$cmd" = cut ]; then st=down; else st=up; fi
    ip -n "$NETNS" link set "v-$1" "$st"
    ;;
netem)
    [ $# -ge 1 ] || die "usage: $PROG netem DELAY LOSS | off"
    have_ns "$NETNS" || die "the federation is not up"
    if [ "$1" = off ]; then
        rm -f "$DIR/netem"
        wan_stop
        for n in $(our_namespaces); do
            ip netns exec "$n" tc qdisc del dev eth0 root 2>/dev/null || true
        done
        exit 0
    fi
    [ $# -eq 2 ] || die "usage: $PROG netem DELAY LOSS (e.g. 75ms 1%)"
    case $1 in *[!0-9.a-z]* | '') die "bad DELAY '$1' (e.g. 75ms)" ;; esac
    case $2 in *[!0-9.%]* | '') die "bad LOSS '$2' (e.g. 1%)" ;; esac
    mode=${SFL_NETEM:-}
    if [ -z "$mode" ]; then
        mode=user
        if ip netns exec "$NETNS" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
            ip netns exec "$NETNS" tc qdisc del dev lo root
            mode=tc
        fi
    fi
    wan_stop
    for n in $(our_namespaces); do
        ip netns exec "$n" tc qdisc del dev eth0 root 2>/dev/null || true
    done
    case $mode in
    tc)
        for n in $(our_namespaces); do
            case $n in "$NETNS" | "$(ns pki)" | "$(ns data)") continue ;; esac
            netem_on "$n" "$1" "$2" || die "tc netem failed (is sch_netem available? SFL_NETEM=user avoids it)"
        done
        ;;
    user) wan_start "$1" "$2" ;;
    *) die "SFL_NETEM must be tc or user" ;;
    esac
    echo "$mode $1 $2" >"$DIR/netem"
    say "netem ($mode): delay $1, loss $2 on every service link"
    ;;
status) cmd_status ;;
logs)
    [ $# -eq 1 ] || die "usage: $PROG logs SERVICE"
    cat "$DIR/logs/$1.log"
    ;;
*)
    usage >&2
    exit 2
    ;;
esac
