#!/bin/sh
# make footprint: what a Raspberry Pi agent costs. The cross-built sfl-agent's
# file size (as built, and stripped), then its peak RSS in a real federation
# round: a native coordinator on loopback runs a job with features = 100000,
# one agent trains on 10,000 local samples (full-batch local steps); first the cross-built agent under
# qemu-user, then the native agent on the same job for comparison. Peak RSS
# under qemu-user is the emulator process's: guest memory plus qemu itself
# (its translation cache included), so the native figure is the closer guide
# to a real arm64 device (same pointer size); the qemu floor (the agent's
# --version under qemu) is printed to bound the emulator's share.
#
# usage: bench/footprint.sh NATIVE_BIN CROSS_BIN QEMU [QEMU_LD_PREFIX]
#   e.g. bench/footprint.sh build build/aarch64-linux-gnu qemu-aarch64-static /
# Environment: FP_SAMPLES (10000), FP_DIM (100000), FP_NNZ (nonzeros per
# sample, 100), FP_ROUNDS (3), FP_KEEP=1 keeps the work directory (logs).
set -eu
NB=${1:?usage: footprint.sh NATIVE_BIN CROSS_BIN QEMU [QEMU_LD_PREFIX]}
XB=${2:?usage: footprint.sh NATIVE_BIN CROSS_BIN QEMU [QEMU_LD_PREFIX]}
QEMU=${3:?usage: footprint.sh NATIVE_BIN CROSS_BIN QEMU [QEMU_LD_PREFIX]}
LDP=${4:-/}
SAMPLES=${FP_SAMPLES:-10000}
DIM=${FP_DIM:-100000}
NNZ=${FP_NNZ:-100}
ROUNDS=${FP_ROUNDS:-3}
ROOT=$(pwd)
TIME=/usr/bin/time

for tool in "$QEMU" "$TIME" openssl; do
    command -v "$tool" > /dev/null 2>&1 || { echo "SKIP: footprint: $tool not found"; exit 0; }
