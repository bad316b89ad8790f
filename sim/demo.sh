#!/bin/sh
# make demo: a synthetic federation run end to end with sfl-sim, then a short
# summary. Until the networked federation lands this is the main job.
set -eu
SIM=${1:-build/sfl-sim}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

summary() { # $1 = csv, $2 = title
    awk -F, -v title="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { last = $0; n = NR - 1; if (NR == 2) first = $col["objective"] }
        END {
            split(last, v, ",")
            printf "%s\n  rounds %d, objective %.4g -> %.4g, global nnz %d\n", title, n, first,
                   v[col["objective"]], v[col["nnz"]]
            if ("rel_error" in col) printf "  relative error to the truth %.3g\n", v[col["rel_error"]]
            if ("support_recall" in col)
                printf "  support recovered: recall %.1f%%, precision %.1f%%\n",
                       100 * v[col["support_recall"]], 100 * v[col["support_precision"]]
            printf "  last round moved %.1f kB up, %.1f kB down\n",
                   v[col["bytes_up"]] / 1e3, v[col["bytes_down"]] / 1e3
        }' "$1"
}

echo "== sfl demo: FedIter-HT on Simulation I (100 clients x 100 samples, d=1000, tau=200)"
"$SIM" --algo fediterht --data synth:sim1 --clients 100 --rounds 100 --tau 200 --seed 7 \
    > "$out/sim1.csv"
summary "$out/sim1.csv" "FedIter-HT, Simulation I (alpha = beta = 0.1)"
echo
echo "== Distributed-IHT on the same federation, for comparison"
"$SIM" --algo diht --data synth:sim1 --clients 100 --rounds 100 --tau 200 --seed 7 \
    > "$out/diht.csv"
summary "$out/diht.csv" "Distributed-IHT, Simulation I"
echo "  (why Distributed-IHT wins on this generator: results/REPORT.md, Simulation I)"
echo
echo "== FedGradMP, seed 004 Sec. V-C (30 clients x 100 x 1000, 10-sparse, noiseless)"
"$SIM" --algo fedgradmp --data synth:gradmp --clients 30 --alpha 1.0 --tau 10 \
    --local-steps 3 --batch 40 --rounds 6 --seed 7 > "$out/gradmp.csv"
summary "$out/gradmp.csv" "FedGradMP"
echo
echo "== FedIter-HT on a noiseless 20-sparse problem (20 clients x 50 samples, d=1000, tau=20)"
"$SIM" --algo fediterht --data synth:sparse --clients 20 --samples 50 --rounds 60 --tau 20 \
    --batch 50 --lr 0.1 --local-steps 5 --seed 7 > "$out/sparse.csv"
summary "$out/sparse.csv" "FedIter-HT, synth:sparse"
