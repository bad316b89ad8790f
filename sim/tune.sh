#!/bin/sh
# Grid search behind sfl-sim's default --lr and --local-steps for the papers'
# datasets (seed 000 Sec. V / 001 Sec. 5: K in {3,5,8,10}, step size in
# {10,1,0.6,0.3,0.1,0.06,0.03,0.01,0.001}). For each preset and algorithm it
# keeps the pair with the lowest objective after the preset's rounds (runs
# that diverge are dropped) and rewrites sim/defaults.inc.
#
#   sim/tune.sh [build/sfl-sim [PRESET...]]   (about 10-15 minutes on 2 cores)
#
# With PRESET names (sim1, sim2, a9a, ...) only those are searched again and
# their rows replace theirs in results/tune-grid.txt; the others are kept.
set -eu
SIM=${1:-build/sfl-sim}
[ $# -gt 0 ] && shift
ONLY="$*"
DATA=${SFL_DATA:-../shared/data}
LRS="10 1 0.6 0.3 0.1 0.06 0.03 0.01 0.001"
KS="3 5 8 10"
ALGOS="fedht fediterht diht fedavg fedprox"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# preset (the key sfl-sim looks up: synth kind or data file name) | the
# experiment whose setup is tuned | rounds of the criterion.
presets() {
    echo "sim1|sim1-diht|100"
    echo "sim2|sim2-diht|200"
    for f in derived/colon-cancer.libsvm:colon derived/leukemia_ALLAML.libsvm:leukemia \
             a9a:a9a dna.scale:dna; do
        path=${f%%:*}
        if [ -f "$DATA/$path" ]; then
            extra="--data libsvm:$DATA/$path"
            [ "$path" = dna.scale ] && extra="$extra --test $DATA/dna.scale.t"
            echo "$(basename "$path")|real-${f##*:}-diht|100|$extra"
        else
            echo "tune: skipping $path: not found in $DATA" >&2
        fi
    done
}

jobs="$work/jobs"
: > "$jobs"
presets | while IFS='|' read -r name exp rounds extra; do
    if [ -n "$ONLY" ]; then
        case " $ONLY " in *" $name "*) ;; *) continue ;; esac
    fi
    flags="--config sim/experiments/$exp.ini $extra"
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

# Keep the rows of presets not searched this time.
mkdir -p results
if [ -n "$ONLY" ] && [ -f results/tune-grid.txt ]; then
    awk -v only=" $ONLY " 'index(only, " " $1 " ") == 0' results/tune-grid.txt >> "$work/results"
fi
sort -k1,1 -k2,2 -k3,3n -k4,4g "$work/results" > results/tune-grid.txt
{
    echo "/* preset, algorithm, lr, K — written by sim/tune.sh; do not edit by hand."
    echo " * Criterion: lowest objective after the preset's rounds, seed 7. */"
    sort -k1,1 -k2,2 -k5,5g results/tune-grid.txt | awk '$5 != "nan" && !seen[$1 FS $2]++ {
        printf "{\"%s\", \"%s\", %s, %s},\n", $1, $2, $4, $3 }'
} > sim/defaults.inc
cat sim/defaults.inc
