#!/bin/sh
# Bytes and packets on the wire per client-round: bench/peer's FedAvg job on
# sfl alone (bench/peer/run.py sfl: the coordinator and one sfl-agent per
# client, mutual TLS on loopback, nftables counters on the coordinator's
# port), 8 clients, 25 rounds, at d = 500 and d = 1e5 (CONFIGS: DIM:CLIENTS
# pairs). Prints, per configuration, the bytes each way per client-round,
# the packets, and the ratio of all bytes to 16 d (two float64 models, what
# Flower's FedAvg moves per client-round at the least); results/wire.md
# says where the bytes go. Byte counts do not depend on the machine's speed
# (only on the job); packets may, a little (TCP's coalescing under load).
# Needs root (nftables); without it says so and does nothing.
#
#   sh bench/bench_wire.sh [BUILD]
set -eu
B=${1:-build}
CONFIGS=${CONFIGS:-"500:8 100000:8"}
ROUNDS=${ROUNDS:-25}
HERE=$(dirname "$0")
# shellcheck source=bench/peer/setup.sh
. "$HERE/peer/setup.sh"
peer_sfl_start bench_wire "$CONFIGS"
for c in $CONFIGS; do
    d=${c%:*} n=${c#*:}
    rm -rf "$t/work"
    peer_shards "$B" "$d" "$n" "$t/data"
    load=$(cut -d' ' -f1 /proc/loadavg)
    QUIET=${QUIET:-100} /usr/bin/python3 "$HERE/peer/run.py" sfl --dim "$d" --clients "$n" \
        --rounds "$ROUNDS" --steps 5 --lr 0.2 --data "$t/data" --pki "$t/pki" --build "$B" \
        --work "$t/work" > "$t/one.json"
    /usr/bin/python3 - "$t/one.json" "$load" << 'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read())
cr = r["clients"] * r["rounds"]
up, down = r["bytes_up"] / cr, r["bytes_down"] / cr
print(f"bench_wire d={r['dim']} clients={r['clients']} rounds={r['rounds']} "
      f"up_B={up:.0f} down_B={down:.0f} packets_up={r['packets_up'] / cr:.2f} "
      f"packets_down={r['packets_down'] / cr:.2f} per_16d={(up + down) / (16 * r['dim']):.4f} "
      f"failures={len(r['failures'])} load1={sys.argv[2]}")
EOF
done
