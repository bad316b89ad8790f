#!/bin/sh
# Coordinator under many concurrent agents on loopback.
#
#   [N=agents] [SECS=s] [RATE=r] [PROCS=p] [COHORT=c] [DESTS=k] [TICKETS=s] \
#       bench/bench_load.sh [BUILD] [--quick] [--restart]
#
# A coordinator runs one FedIter-HT job (d = 100, cohort COHORT (100),
# over-selection 10 % (--quick: none, as 100 agents cannot fill 110
# places), quorum 80 % of the cohort) while bench/loadgen holds N agents
# (1000; --quick 100) in PROCS processes (1): real client-agent state
# machines over mutual TLS that Join, Subscribe, train their task and
# submit sealed, signed updates, started at RATE a second (500). After the
# run (SECS, 60; --quick 25 s) one line is printed:
#   bench_load agents=N cohort=C joined=... all_joined_ms=... rounds=...
#              rounds_per_min=... coord_peak_rss_kb=... rss_per_agent_kb=...
#              coord_rss_kb=... rss_now_per_agent_kb=...
#              commit_to_next_task_ms=... update_to_commit_ms=...
#              loadgen_rss_kb=... coord_cpu_s=... loadgen_cpu_s=...
#              other_cpu_s=...
# all_joined_ms is the time from the load generator's first agent start to
# the coordinator's N-th join (-1: not all joined); rss_per_agent_kb the
# peak RSS (VmHWM, the join storm's transient state included) over N;
# coord_rss_kb the RSS (VmRSS) in the last second before the agents stop,
# all connected and the job running, and rss_now_per_agent_kb that over N;
# rounds_per_min counts rounds committed after the last agent joined;
# commit_to_next_task_ms is the median time from a round's last accepted
# update to the next round's round_open line (its tasks are
# sent in the same loop turn), update_to_commit_ms the part of it up to
# round_committed (aggregation on the thread pool and the SQLite commit).
# Both come from the coordinator's log timestamps (millisecond
# resolution). Peak RSS is the coordinator's VmHWM; the CPU seconds are
# user + system of the coordinator and of the load generator (children
# included); other_cpu_s what the rest of the machine used meanwhile (the
# certificates loadgen issues are counted in loadgen_cpu_s: about N / 400 s;
# the coordinator's before the load generator started in coord_cpu_s). A
# busy machine makes the figures meaningless: check other_cpu_s.
#
# --restart: once all N agents joined and 5 s passed, the coordinator is
# killed (kill -9) and started again on the same state; a second line
#   bench_load_restart agents=N rejoined=... all_rejoined_ms=...
#              first_commit_ms=... coord_peak_rss_kb=...
# gives the time from the restart to the N-th Join of the new process and
# to its first committed round (-1: not within the run; SECS should leave
# room, e.g. 60), and
#   bench_load_rejoin_curve 1s=... 2s=... ...
# the agents rejoined by the end of each second after the restart.
#
# Above 20,000 agents (or with DESTS=k > 1) the coordinator listens on
# 0.0.0.0 and agent i connects to 127.0.0.(1 + i mod k), k = N / 20,000
# rounded up: loopback offers ~28,000 ephemeral ports per destination
# address (net.ipv4.ip_local_port_range 32768-60999). Every process holds
# one descriptor per connection: the script raises `ulimit -n` to N + 200
# (fs.nr_open must allow it: 1048576 by default), and, run as root with
# N > 20,000, vm.max_map_count to 2 N + 65530 for the run (each HTTP/2
# session maps its frame buffer on pages of its own, in the coordinator
# and in the load generator), restoring it on exit. The listen backlog is
# the transport's 4096 (net.core.somaxconn 4096 on Debian 12); agents are
# started at RATE a second, so a storm waits there, not in SYN retries.
#
# The agents keep their TLS session in memory, and the coordinator's ticket
# keys are in state_dir: the restarted coordinator resumes the agents'
# sessions (no certificate sent or verified). TICKETS=0 turns tickets off
# (tls_ticket_lifetime = 0) for the full-handshake baseline.
#
# KEEP=DIR keeps the logs there. Bounded: about SECS + 30 s (+ N / 200 s for
# the certificates and the agents' setup) at most.
set -eu
B=build
N=${N:-1000}
SECS=${SECS:-60}
RATE=${RATE:-500}
PROCS=${PROCS:-1}
COHORT=${COHORT:-100}
DESTS=${DESTS:-$(((N + 19999) / 20000))}
# TLS resumption ticket lifetime (s); TICKETS=0: every (re)join is a full
# handshake, the code path before tickets (the baseline of --restart)
TICKETS=${TICKETS:-43200}
OVERSEL=0.1
RESTART=0
for a in "$@"; do
    case $a in
    --quick) N=100 SECS=25 OVERSEL=0 ;;
    --restart) RESTART=1 ;;
    -*) echo "usage: $0 [BUILD] [--quick] [--restart]" >&2; exit 2 ;;
    *) B=$a ;;
    esac
