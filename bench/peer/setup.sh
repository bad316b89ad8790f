# shellcheck shell=sh
# Sourced by bench/peer/flower.sh, bench/bench_wire.sh and bench/bench_agent.sh: the job's
# certificates and data shards.

# peer_pki DIR CONFIGS [PREFIX]: a CA, the coordinator's and an admin's
# certificates and one agent certificate per client of the largest
# configuration (CONFIGS: DIM:CLIENTS pairs) in DIR; says how many after
# PREFIX.
peer_pki() {
    max=0
    for c in $2; do
        n=${c#*:}
        if [ "$n" -gt "$max" ]; then max=$n; fi
    done
    echo "${3:-}certificates for $max agents"
    deploy/pki/sfl-pki init "$1" > /dev/null
    deploy/pki/sfl-pki coordinator "$1" coord > /dev/null
    deploy/pki/sfl-pki admin "$1" ops > /dev/null
    i=0
    while [ $i -lt "$max" ]; do deploy/pki/sfl-pki agent "$1" "agent-$i" > /dev/null; i=$((i + 1)); done
}

# peer_shards BUILD DIM CLIENTS DIR: sfl-sim's synth:dpbcfw data, 100 rows
# per client, about 50 nonzero features per row, seed 7, as LibSVM shards.
peer_shards() {
    dens=$(awk -v d="$2" 'BEGIN { x = 50 / d; print (x > 1 ? 1 : x) }')
    rm -rf "$4"
    "$1/sfl-sim" --data synth:dpbcfw --dim "$2" --density "$dens" --clients "$3" --samples 100 \
        --seed 7 --dump-shards "$4" 2> /dev/null
}

# peer_sfl_start NAME CONFIGS: for the scripts that run bench/peer's job on
# sfl alone (bench_wire.sh, bench_agent.sh). Without root and nft (run.py's
# nftables counters) says NAME is skipped and exits 0; else sets t to a
# fresh directory removed on exit, with the job's certificates in $t/pki.
peer_sfl_start() {
    if [ "$(id -u)" -ne 0 ] || ! command -v nft > /dev/null; then
        echo "$1 skipped: needs root and nft (nftables counters)"
        exit 0
    fi
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    trap 'exit 130' INT TERM
    peer_pki "$t/pki" "$2" > /dev/null
}
