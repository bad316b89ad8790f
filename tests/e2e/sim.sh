#!/bin/sh
# End-to-end checks of the sfl-sim program: real process, real files.
set -eu
. tests/e2e/lib-step.sh
BIN=${SFL_BIN:-build}
SIM="$BIN/sfl-sim"
DATA=${SFL_TEST_DATA:-../shared/data}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A short run: header, one row per round, the columns the data allows.
step "A short run: header, one row per round, the columns the data allows"
"$SIM" --algo fediterht --data synth:sparse --clients 5 --samples 40 --dim 200 \
    --support 5 --tau 10 --rounds 7 --batch 40 --lr 0.1 --seed 3 --quiet > "$t/a.csv"
head -1 "$t/a.csv" | grep -qx \
    'round,objective,rel_error,support_precision,support_recall,nnz,bytes_up,bytes_down,wall_ms' \
    || fail "header: $(head -1 "$t/a.csv")"
[ "$(wc -l < "$t/a.csv")" -eq 8 ] || fail "expected 7 rows"

# Same seed, same CSV byte for byte; another seed differs.
run() { "$SIM" --algo fedht --data synth:sim1 --clients 10 --rounds 5 --seed "$1" \
    --no-wall-clock --quiet; }
run 1 > "$t/r1a.csv"; run 1 > "$t/r1b.csv"; run 2 > "$t/r2.csv"
cmp -s "$t/r1a.csv" "$t/r1b.csv" || fail "same seed gave different CSVs"
cmp -s "$t/r1a.csv" "$t/r2.csv" && fail "different seeds gave the same CSV"

# All algorithms run; dense baselines on classification data report accuracy.
step "All algorithms run; dense baselines on classification data report accuracy"
for a in fedht fediterht diht fedavg fedprox; do
    "$SIM" --algo $a --data synth:sim2 --clients 4 --samples 50 --rounds 3 --tau 50 \
        --test-frac 0.2 --quiet > "$t/$a.csv" || fail "algo $a"
    head -1 "$t/$a.csv" | grep -q test_accuracy || fail "$a: no test_accuracy column"
done
"$SIM" --algo fediterht --data synth:fedprox --clients 5 --rounds 3 --tau 20 \
    --test-frac 0.2 --quiet > "$t/fp.csv" || fail "softmax federation"

# The matching-pursuit side: the FedGradMP command contract reaches the truth
# to machine precision; cohorts, centralized mode and dictionaries run.
step "The matching-pursuit side: the FedGradMP command contract reaches the truth"
"$SIM" --algo fedgradmp --data synth:gradmp --clients 30 --alpha 1.0 --tau 10 \
    --local-steps 3 --batch 40 --rounds 6 --seed 7 --quiet > "$t/gmp.csv"
awk -F, 'NR > 1 { e = $3 } END { exit !(e < 1e-10) }' "$t/gmp.csv" \
    || fail "fedgradmp rel_error $(tail -1 "$t/gmp.csv")"
"$SIM" --algo fedgradmp --data synth:gradmp --clients 30 --cohort 10 --tau 10 --batch 40 \
    --rounds 3 --quiet > "$t/cohort.csv" || fail "cohort run"
# round 1 broadcasts x_0 = 0 to a cohort of 10 instead of 30 clients
[ "$(sed -n 2p "$t/cohort.csv" | cut -d, -f8)" -eq "$(($(sed -n 2p "$t/gmp.csv" | cut -d, -f8) / 3))" ] \
    || fail "cohort bytes_down"
"$SIM" --algo fedgradmp --data synth:gradmp --clients 5 --centralized --tau 10 --rounds 4 \
    --quiet > "$t/central.csv" || fail "centralized run"
"$SIM" --algo fedgradmp --data synth:gradmp --clients 3 --dim 50 --support 3 --tau 3 \
    --dictionary gaussian:60 --rounds 2 --quiet > "$t/dict.csv" || fail "dictionary run"