done
triplet=${XB##*/}
STRIP=$triplet-strip
command -v "$STRIP" > /dev/null 2>&1 || STRIP=
[ -x "$XB/sfl-agent" ] || { echo "footprint: no $XB/sfl-agent (make CROSS=$triplet-)"; exit 1; }

t=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2> /dev/null || true; done
    if [ "${FP_KEEP:-0}" = 1 ]; then echo "footprint: kept $t"; else rm -rf "$t"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "footprint: FAIL: $*"
    for f in "$t"/*.log; do [ -e "$f" ] && { echo "== $f"; tail -15 "$f"; }; done
    exit 1
}

# Sizes: the file as built (-O2 -g, symbols and debug info) and stripped,
# then the shared libraries it needs (what a device must install).
"${STRIP:-strip}" -o "$t/agent.stripped" "$XB/sfl-agent" 2> /dev/null ||
    fail "cannot strip $XB/sfl-agent (install binutils-$triplet)"
strip -o "$t/agent.native.stripped" "$NB/sfl-agent"
size() { wc -c < "$1" | tr -d ' '; }
echo "footprint target=$triplet sfl-agent bytes=$(size "$XB/sfl-agent") stripped_bytes=$(size "$t/agent.stripped")"
echo "footprint target=native sfl-agent bytes=$(size "$NB/sfl-agent") stripped_bytes=$(size "$t/agent.native.stripped")"
needed=$(LC_ALL=C readelf -d "$XB/sfl-agent" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "footprint target=$triplet sfl-agent needs: $needed"

# One agent's data: a sparse regression shard, 10,000 samples x d = 1e5 with
# NNZ nonzeros each (uniform columns, N(0,1)-ish values), labels from a
# 1000-sparse truth. (sfl-sim's synth sets are dense: 10,000 x 1e5 dense
# would be 8 GB.) The last sample carries column DIM so the shard spans d.
awk -v n="$SAMPLES" -v d="$DIM" -v k="$NNZ" 'BEGIN {
    srand(7)
    for (j = 1; j <= 1000; j++) w[int(rand() * d) + 1] = rand() * 2 - 1
    for (i = 1; i <= n; i++) {
        delete row
        for (c = 0; c < k; c++) row[int(rand() * d) + 1] = 1
        if (i == n) row[d] = 1
        m = 0
        for (j in row) col[++m] = j + 0
        for (a = 2; a <= m; a++) { v = col[a]; b = a - 1
            while (b > 0 && col[b] > v) { col[b + 1] = col[b]; b-- }
            col[b + 1] = v }
        y = 0; line = ""
        for (a = 1; a <= m; a++) {
            v = (rand() + rand() + rand() - 1.5) * 2
            if (col[a] in w) y += w[col[a]] * v
            line = line sprintf(" %d:%.6g", col[a], v)
        }
        printf "%.6g%s\n", y, line
    }
}' > "$t/shard.svm"
echo "footprint data: $SAMPLES samples, d = $DIM, $(wc -c < "$t/shard.svm" | tr -d ' ') bytes LibSVM, ~$NNZ nonzeros per sample"

PKI="$ROOT/deploy/pki/sfl-pki"
"$PKI" init "$t/pki" > /dev/null
"$PKI" coordinator "$t/pki" coord > /dev/null
"$PKI" agent "$t/pki" pi-0 > /dev/null
port=$((20000 + $$ % 20000))

# run_round NAME COMMAND...: a fresh coordinator with one job; the agent
# (COMMAND) runs until the job has finished, then SIGTERM; prints its peak RSS.
run_round() {
    name=$1
    shift
    rm -rf "$t/state" "$t/agent-state"
    cat > "$t/coordinator.ini" << EOF
[coordinator]
listen = 127.0.0.1:$port
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
metrics_listen = off
admin_listen = off
select_wait_ms = 300
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job footprint]
algo = fediterht
features = $DIM
tau = 1000
local_steps = 5
lr = 0.01
batch = $SAMPLES
rounds = $ROUNDS
cohort = 1
overselect = 0
min_quorum = 1
deadline_ms = 600000
heartbeat_ms = 120000
seed = 3
EOF
    pk=$("$NB/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord-$name.log")
    "$NB/sfl-coordinator" --config "$t/coordinator.ini" > "$t/coord-$name.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
    # The pid file names the process time(1) measures: sh execs the agent.
    # shellcheck disable=SC2016
    "$TIME" -f '%M %e' -o "$t/time-$name" sh -c 'echo $$ > "$0"; exec "$@"' "$t/pid-$name" \
        "$@" --coordinator 127.0.0.1:$port --server_name 127.0.0.1 --ca "$t/pki/ca.crt" \
        --cert "$t/pki/agent/pi-0.crt" --key "$t/pki/agent/pi-0.key" --coordinator_pk "$pk" \
        --data "libsvm:$t/shard.svm" --state_dir "$t/agent-state" \
        --backoff_min_ms 100 --backoff_max_ms 1000 --log_level debug \
        > "$t/agent-$name.log" 2>&1 &
    timer=$!
    pids="$pids $timer"
    start=$(date +%s)
    n=0
    until grep -q "event=job_state job=1 state=finished" "$t/coord-$name.log"; do
        kill -0 "$timer" 2> /dev/null || fail "$name: the agent exited"
        n=$((n + 1))
        [ $n -lt 1200 ] || fail "$name: the job did not finish in 600 s"
        sleep 0.5
    done
    secs=$(($(date +%s) - start))
    # Resident now (idle between rounds, data loaded) next to the peak.
    apid=$(cat "$t/pid-$name")
    now=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$apid/status")
    hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$apid/status")
    kill -TERM "$apid"
    n=0
    while kill -0 "$timer" 2> /dev/null; do
        n=$((n + 1))
        [ $n -lt 100 ] || fail "$name: the agent did not stop on SIGTERM"
        sleep 0.2
    done
    wait "$timer" || fail "$name: the agent did not exit cleanly"
    kill -TERM "$coord"
    wait "$coord" || true
    # time(1)'s figure (getrusage at exit) and VmHWM can differ by a few
    # pages (the kernel syncs per-thread RSS counters lazily): the larger.
    read -r rss _ < "$t/time-$name"
    [ "$hwm" -le "$rss" ] || rss=$hwm
    train=$(awk '/event=trained/ { for (i = 1; i <= NF; i++) if ($i ~ /^ms=/) { s += substr($i, 4); n++ } }
        END { if (n) printf "%.0f", s / n; else print "?" }' "$t/agent-$name.log")
    echo "footprint target=$name peak_rss_kb=$rss idle_rss_kb=$now train_ms_per_round=$train rounds=$ROUNDS job_wall_s=$secs"
}

run_round "$triplet-qemu" "$QEMU" -L "$LDP" "$XB/sfl-agent"
run_round native "$NB/sfl-agent"
"$TIME" -f '%M' -o "$t/time-floor" "$QEMU" -L "$LDP" "$XB/sfl-agent" --version > /dev/null
echo "footprint target=$triplet-qemu sfl-agent --version peak_rss_kb=$(cat "$t/time-floor") (emulator floor)"