done
ROOT=$(pwd)
t=$(mktemp -d)
coord=""
lg=""
maps=""
cleanup() {
    for p in $lg $coord; do kill -9 "$p" 2>/dev/null || true; done
    [ -z "$maps" ] || sysctl -qw vm.max_map_count="$maps" || true
    [ -z "${KEEP:-}" ] || cp "$t"/*.log "$t"/loadgen.* "$KEEP"/ 2>/dev/null || true
    rm -rf "$t"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "bench_load: $*" >&2
    [ ! -f "$t/coord.log" ] || tail -5 "$t/coord.log" >&2
    exit 1
}
# UTC milliseconds of the day, as the coordinator's log timestamps give.
now_ms() { echo $(($(date +%s%3N) % 86400000)); }
# user + system seconds of a process and its waited-for children
cpu_s() { awk '{ printf "%.1f", ($14 + $15 + $16 + $17) / 100 }' "/proc/$1/stat"; }
# busy seconds of the whole machine (all CPUs), to tell other load apart
busy_s() { awk '/^cpu / { printf "%.1f", ($2 + $3 + $4 + $7 + $8) / 100 }' /proc/stat; }

# The coordinator holds one descriptor per connection, each load generator
# process one per agent: N + 200 open files for the coordinator, whose hard
# limit (`ulimit -Hn`) only CAP_SYS_RESOURCE may raise; with fewer the run
# stops here and says so. (dash and bash both have ulimit -n.)
need=$((N + 200))
# shellcheck disable=SC3045
nofile=$(ulimit -n)
if [ "$nofile" != unlimited ] && [ "$nofile" -lt $need ]; then
    # shellcheck disable=SC3045
    ulimit -n $need 2>/dev/null ||
        fail "the open files limit $nofile (hard: $(ulimit -Hn)) is below the $need descriptors of N=$N agents; raise the hard limit (root with CAP_SYS_RESOURCE: prlimit --nofile=$need:$need, or LimitNOFILE) or take N below $((nofile - 200))"
fi
if [ "$N" -gt 20000 ] && [ "$(id -u)" = 0 ]; then
    m=$(cat /proc/sys/vm/max_map_count)
    if [ "$m" -lt $((2 * N + 65530)) ]; then
        sysctl -qw vm.max_map_count=$((2 * N + 65530)) && maps=$m
    fi
fi
[ "$DESTS" -le 1 ] || [ $((DESTS * 25000)) -ge "$N" ] ||
    fail "DESTS=$DESTS addresses cannot carry $N connections (~28,000 ports each)"

# loadgen is built by the Makefile (`make bench`).
[ -x "$B/bench/loadgen" ] || make --no-print-directory "$B/bench/loadgen" > /dev/null

port=$((20000 + $$ % 12000))
PKI="$ROOT/deploy/pki/sfl-pki"
"$PKI" init "$t/pki" > /dev/null
"$PKI" coordinator "$t/pki" coord > /dev/null
mkdir -p "$t/data" "$t/work" "$t/state"
"$B/sfl-sim" --data synth:sparse --clients 100 --samples 30 --dim 100 --support 5 --seed 7 \
    --dump-shards "$t/data"

cat > "$t/coordinator.ini" <<EOF
[coordinator]
listen = $([ "$DESTS" -le 1 ] && echo 127.0.0.1 || echo 0.0.0.0):$port
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
metrics_listen = off
max_agents = $((N + 100))
max_conns = $((N + 100))
max_handshakes = $((N + 100 < 512 ? N + 100 : 512))
# every agent of the load generator comes from 127.0.0.1: one address may
# hold every handshake slot, as before per-address caps
max_handshakes_per_ip = $((N + 100 < 512 ? N + 100 : 512))
admin_listen = off
tls_ticket_lifetime = $TICKETS
select_wait_ms = 500
tick_ms = 50
pace_min_ms = 200
idle_retry_ms = 1000

[job load]
algo = fediterht
features = 100
tau = 5
local_steps = 2
lr = 0.1
batch = 30
rounds = 1000000
cohort = $COHORT
overselect = $OVERSEL
min_quorum = $((COHORT * 4 / 5))
deadline_ms = 10000
seed = 7
EOF
PK=$("$B/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
start_coord() {  # LOG
    "$B/sfl-coordinator" --config "$t/coordinator.ini" >> "$1" 2>&1 &
    coord=$!
    n=300
    until grep -q "event=started" "$1" 2> /dev/null; do
        n=$((n - 1))
        [ $n -gt 0 ] || fail "the coordinator did not start"
        sleep 0.1
    done
}
start_coord "$t/coord.log"

"$B/bench/loadgen" --pki "$t/pki" --agents $N --coordinator 127.0.0.1:$port --coordinator-pk "$PK" \
    --data-dir "$t/data" --shards 100 --work "$t/work" --seconds $SECS \
    --rate $RATE --procs $PROCS --dests "$DESTS" > "$t/loadgen.out" 2> "$t/loadgen.err" &
lg=$!
busy0=$(busy_s)
# timeout(1) would not see the agents' graceful stop; the watchdog is here.
# loadgen issues N certificates first (~2 ms each, spread over its
# processes) and sets its agents up.
limit=$((SECS + 30 + N / 200))
deadline=$(($(date +%s) + limit))
restarted=""
n=0
while kill -0 $lg 2>/dev/null; do
    n=$((n + 1))
    [ "$(date +%s)" -le $deadline ] || fail "loadgen did not finish in $limit s"
    # the coordinator's RSS with the agents connected, once a second; the
    # last sample before they stop is reported (coord_rss_kb)
    if [ $((n % 10)) = 5 ] && [ -n "$coord" ]; then
        rssnow=$(awk '/^VmRSS:/ { print $2 }' "/proc/$coord/status" 2>/dev/null || true)
        [ -z "$rssnow" ] || [ -n "$restarted" ] || rsslast=$rssnow
    fi
    # (the log is counted once a second: it grows to megabytes)
    if [ $RESTART = 1 ] && [ -z "$restarted" ] && [ $((n % 10)) = 0 ]; then
        if [ -z "${alljoined:-}" ] && [ "$(grep -c "event=join " "$t/coord.log")" -ge $N ]; then
            alljoined=$(date +%s)
        fi
        if [ -n "${alljoined:-}" ] && [ "$(date +%s)" -ge $((alljoined + 5)) ]; then
            rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$coord/status")
            coordcpu=$(cpu_s $coord)
            kill -9 $coord
            wait $coord 2>/dev/null || true
            restarted=$(now_ms)
            start_coord "$t/coord2.log"
        fi
    fi
    sleep 0.1
done
wait $lg || fail "loadgen failed: $(cat "$t/loadgen.err")"
lg=""
busy1=$(busy_s)
if [ -n "$restarted" ]; then
    rss2=$(awk '/^VmHWM:/ { print $2 }' "/proc/$coord/status")
else
    rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$coord/status")
    coordcpu=$(cpu_s $coord)
fi
kill -TERM $coord
wait $coord || true
coord=""
[ $RESTART = 0 ] || [ -n "$restarted" ] || fail "not all $N agents joined: no restart"

lgrss=$(sed -n 's/.* rss_kb=\([0-9]*\).*/\1/p' "$t/loadgen.out")
lgcpu=$(sed -n 's/.* cpu_s=\([0-9.]*\).*/\1/p' "$t/loadgen.out")
start=$(sed -n 's/^loadgen: start_ms=\([0-9]*\)$/\1/p' "$t/loadgen.err")
# shellcheck disable=SC2016
AWKLIB='
function ms(line,   s) {  # ts=YYYY-MM-DDTHH:MM:SS.mmmZ -> ms of the day
    s = substr(line, index(line, "ts=") + 14, 12)
    return ((substr(s, 1, 2) * 60 + substr(s, 4, 2)) * 60 + substr(s, 7, 6)) * 1000
}
function since(t, t0) { return t == "" ? -1 : (t - t0 + 86400000) % 86400000 }
function field(line, k,   i, r) {
    i = index(line, " " k "=")
    if (!i) return ""
    r = substr(line, i + length(k) + 2)
    sub(/ .*/, "", r)
    return r
}'
awk -v n=$N -v rss="$rss" -v rssl="${rsslast:-0}" -v lgrss="$lgrss" -v start="$start" -v cohort=$COHORT \
    -v ccpu="$coordcpu" -v lgcpu="$lgcpu" -v busy="$busy0 $busy1" "$AWKLIB"'
function median(a, c,   i, j, x) {
    if (c == 0) return -1
    for (i = 2; i <= c; i++) {  # insertion sort: a few thousand values
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
/event=join / { if (++joins == n) tjoin = ms($0) }
/event=update / && / verdict=accepted/ { last[field($0, "round")] = ms($0) }
/event=round_committed / {
    r = field($0, "round"); tc = ms($0)
    if (r in last) u2c[++nu2c] = tc - last[r]
    if (tjoin != "" && tc >= tjoin) { if (!ncommit++) first = tc; lastc = tc }
}
/event=round_open / {
    r = field($0, "round")
    if (field($0, "attempt") == 0 && (r - 1) in last) c2t[++nc2t] = ms($0) - last[r - 1]
}
END {
    rpm = ncommit > 1 && lastc > first ? (ncommit - 1) * 60000 / (lastc - first) : 0
    printf "bench_load agents=%d cohort=%d joined=%d all_joined_ms=%d rounds=%d " \
           "rounds_per_min=%.1f coord_peak_rss_kb=%s rss_per_agent_kb=%.1f " \
           "coord_rss_kb=%s rss_now_per_agent_kb=%.1f " \
           "commit_to_next_task_ms=%s update_to_commit_ms=%s loadgen_rss_kb=%s " \
           "coord_cpu_s=%s loadgen_cpu_s=%s other_cpu_s=%.1f\n",
           n, cohort, joins, start == "" ? -1 : since(tjoin, start), ncommit, rpm, rss,
           rss / n, rssl, rssl / n, median(c2t, nc2t), median(u2c, nu2c), lgrss, ccpu, lgcpu, other
}
BEGIN {
    split(busy, b, " ")
    other = b[2] - b[1] - ccpu - lgcpu
}' "$t/coord.log"
if [ -n "$restarted" ]; then
    awk -v n=$N -v t0="$restarted" -v rss="$rss2" "$AWKLIB"'
/event=join / {
    if (++joins == n) tjoin = ms($0)
    s = int(since(ms($0), t0) / 1000); per[s]++; if (s > last) last = s
}
/event=round_committed / { if (tc == "") tc = ms($0) }
END {
    printf "bench_load_restart agents=%d rejoined=%d all_rejoined_ms=%d first_commit_ms=%d " \
           "coord_peak_rss_kb=%s\n", n, joins, since(tjoin, t0), since(tc, t0), rss
    printf "bench_load_rejoin_curve"
    for (s = 0; s <= last; s++) { sum += per[s]; printf " %ds=%d", s + 1, sum }
    printf "\n"
}' "$t/coord2.log"
fi
sed 's/^/  /' "$t/loadgen.out"
cat "$t/coord.log" "$t/coord2.log" 2>/dev/null | grep -c "event=round_failed" |
    sed 's/^/  rounds failed: /'
