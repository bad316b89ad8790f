#!/bin/sh
# Coordinator under many concurrent agents on loopback.
#
#   bench/bench_load.sh [BUILD] [--quick]
#
# A coordinator runs one FedIter-HT job (d = 100, cohort 100, over-selection
# 10 % (--quick: none, as 100 agents cannot fill 110 places), quorum 80)
# while bench/loadgen holds N agents (1000; --quick 100) in one process:
# real client-agent state machines over mutual TLS that Join, Subscribe,
# train their task and submit sealed, signed updates. After the run (60 s;
# --quick 25 s) one line is printed:
#   bench_load agents=N cohort=100 joined=... rounds=... rounds_per_min=...
#              coord_peak_rss_kb=... commit_to_next_task_ms=...
#              update_to_commit_ms=... loadgen_rss_kb=...
# rounds_per_min counts rounds committed after the last agent joined;
# commit_to_next_task_ms is the median time from a round's last accepted
# update to the next round's round_open line (its tasks are sent in the
# same loop turn), update_to_commit_ms the part of it up to round_committed
# (aggregation on the thread pool and the SQLite commit). Both come from the
# coordinator's log timestamps (millisecond resolution). Peak RSS is the
# coordinator's VmHWM. Bounded: about 1.5 minutes at most.
set -eu
B=build
N=1000
SECS=60
OVERSEL=0.1
for a in "$@"; do
    case $a in
    --quick) N=100 SECS=25 OVERSEL=0 ;;
    -*) echo "usage: $0 [BUILD] [--quick]" >&2; exit 2 ;;
    *) B=$a ;;
    esac
done
ROOT=$(pwd)
t=$(mktemp -d)
coord=""
lg=""
cleanup() {
    for p in $lg $coord; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$t"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "bench_load: $*" >&2; tail -5 "$t/coord.log" >&2 || true; exit 1; }

# Both processes hold one descriptor per connection. (dash and bash both
# have ulimit -n.)
need=$((N + 200))
# shellcheck disable=SC3045
nofile=$(ulimit -n)
if [ "$nofile" != unlimited ] && [ "$nofile" -lt $need ]; then
    # shellcheck disable=SC3045
    ulimit -n $need 2>/dev/null || fail "the open files limit $nofile is below $need"
fi

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
listen = 127.0.0.1:$port
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
metrics_listen = off
max_agents = $((N + 100))
max_conns = $((N + 100))
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
cohort = 100
overselect = $OVERSEL
min_quorum = 80
deadline_ms = 10000
seed = 7
EOF
PK=$("$B/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
"$B/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
n=50
until grep -q "event=started" "$t/coord.log"; do
    n=$((n - 1))
    [ $n -gt 0 ] || fail "the coordinator did not start"
    sleep 0.1
done

"$B/bench/loadgen" --pki "$t/pki" --agents $N --coordinator 127.0.0.1:$port --coordinator-pk "$PK" \
    --data-dir "$t/data" --shards 100 --work "$t/work" --seconds $SECS \
    > "$t/loadgen.out" 2> "$t/loadgen.err" &
lg=$!
# timeout(1) would not see the agents' graceful stop; the watchdog is here.
n=$(((SECS + 30) * 10))
while kill -0 $lg 2>/dev/null; do
    n=$((n - 1))
    [ $n -gt 0 ] || fail "loadgen did not finish in $((SECS + 30)) s"
    sleep 0.1
done
wait $lg || fail "loadgen failed: $(cat "$t/loadgen.err")"
lg=""
rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$coord/status")
kill -TERM $coord
wait $coord || true
coord=""

lgrss=$(sed -n 's/.* rss_kb=\([0-9]*\).*/\1/p' "$t/loadgen.out")
awk -v n=$N -v rss="$rss" -v lgrss="$lgrss" '
function ms(line,   s) {  # ts=YYYY-MM-DDTHH:MM:SS.mmmZ -> ms of the day
    s = substr(line, index(line, "ts=") + 14, 12)
    return ((substr(s, 1, 2) * 60 + substr(s, 4, 2)) * 60 + substr(s, 7, 6)) * 1000
}
function field(line, k,   i, r) {
    i = index(line, " " k "=")
    if (!i) return ""
    r = substr(line, i + length(k) + 2)
    sub(/ .*/, "", r)
    return r
}
function median(a, c,   i, j, x) {
    if (c == 0) return -1
    for (i = 2; i <= c; i++) {  # insertion sort: a few hundred values
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
    printf "bench_load agents=%d cohort=100 joined=%d rounds=%d rounds_per_min=%.1f " \
           "coord_peak_rss_kb=%s commit_to_next_task_ms=%s update_to_commit_ms=%s " \
           "loadgen_rss_kb=%s\n",
           n, joins, ncommit, rpm, rss, median(c2t, nc2t), median(u2c, nu2c), lgrss
}' "$t/coord.log"
sed 's/^/  /' "$t/loadgen.out"
grep -c "event=round_failed" "$t/coord.log" | sed 's/^/  rounds failed: /'
