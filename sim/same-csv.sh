#!/bin/sh
# Checks that two sfl-sim builds write the same CSV, byte for byte
# (--no-wall-clock), on every config in sim/experiments/ and the README's
# examples: the guard for refactorings that must not change results.
#
#   sim/same-csv.sh OLD_SIM NEW_SIM [OUTDIR]
#
# Run from the repository root (configs name ../shared/data/...); a config
# whose data is missing is reported as skipped. Exits 1 if any CSV differs.
# A column that NEW adds (its header names every column OLD has, and more)
# is left out of the comparison and named once; a column OLD has and NEW
# lacks is a difference. SAME_CSV_ONLY=REGEX (grep -E) runs only the runs
# whose names match it, e.g. SAME_CSV_ONLY='^(algo-|readme-|sim1-)'.
# SAME_CSV_IGNORE=COL,COL empties those columns in both CSVs before the
# comparison, for a change that moves them on purpose, e.g.
# SAME_CSV_IGNORE=bytes_up,bytes_down for a lossless change of the codec.
set -u
old=$1 new=$2 out=${3:-build/same-csv}
mkdir -p "$out"
same=0 differ=0 skipped=0 added=

# NEW's CSV cut to OLD's columns, in OLD's order, on stdout (by header name);
# exit 3 if OLD has a column NEW lacks.
project() { # old.csv new.csv
    awk -F, 'NR == FNR { if (FNR == 1) { n = NF; for (i = 1; i <= NF; i++) want[i] = $i }
                         next }
             FNR == 1 { for (i = 1; i <= NF; i++) at[$i] = i
                        for (i = 1; i <= n; i++) if (!(want[i] in at)) exit 3 }
             { s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "," : "") $(at[want[i]])
               print s }' "$1" "$2"
}

run() { # name args...
    name=$1
    shift
    if [ -n "${SAME_CSV_ONLY:-}" ] && ! echo "$name" | grep -qE "$SAME_CSV_ONLY"; then
        return
    fi
    "$old" --no-wall-clock --quiet "$@" > "$out/$name.old" 2> "$out/$name.old.err"
    rc_old=$?
    if [ "$rc_old" -ne 0 ] && grep -q "No such file" "$out/$name.old.err"; then
        echo "skip $name: $(head -1 "$out/$name.old.err")"
        skipped=$((skipped + 1))
        return
    fi
    "$new" --no-wall-clock --quiet "$@" > "$out/$name.new" 2> "$out/$name.new.err"
    rc_new=$?
    if [ -n "${SAME_CSV_IGNORE:-}" ]; then
        for f in "$out/$name.old" "$out/$name.new"; do
            awk -F, -v OFS=, -v cols="$SAME_CSV_IGNORE" '
                NR == 1 { n = split(cols, c, ",")
                          for (i = 1; i <= NF; i++) for (j = 1; j <= n; j++) if ($i == c[j]) skip[i] = 1 }
                NR > 1 { for (i in skip) $i = "" } { print }' "$f" > "$f.tmp" && mv "$f.tmp" "$f"
        done
    fi
    h_old=$(head -1 "$out/$name.old") h_new=$(head -1 "$out/$name.new")
    if [ -n "$h_old" ] && [ -n "$h_new" ] && [ "$h_old" != "$h_new" ]; then
        # compare OLD's columns only; a failed projection leaves .cut empty
        project "$out/$name.old" "$out/$name.new" > "$out/$name.cut" || : > "$out/$name.cut"
        [ -z "$added" ] && added=$(echo "$h_new" | tr , '\n' | grep -vxF "$(echo "$h_old" |
            tr , '\n')" | tr '\n' ' ')
        if [ "$rc_old" -eq "$rc_new" ] && cmp -s "$out/$name.old" "$out/$name.cut"; then
            same=$((same + 1))
        else
            echo "DIFFER $name (exit $rc_old/$rc_new): $out/$name.old $out/$name.new"
            differ=$((differ + 1))
        fi
        return
    fi
    if [ "$rc_old" -eq "$rc_new" ] && cmp -s "$out/$name.old" "$out/$name.new"; then
        same=$((same + 1))
    else
        echo "DIFFER $name (exit $rc_old/$rc_new): $out/$name.old $out/$name.new"
        differ=$((differ + 1))
    fi
}

for f in sim/experiments/*.ini; do
    run "$(basename "$f" .ini)" --config "$f"
done
run readme-1 --algo fediterht --data synth:sim1 --clients 100 --rounds 100 --tau 200 --seed 7
run readme-2 --algo fedht --data libsvm:../shared/data/derived/colon-cancer.libsvm \
    --partition kmeans:10 --clients 10 --parts 2 --tau 200 --rounds 50
run readme-4 --algo fedgradmp --data synth:gradmp --clients 30 --alpha 1.0 --tau 10 \
    --local-steps 3 --batch 40 --rounds 6 --seed 7
for a in fedht fediterht diht fedavg fedprox fedmid feddualavg fedgradmp-inexact; do
    run "algo-$a" --algo "$a" --data synth:sparse --clients 8 --rounds 20 --tau 20 --seed 3
    run "algo-$a-q8" --algo "$a" --data synth:sparse --clients 8 --rounds 10 --tau 20 \
        --seed 3 --encoding q8 --cohort 4
done
run softmax-dna --algo fediterht --data libsvm:../shared/data/dna.scale --clients 10 \
    --partition label --rounds 20 --tau 20
echo "$same same, $differ differ, $skipped skipped${added:+ (compared without the columns NEW adds: $added)}"
[ "$differ" -eq 0 ]
