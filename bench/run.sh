#!/bin/sh
# make bench: micro and macro benchmarks. Each figure is a ratio measured in
# the same run against a baseline (a plain read pass, a full sort), because
# absolute times on shared machines are noise.
set -eu
B=${1:-build}
echo "== H_tau selection (d = 1e6, tau = 1e4)"
"$B/bench/bench_topk"
echo "== minibatch logistic gradient on CSR rows"
"$B/bench/bench_grad"
echo "== MNIST MLP 784-100-10 gradient, one core: library loops / blocked / dgemm / numpy; bytes per FedMac update vs log2 C(d,k) + value bits"
"$B/bench/bench_mlp"
echo "== sfl-sim, Simulation I, 100 clients x 100 rounds (FedIter-HT, tau = 200)"
for a in fediterht fedht diht; do
    "$B/sfl-sim" --algo $a --data synth:sim1 --clients 100 --rounds 100 --tau 200 --seed 7 \
        2>&1 >/dev/null | sed -n 's/^sfl-sim: \(algo=[a-z]*\).*\(wall_ms=[0-9]*\) \(peak_rss_kb=[0-9]*\)$/bench_sim \1 \2 \3/p'
done
echo "== FedGradMP local step: gradient / selection / restricted solve"
"$B/bench/bench_gradmp"
echo "== Sec. V-C (30 clients, alpha = 1): wall time to relative error 1e-6"
for a in "fedgradmp" "fediterht --lr 0.004" "fediterht --lr 0.01"; do
    # shellcheck disable=SC2086
    "$B/sfl-sim" --algo $a --data synth:gradmp --clients 30 --alpha 1 --tau 10 \
        --local-steps 3 --batch 40 --rounds 100 --seed 7 --quiet |
        awk -F, -v a="$a" 'NR > 1 && $3 <= 1e-6 && !hit { hit = 1; printf "bench_vc algo=\"%s\" round=%d wall_ms=%s\n", a, $1, $NF }
             END { if (!hit) printf "bench_vc algo=\"%s\" not_reached rel_error=%s after %d rounds wall_ms=%s\n", a, $3, $1, $NF }'
done
echo "== coordinator ingest per mode-1 update vs its floor (TLS records + one hash + decode + fold): sealed (before issue 27) and signed (now); agent seal vs sign"
"$B/bench/bench_ingest"
echo "== sparse vector codec: bytes vs log2 C(d,k) + value bits and the chosen layout, encode / decode MB/s vs the varint layout (d = 1e6, 1e5; k/d 0.1 - 100 %)"
"$B/bench/bench_codec"
echo "== coordinator aggregation: 1000 updates, k = 1e4, d = 1e6; bytes per update vs log2 C(d,k) + value bits"
"$B/bench/bench_agg"
echo "== aggregation, dense: FedAvg, 50 updates of d = k = 1e5 (bench-peer's dense case)"
"$B/bench/bench_agg" --dense
echo "== secure aggregation (mode 2), n = 100, t = 67, |S_t| = 2k: bytes per agent per round vs mode 1 and a dense SecAgg+ (d = 1e5, 1e6; k = 1e3, 1e4); agent and coordinator CPU of one round; coordinator ms per dropped client recovered"
"$B/bench/bench_secagg"
echo "== secure aggregation at n = 300, k = 1e3: the complete graph, then a Harary graph of degree 64 (the default above 200 selected)"
"$B/bench/bench_secagg" 300 1000 | grep -v '^bench_secagg_bytes'
"$B/bench/bench_secagg" -g 64 300 1000 | grep -v '^bench_secagg_bytes'
echo "== the store beside a 256 MB checkpoint commit: a loop write before (two connections) and after (one writer thread)"
"$B/bench/bench_writer" 256
echo "== coordinator event-loop lag while a d = 1e6 job commits checkpoints beside a small job"
sh bench/bench_stall.sh "$B"
echo "== vertical DP-BCFW over the network: iterations/s for K = 4, 8, 16 agents (n = 800, d = 8000, m = 80) beside a horizontal round's turnaround; bytes per iteration vs Corollary 1's payload"
sh bench/bench_vertical.sh "$B"
DP_NOISE=0 KS=16 sh bench/bench_vertical.sh "$B" | sed 's/^bench_vertical /bench_vertical noise=off /'
echo "== TLS 1.3 handshake CPU per join on the coordinator's side, in memory: full vs resumed (ticket), P-256 vs Ed25519 certificates (sfl-pki --key-type)"
tlsdir=$(mktemp -d)
for ca in p256 ed25519; do
    sh deploy/pki/sfl-pki --key-type $ca init "$tlsdir/$ca" > /dev/null
    sh deploy/pki/sfl-pki --key-type $ca coordinator "$tlsdir/$ca" coord > /dev/null
    sh deploy/pki/sfl-pki --key-type $ca agent "$tlsdir/$ca" a > /dev/null
done
sh deploy/pki/sfl-pki --key-type ed25519 agent "$tlsdir/p256" ed > /dev/null
"$B/bench/bench_tls" "$tlsdir" 300
rm -rf "$tlsdir"
echo "== coordinator under 1,000, 3,000 and 10,000 concurrent agents on loopback (cohort 100 and 1,000; all started at once over two load-generator processes), then a kill -9 and restart storm at 10,000"
# (cohort 1,000 with over-selection needs more than 1,000 agents)
for nc in 1000:100 3000:100 3000:1000 10000:100 10000:1000; do
    N=${nc%:*} COHORT=${nc#*:} RATE=100000 PROCS=2 SECS=45 sh bench/bench_load.sh "$B"
done
N=10000 RATE=100000 PROCS=2 SECS=60 sh bench/bench_load.sh "$B" --restart
echo "== 100,000 agents (cohort 1,000; six load-generator processes, agents spread over five loopback addresses): the coordinator needs 100,200 open files, which only a hard limit raised beforehand allows (CAP_SYS_RESOURCE); the largest N that fits under a lower one is run instead"
# (the load generator holds ~145 KB per agent: ~14 GB at 100,000)
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 100200 ]; then
    N=100000 COHORT=1000 RATE=2000 PROCS=6 SECS=300 sh bench/bench_load.sh "$B"
elif [ "$hard" -ge 2000 ]; then
    echo "bench_load: open files hard limit $hard: N=100000 cannot run here; N=$((hard - 500)) instead"
    N=$((hard - 500)) COHORT=1000 RATE=3000 PROCS=2 SECS=60 sh bench/bench_load.sh "$B"
fi
echo "== the coordinator fleet (issue 28): a master on PostgreSQL with 1, 2, 4 front-ends x 2,000 agents (cohort 1,000), the same load on one coordinator (SQLite) and on the master alone; takeover after a master kill -9 (a 5-kill ha_soak.sh); results/fleet.md"
sh bench/bench_fleet.sh "$B" --fleet
echo "== bytes and packets per client-round on the wire, bench/peer's FedAvg job on sfl alone (8 agents, d = 500 and 1e5; root for nftables); results/wire.md says where they go"
sh bench/bench_wire.sh "$B"
echo "== the agents' CPU per agent-round, bench/peer's FedAvg job on sfl alone (8 agents, d = 1e5, 10 rounds; BASE=another build gives new/base ratios; root for nftables); results/agent.md"
sh bench/bench_agent.sh "$B"
