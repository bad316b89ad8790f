#!/bin/sh
# The same FedAvg least-squares job on Flower and on sfl, side by side, on
# loopback; writes results/peer-flower.md (`make bench-peer`).
#
#   FLOWER_SRC=DIR bench/peer/flower.sh [BUILD]
#
# FLOWER_SRC is a checkout of Flower's git tag v1.10.0, obtained beforehand;
# nothing is fetched here:
#   git clone --depth 1 --branch v1.10.0 https://github.com/adap/flower.git DIR
# Flower runs from DIR/src/py (PYTHONPATH) on Debian bookworm's packages:
# python3-numpy, python3-grpcio, python3-protobuf, python3-cryptography,
# python3-pycryptodome, python3-tomli (the Makefile installs them, and
# nftables). bench/peer/flwr_compat.py says the two things it supplies
# (newer tags do not import on those packages: see results/peer-flower.md).
#
# Job: sfl-sim's synth:dpbcfw data (100 rows per client, about 50 nonzero
# features per row, density 50 / d, y = <x, truth> + noise, seed 7), dumped
# once per configuration with --dump-shards; both systems read the same
# LibSVM shards. FedAvg, least squares, zero start, 5 local full-batch
# gradient steps (lr 0.2) per round, every client in every round, updates
# weighted by sample count, 25 rounds. Flower: start_server (grpc-bidi, TLS
# with sfl-pki's coordinator certificate) and one start_client process per
# client; sfl: sfl-coordinator and one sfl-agent process per agent (mutual
# TLS). bench/peer/run.py runs each and says what is measured and how.
#
# CONFIGS lists DIM:CLIENTS pairs (default: d = 500 and 1e5, 8/50/200
# clients, and d = 1e6 with 50). Each window opens only once the 1-minute
# load average is below QUIET (default 1.0; run.py waits at most QUIET_MAX_S,
# 480 s, and the table marks a window that opened above it). Needs root
# (nftables counters). About 30 minutes on 2 cores, most of it waiting for
# the load to settle after 200 Python clients start.
set -eu
B=${1:-build}
: "${FLOWER_SRC:?set FLOWER_SRC to a checkout of Flower v1.10.0 (bench/peer/flower.sh says how)}"
CONFIGS=${CONFIGS:-"500:8 500:50 500:200 100000:8 100000:50 100000:200 1000000:50"}
ROUNDS=${ROUNDS:-25}
STEPS=5
LR=0.2
OUT=${OUT:-results/peer-flower.md}
PY=/usr/bin/python3
HERE=$(dirname "$0")
[ -d "$FLOWER_SRC/src/py/flwr" ] || { echo "flower.sh: no $FLOWER_SRC/src/py/flwr" >&2; exit 1; }
ver=$(sed -n 's/^version = "\(.*\)"/\1/p' "$FLOWER_SRC/pyproject.toml" | head -1)
[ "$ver" = 1.10.0 ] || echo "flower.sh: FLOWER_SRC is Flower $ver, not the 1.10.0 this was made for" >&2
command -v nft > /dev/null || { echo "flower.sh: nft (Debian nftables) is needed" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "flower.sh: nftables counters need root" >&2; exit 1; }
for p in sfl-sim sfl-coordinator sfl-agent sflctl; do
    [ -x "$B/$p" ] || { echo "flower.sh: no $B/$p (make all)" >&2; exit 1; }
done

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
trap 'exit 130' INT TERM
# shellcheck source=bench/peer/setup.sh
. "$HERE/setup.sh"
peer_pki "$t/pki" "$CONFIGS" "flower.sh: "
# Both systems hold one descriptor per connection, the clients' logs more.
# shellcheck disable=SC3045
ulimit -n 65536 2> /dev/null || true

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$t/results.jsonl"
for c in $CONFIGS; do
    d=${c%:*} n=${c#*:}
    peer_shards "$B" "$d" "$n" "$t/data"
    for sys in sfl flower; do
        echo "flower.sh: d=$d clients=$n $sys (load $(cut -d' ' -f1 /proc/loadavg))"
        rm -rf "$t/work"
        $PY "$HERE/run.py" $sys --dim "$d" --clients "$n" --rounds "$ROUNDS" --steps $STEPS \
            --lr $LR --data "$t/data" --pki "$t/pki" --build "$B" --work "$t/work" \
            --flower-src "$FLOWER_SRC" > "$t/one.json" || {
            echo "flower.sh: $sys d=$d clients=$n failed; logs:" >&2
            tail -n 20 "$t/work"/*.log "$t/work"/*.err 2> /dev/null | tail -n 60 >&2
            exit 1
        }
        m=$(sed -n 's/.*"model": "\([^"]*\)".*/\1/p' "$t/one.json")
        cp "$m" "$t/model-$sys.${m##*.}"
        cat "$t/one.json" >> "$t/results.jsonl"
    done
    diff=$($PY "$HERE/run.py" compare "$t/model-flower.npy" "$t/model-sfl.txt")
    echo "{\"dim\": $d, \"clients\": $n, \"model_diff\": \"$diff\"}" >> "$t/results.jsonl"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$(dirname "$OUT")"
$PY "$HERE/table.py" "$t/results.jsonl" "$ver" "$load_start" "$load_end" "$ROUNDS" > "$OUT"
cp "$t/results.jsonl" "${OUT%.md}.jsonl"
cat "$OUT"