for a in fedgradmp-inexact fedmid feddualavg; do
    "$SIM" --algo $a --data synth:gradmp --clients 5 --tau 10 --lr 0.001 --rounds 3 --quiet \
        > /dev/null || fail "algo $a"
done

# Bad flags and files: one line on stderr, non-zero exit.
expect_error() { # $1 = expected exit, $2 = pattern, rest = args
    code=$1; pat=$2; shift 2
    set +e; "$SIM" "$@" > /dev/null 2> "$t/err"; rc=$?; set -e
    [ $rc -eq "$code" ] || fail "$*: exit $rc, expected $code"
    [ "$(wc -l < "$t/err")" -eq 1 ] || fail "$*: stderr not one line: $(cat "$t/err")"
    grep -q "$pat" "$t/err" || fail "$*: stderr '$(cat "$t/err")' lacks '$pat'"
}
expect_error 2 "unknown option" --bogus
expect_error 2 "unknown --algo" --algo nope
expect_error 2 "invalid value" --rounds -3
expect_error 2 "invalid value" --lr abc
expect_error 2 "tau must be" --data synth:sparse --tau 0 --rounds 1
expect_error 2 "unexpected argument" stray
expect_error 2 "needs a value" --rounds
expect_error 2 "unknown synthetic" --data synth:nope
expect_error 1 "No such file" --data libsvm:/nonexistent/file
expect_error 2 "does not support a dictionary" --algo fediterht --data synth:gradmp \
    --dictionary gaussian:20 --rounds 1
expect_error 2 "bad --dictionary" --algo fedgradmp --data synth:gradmp --dictionary gaussian:x
printf '2 2\n1 0\n0 x\n' > "$t/bad.dict"
expect_error 1 "bad.dict:3:" --algo fedgradmp --data synth:gradmp --dim 2 --support 1 --tau 1 \
    --dictionary "$t/bad.dict" --rounds 1
expect_error 2 "exclude each other" --algo fedgradmp --data synth:gradmp --centralized --cohort 3
printf '1 1:0.5 2:1\n-1 3:x\n' > "$t/bad.svm"
expect_error 1 "bad.svm:2:" --data libsvm:"$t/bad.svm" --clients 1
printf '[sim]\nrounds = 2\nbogus = 1\n' > "$t/bad.ini"
expect_error 2 "unknown key 'bogus'" --config "$t/bad.ini"

# A config file, with a flag overriding it.
step "A config file, with a flag overriding it"
printf '[sim]\nalgo = diht\ndata = synth:sparse\nclients = 3\nrounds = 9\ntau = 5\n' > "$t/ok.ini"
"$SIM" --config "$t/ok.ini" --rounds 4 --quiet > "$t/c.csv"
[ "$(wc -l < "$t/c.csv")" -eq 5 ] || fail "config + override: $(wc -l < "$t/c.csv") lines"

# Real data, k-means partition (skipped when the shared data folder is absent).
step "Real data, k-means partition (skipped when the shared data folder is absent)"
if [ -f "$DATA/derived/colon-cancer.libsvm" ]; then
    "$SIM" --algo fediterht --data libsvm:"$DATA/derived/colon-cancer.libsvm" \
        --partition kmeans:4 --clients 4 --parts 2 --tau 50 --rounds 5 --quiet > "$t/colon.csv" \
        || fail "colon-cancer run"
    head -1 "$t/colon.csv" | grep -q test_accuracy || fail "colon: no accuracy"
else
    echo "skipped: $DATA/derived/colon-cancer.libsvm not found"
fi

# --plot draws a PNG and still writes the CSV.
step "plot draws a PNG and still writes the CSV"
if command -v gnuplot > /dev/null; then
    "$SIM" --data synth:sparse --clients 3 --rounds 5 --tau 30 --plot "$t/p.png" --quiet \
        > "$t/p.csv"
    [ -s "$t/p.png" ] || fail "no plot"
    [ "$(wc -l < "$t/p.csv")" -eq 6 ] || fail "plot run lost the CSV"
else
    echo "skipped: gnuplot not installed"
fi
echo "sim e2e: ok"
