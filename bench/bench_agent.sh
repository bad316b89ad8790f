#!/bin/sh
# The agents' CPU per agent-round on bench/peer's FedAvg job (sfl alone:
# bench/peer/run.py sfl, the coordinator and one sfl-agent per client, mutual
# TLS on loopback), this build against a baseline build (BASE: another
# checkout's build directory, e.g. main's), alternating BASE and this build
# REPS times in one run so both see the same machine. Prints per run the
# clients' CPU (utime + stime, all agents) per agent-round and the server's
# CPU per round, then min and median of the ratios new / base and the load.
# Without BASE, measures this build alone. Needs root and nft (run.py's
# nftables byte counters); without them says so and does nothing.
#
#   BASE=/path/to/main/build sh bench/bench_agent.sh [BUILD]
#   (CONFIGS=DIM:CLIENTS, default 100000:8; ROUNDS, default 10; REPS, 3)
set -eu
B=${1:-build}
BASE=${BASE:-}
CONFIGS=${CONFIGS:-"100000:8"}
ROUNDS=${ROUNDS:-10}
REPS=${REPS:-3}
HERE=$(dirname "$0")
# shellcheck source=bench/peer/setup.sh
. "$HERE/peer/setup.sh"
peer_sfl_start bench_agent "$CONFIGS"
for c in $CONFIGS; do
    d=${c%:*} n=${c#*:}
    peer_shards "$B" "$d" "$n" "$t/data"
    : > "$t/runs"
    i=0
    while [ $i -lt "$REPS" ]; do
        for which in ${BASE:+base} new; do
            if [ "$which" = base ]; then b=$BASE; else b=$B; fi
            rm -rf "$t/work"
            load=$(cut -d' ' -f1 /proc/loadavg)
            QUIET=${QUIET:-100} /usr/bin/python3 "$HERE/peer/run.py" sfl --dim "$d" \
                --clients "$n" --rounds "$ROUNDS" --steps 5 --lr 0.2 --data "$t/data" \
                --pki "$t/pki" --build "$b" --work "$t/work" > "$t/one.json"
            echo "$which $i $load $(cat "$t/one.json")" >> "$t/runs"
        done
        i=$((i + 1))
    done
    /usr/bin/python3 - "$t/runs" << 'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    which, i, load, js = line.split(" ", 3)
    r = json.loads(js)
    cr = r["clients"] * r["rounds"]
    ms = 1000 * r["clients_cpu_s"] / cr
    srv = 1000 * r["server_cpu_s"] / r["rounds"]
    runs.setdefault(int(i), {})[which] = (ms, srv)
    print(f"bench_agent {which} d={r['dim']} clients={r['clients']} rounds={r['rounds']} "
          f"agent_ms_per_round={ms:.2f} server_ms_per_round={srv:.1f} "
          f"down_B={r['bytes_down'] / cr:.0f} failures={len(r['failures'])} load1={load}")
rat = [v["new"][0] / v["base"][0] for v in runs.values() if "base" in v and "new" in v]
if rat:
    print(f"bench_agent new/base agent CPU per agent-round: min {min(rat):.3f} "
          f"median {statistics.median(rat):.3f} over {len(rat)} pairs")
EOF
done
