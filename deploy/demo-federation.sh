#!/bin/sh
# make demo, networked part: a throwaway CA and certificates, one coordinator
# and 8 agents on loopback (real processes, mutual TLS 1.3, sealed and signed
# updates), a FedIter-HT job run to completion with a progress display, then
# the support recovered and the bytes moved. Everything stops at the end.
set -eu
BIN=${1:-build}
ROOT=$(pwd)
t=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    sleep 0.2
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$t"
}
trap cleanup EXIT INT TERM

N=8 ROUNDS=25 port=$((20000 + $$ % 20000))
PKI="$ROOT/deploy/pki/sfl-pki"
echo "== sfl demo: networked federation (coordinator + $N agents on 127.0.0.1:$port)"
"$PKI" init "$t/pki" > /dev/null
"$PKI" coordinator "$t/pki" coord > /dev/null
"$PKI" admin "$t/pki" ops > /dev/null
i=0; while [ $i -lt $N ]; do "$PKI" agent "$t/pki" agent-$i > /dev/null; i=$((i + 1)); done
echo "  CA and certificates: $t/pki"

# Each agent's shard of a noiseless 10-sparse regression problem (d = 500).
mkdir -p "$t/data" "$t/state"
"$BIN/sfl-sim" --data synth:sparse --clients $N --samples 80 --dim 500 --support 10 --seed 11 \
    --dump-shards "$t/data"
cat > "$t/coordinator.ini" <<EOF2
[coordinator]
listen = 127.0.0.1:$port
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
metrics_listen = 127.0.0.1:$((port + 1))
admin_listen = off
select_wait_ms = 300
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job demo]
algo = fediterht
features = 500
tau = 10
local_steps = 5
lr = 0.1
batch = 80
rounds = $ROUNDS
cohort = $N
overselect = 0
min_quorum = 6
deadline_ms = 20000
seed = 11
EOF2
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2> /dev/null)
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" > "$t/coord.log" 2>&1 &
pids="$pids $!"
i=0
while [ $i -lt $N ]; do
    "$BIN/sfl-agent" --coordinator 127.0.0.1:$port --server_name 127.0.0.1 --ca "$t/pki/ca.crt" \
        --cert "$t/pki/agent/agent-$i.crt" --key "$t/pki/agent/agent-$i.key" \
        --coordinator_pk "$PK" --data "libsvm:$t/data/client-$i.svm" --state_dir "$t/agent-$i" \
        --backoff_min_ms 100 --backoff_max_ms 1000 > "$t/agent-$i.log" 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
done

# Progress: the coordinator logs one line per committed round.
n=600 last=0
while [ $n -gt 0 ]; do
    done_r=$(grep -c "event=round_committed" "$t/coord.log" || true)
    if [ "$done_r" != "$last" ]; then
        printf '\r  round %d/%d committed' "$done_r" "$ROUNDS"
        last=$done_r
    fi
    grep -q "event=job_state job=1 state=finished" "$t/coord.log" && break
    sleep 0.1; n=$((n - 1))
done
echo
grep -q "state=finished" "$t/coord.log" || { echo "demo: the job did not finish"; tail "$t/coord.log"; exit 1; }

# The model, through the Admin service, against the truth the shards came from.
mkdir -p "$t/stubs"
protoc -I"$ROOT/proto" --python_out="$t/stubs" --grpc_python_out="$t/stubs" \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" "$ROOT"/proto/sfl/v1/*.proto
(cd "$ROOT/tests/e2e" && /usr/bin/python3 export_model.py "$t/stubs" 127.0.0.1:$port 127.0.0.1 \
    "$t/pki" ops 1 "$t/model") > /dev/null
metrics=$(/usr/bin/python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$((port + 1))/metrics', timeout=5).read().decode())")
/usr/bin/python3 - "$t/model" "$t/data/truth" <<'EOF3'
import math, sys
def load(p):
    return {int(a): float(b) for a, b in (l.split() for l in open(p) if not l.startswith("#"))}
x, truth = load(sys.argv[1]), load(sys.argv[2])
hit = len(set(x) & set(truth))
err = math.sqrt(sum((x.get(k, 0) - truth.get(k, 0)) ** 2 for k in set(x) | set(truth)) /
                sum(v * v for v in truth.values()))
print(f"  support recovered: {hit} of {len(truth)} true coordinates, {len(x)} nonzeros in the model")
print(f"  relative error to the truth: {err:.2e}")
EOF3
echo "$metrics" | awk '/^sfl_sent_bytes_total/ { s = $2 } /^sfl_received_bytes_total/ { r = $2 }
    END { printf "  bytes moved: %.1f kB to agents, %.1f kB from agents (TLS payload)\n", s / 1e3, r / 1e3 }'
echo "  stopping the coordinator and agents"
