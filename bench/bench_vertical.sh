#!/bin/sh
# Vertical jobs over the network (issue 13): a DP-BCFW job of T iterations
# with K = 4, 8, 16 agents on loopback, each a real sfl-agent process
# holding one column block of the same n samples. Reports, per K:
#   - iterations per second (first round opened -> job finished, from the
#     coordinator's log), and a horizontal FedAvg job's rounds per second
#     with the same agents, for the turnaround an iteration replaces;
#   - uplink bytes per iteration: the algorithm's payload, K (4 + 8 m)
#     (Corollary 1 counts K integers and K m floats), against the gRPC
#     bytes the coordinator received per iteration (/metrics: HTTP/2 frames
#     inside TLS, heartbeats and Subscribe traffic included), and downlink
#     likewise (K copies of the m-value broadcast).
# One machine: the agents, the coordinator and this script share its cores,
# so the absolute rates say little; the ratios are the point.
# N=, D=, M=, ROUNDS=, PER_ROUND=, KS= override the sizes.
set -eu
B=${1:-build}
N=${N:-800}
D=${D:-8000}
M=${M:-80}
ROUNDS=${ROUNDS:-10}
PER_ROUND=${PER_ROUND:-100}
KS=${KS:-"4 8 16"}
SFL_BIN=$B
export SFL_BIN
. tests/e2e/lib.sh
T=$((ROUNDS * PER_ROUND))

metric() { # $1 metrics port, $2 name: its value
    /usr/bin/python3 -c "import urllib.request, sys
for l in urllib.request.urlopen('http://127.0.0.1:$1/metrics', timeout=5).read().decode().splitlines():
    if l.startswith('$2 '): print(l.split()[1])"
}
span_s() { # seconds from the first line matching $1 to the first matching $2 in the log
    /usr/bin/python3 - "$t/coord.log" "$1" "$2" <<'EOF'
import sys, re, datetime
log, a, b = sys.argv[1:]
ts = {}
for line in open(log):
    for k in (a, b):
        if k in line and k not in ts:
            ts[k] = datetime.datetime.strptime(line.split()[0][3:], "%Y-%m-%dT%H:%M:%S.%fZ")
print("%.3f" % (ts[b] - ts[a]).total_seconds())
EOF
}

for K in $KS; do
    rm -rf "$t/data" "$t/state" "$t"/agent-* "$t/coord.log"
    mkdir -p "$t/data" "$t/state"
    "$BIN/sfl-sim" --data synth:dpbcfw --samples "$N" --dim "$D" --density 0.01 \
        --partition "features:$K" --test-frac 0 --seed 7 --dump-shards "$t/data" > /dev/null
    names=""
    k=0
    while [ $k -lt "$K" ]; do names="$names agent-$k"; k=$((k + 1)); done
    [ -d "$t/pki" ] || pki_federation agent-0
    for a in $names; do
        [ -f "$t/pki/agent/$a.crt" ] || "$PKI" agent "$t/pki" "$a" > /dev/null
    done
    port=$(pick_port)
    mport=$((port + 1))
    { coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; fast_rounds; cat <<EOT

[job vertical]
algo = dpbcfw
loss = lsq
features = $D
rows = $N
eta = 5
m = $M
epsilon = 1
dp_noise = ${DP_NOISE:-1}
rounds = $ROUNDS
iterations_per_round = $PER_ROUND
cohort = $K
overselect = 0
min_quorum = $K
deadline_ms = 600000
paused = 1
seed = 7
EOT
    } > "$t/coordinator.ini"
    start_coordinator
    sflctl_config
    k=0
    while [ $k -lt "$K" ]; do
        blk=$(awk -v k=$k '$1 == k { print $2 + 1 ":" $3 }' "$t/data/blocks")
        start_agent $k --block "$blk" --ids_file "$t/data/client-$k.ids"
        k=$((k + 1))
    done
    joined() { [ "$(grep -c "event=join " "$t/coord.log")" -ge "$K" ]; }
    wait_for 30 joined || fail "K=$K: agents did not join"
    in0=$(metric $mport sfl_received_bytes_total)
    out0=$(metric $mport sfl_sent_bytes_total)
    $CTL job resume 1 > /dev/null
    done_v() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
    wait_for 300 done_v || fail "K=$K: the vertical job did not finish: $($CTL jobs 2>&1)"
    in1=$(metric $mport sfl_received_bytes_total)
    out1=$(metric $mport sfl_sent_bytes_total)
    secs=$(span_s "event=round_open job=1 " "event=job_state job=1 state=finished")
    # the same agents, a horizontal job: FedAvg on the agents' blocks as rows
    cat > "$t/h.ini" <<EOT
[job horizontal]
algo = fedavg
loss = lsq
features = $((D / K + 1))
local_steps = 1
lr = 0.001
batch = 10
rounds = 50
cohort = $K
overselect = 0
min_quorum = $K
deadline_ms = 600000
seed = 7
EOT
    # blocks are vertical data: for the horizontal job the agents restart
    # on the same files as whole rows
    for p in $pids; do [ "$p" = "$coord" ] || kill "$p" 2> /dev/null || true; done
    sleep 0.3
    k=0
    while [ $k -lt "$K" ]; do start_agent $k; k=$((k + 1)); done
    $CTL job create "$t/h.ini" > /dev/null
    done_h() { grep -q "event=job_state job=2 state=finished" "$t/coord.log"; }
    wait_for 300 done_h || fail "K=$K: the horizontal job did not finish: $($CTL jobs 2>&1)"
    hsecs=$(span_s "event=round_open job=2 " "event=job_state job=2 state=finished")
    /usr/bin/python3 - "$K" "$T" "$M" "$secs" "$in0" "$in1" "$out0" "$out1" "$hsecs" <<'EOF'
import sys
K, T, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
secs, i0, i1, o0, o1, hsecs = map(float, sys.argv[4:])
payload_up = K * (4 + 8 * m)        # K int32 indices + K m float64 (Corollary 1's count)
payload_down = K * 8 * m            # the broadcast to each of K agents
wire_up = (i1 - i0) / T
wire_down = (o1 - o0) / T
print("bench_vertical K=%d iterations=%d seconds=%.2f iterations_per_s=%.0f ms_per_iteration=%.2f "
      "horizontal_rounds_per_s=%.1f ms_per_round=%.1f iteration_vs_round=%.1fx"
      % (K, T, secs, T / secs, 1000 * secs / T, 50 / hsecs, 1000 * hsecs / 50,
         (hsecs / 50) / (secs / T)))
print("bench_vertical K=%d up_payload_bytes=%d up_wire_bytes=%.0f up_overhead=%.2fx "
      "down_payload_bytes=%d down_wire_bytes=%.0f down_overhead=%.2fx"
      % (K, payload_up, wire_up, wire_up / payload_up, payload_down, wire_down,
         wire_down / payload_down))
EOF
    for p in $pids; do kill -9 "$p" 2> /dev/null || true; done
    pids=""
    sleep 0.3
done
