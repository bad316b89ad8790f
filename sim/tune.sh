#!/bin/sh
# Grid search behind sfl-sim's default --lr and --local-steps for the papers'
# datasets (seed 000 Sec. V / 001 Sec. 5: K in {3,5,8,10}, step size in
# {10,1,0.6,0.3,0.1,0.06,0.03,0.01,0.001}). For each preset and algorithm it
# keeps the pair with the lowest objective after the preset's rounds (runs
# that diverge are dropped) and rewrites sim/defaults.inc.
#
#   sim/tune.sh [build/sfl-sim]        (about 10-20 minutes on 2 cores)
set -eu
SIM=${1:-build/sfl-sim}
DATA=${SFL_DATA:-../shared/data}
LRS="10 1 0.6 0.3 0.1 0.06 0.03 0.01 0.001"
KS="3 5 8 10"
ALGOS="fedht fediterht diht fedavg fedprox"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# preset | flags | rounds
presets() {
    echo "sim1|--data synth:sim1 --alpha 0.1 --beta 0.1|100"
    echo "sim2|--data synth:sim2 --alpha 1 --beta 1|200"
    if [ -f "$DATA/derived/colon-cancer.libsvm" ]; then
        echo "colon-cancer.libsvm|--data libsvm:$DATA/derived/colon-cancer.libsvm --partition kmeans:10 --clients 10 --parts 2 --tau 200|100"
    fi
}

jobs="$work/jobs"
: > "$jobs"
presets | while IFS='|' read -r name flags rounds; do
    for a in $ALGOS; do
        ks=$KS
        [ "$a" = diht ] && ks=1 # one step per round whatever K
        for k in $ks; do
            for lr in $LRS; do
                echo "$name|$a|$k|$lr|$flags --algo $a --local-steps $k --lr $lr --rounds $rounds --seed 7 --quiet --no-wall-clock" >> "$jobs"
            done
        done
    done
done

# Two runs at a time; each prints "preset algo K lr final_objective".
tr '\n' '\0' < "$jobs" | xargs -0 -P 2 -n 1 sh -c '
    IFS="|" read -r name a k lr args <<EOF2
$1
EOF2
    # shellcheck disable=SC2086
    obj=$("'"$SIM"'" $args 2>/dev/null | tail -1 | cut -d, -f2) || obj=nan
    case "$obj" in ""|nan|inf|-nan) obj=nan ;; esac
    echo "$name $a $k $lr $obj"
' sh > "$work/results"

{
    echo "/* preset, algorithm, lr, K — written by sim/tune.sh; do not edit by hand."
    echo " * Criterion: lowest objective after the preset's rounds, seed 7. */"
    sort -k1,1 -k2,2 -k5,5g "$work/results" | awk '$5 != "nan" && !seen[$1 FS $2]++ {
        printf "{\"%s\", \"%s\", %s, %s},\n", $1, $2, $4, $3 }'
} > sim/defaults.inc
cp "$work/results" results/tune-grid.txt 2>/dev/null || true
cat sim/defaults.inc
