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
    'round,objective,rel_error,support_precision,support_recall,nnz,bytes_up,bytes_down,support_churn,wall_ms' \
    || fail "header: $(head -1 "$t/a.csv")"
[ "$(wc -l < "$t/a.csv")" -eq 8 ] || fail "expected 7 rows"

# support_churn (column 9 here) against the models themselves: the run cut
# after r rounds writes x_{r+1}'s support (--model-out), and row r's churn is
# the number of indices in exactly one of the supports after r - 1 and r
# rounds (x_1 = 0). Fed-HT with tau 10 of a 20-sparse truth swaps
# coordinates every round. With --eval-every 2 the rounds between rows add
# up into the next row.
step "support_churn: the entries entering or leaving the model's support, per round"
ch() { "$SIM" --algo fedht --data synth:sparse --clients 5 --samples 40 --dim 200 \
    --support 20 --tau 10 --lr 0.1 --seed 3 --no-wall-clock --quiet "$@"; }
ch --rounds 5 > "$t/ch.csv"
: > "$t/m0"
for r in 1 2 3 4 5; do
    ch --rounds $r --model-out "$t/m$r" > /dev/null || fail "churn run of $r rounds"
    want=$(awk '!/^#/ { n[$1]++ } END { c = 0; for (i in n) c += n[i] == 1; print c }' \
        "$t/m$((r - 1))" "$t/m$r")
    got=$(awk -F, -v r=$r '$1 == r { print $9 }' "$t/ch.csv")
    [ "$got" = "$want" ] || fail "round $r: support_churn $got, the models differ in $want"
done
awk -F, 'NR > 2 { s += $9 } END { exit !(s > 0) }' "$t/ch.csv" ||
    fail "no churn after round 1, the check above proves little: $(cat "$t/ch.csv")"
ch --rounds 5 --eval-every 2 > "$t/ch2.csv"
if [ "$(cut -d, -f1 "$t/ch2.csv" | tr '\n' ' ')" != "round 1 2 4 5 " ] ||
    ! awk -F, 'NR == FNR { if (FNR > 1) s[$1 <= 2 ? $1 : $1 <= 4 ? 4 : 5] += $9; next }
               FNR > 1 && $9 != s[$1] { bad = 1 } END { exit bad }' "$t/ch.csv" "$t/ch2.csv"
then
    fail "--eval-every 2 churn: $(cut -d, -f1,9 "$t/ch2.csv" | tr '\n' ' ')"
fi

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
expect_error 2 "unknown algorithm 'nope' (valid: fedht," --algo nope
expect_error 2 "invalid value" --rounds -3
expect_error 2 "invalid value" --lr abc
expect_error 2 "tau must be in \[1, 1000\], got 5000" --data synth:sparse --tau 5000 --rounds 1
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

# Algorithm parameters come from the algorithms' tables: checked against the
# algorithm (range, whole numbers), a value the algorithm does not have is a
# note, and docs/algorithms.md lists exactly the tables.
step "Parameters from the algorithms' tables: checks, notes, the documented lists"
expect_error 2 "tau: must be >= 1, got 0" --algo fediterht --data synth:sparse --tau 0
expect_error 2 "local_steps: invalid value '2.5' (a whole number)" --algo fedht \
    --data synth:sparse --local-steps 2.5
"$SIM" --algo fedavg --data synth:sparse --clients 3 --rounds 2 --tau 5 --mu 0.3 \
    > /dev/null 2> "$t/note.err" || fail "fedavg with --tau: $(cat "$t/note.err")"
grep -q "note: fedavg has no parameter 'tau'; ignored" "$t/note.err" || fail "no note for tau"
printf '[sim]\nalgo = fedprox\ndata = synth:sparse\nclients = 3\nrounds = 2\nmu = 0.5\n' \
    > "$t/prox.ini"
"$SIM" --config "$t/prox.ini" 2> "$t/prox.err" > /dev/null
grep -q " mu=0.5 " "$t/prox.err" || fail "fedprox mu from the config: $(cat "$t/prox.err")"
# An algorithm parameter never shares its flag with an option of sfl-sim's
# own (FedMac's --beta once did with the synthetic data's).
"$SIM" --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p' | sort | uniq -d > "$t/dup"
[ ! -s "$t/dup" ] || fail "sfl-sim flags defined twice: $(cat "$t/dup")"
"$SIM" --list-params > "$t/params.md"
sed -n '/<!-- params: begin/,/<!-- params: end/p' docs/algorithms.md | sed '1d;$d' \
    > "$t/doc-params.md"
cmp -s "$t/params.md" "$t/doc-params.md" ||
    fail "docs/algorithms.md's parameter lists differ from sfl-sim --list-params: $(diff "$t/params.md" "$t/doc-params.md" | head -5)"

# --secagg: mode 2's support rule, error feedback and quantization. Loose
# checks that catch a broken simulation (not a measurement): FedIter-HT ends
# neither 3 times above the plain run nor 10 times below it (the residuals'
# memory makes it faster here: 10.6 against 26.3), replays, and sends
# |S_t| + 1 words and the metric words.
step "--secagg: FedIter-HT on Sim I near the plain run; replay; bytes; refusals"
sa() { "$SIM" --algo fediterht --data synth:sim1 --clients 10 --rounds 20 --seed 3 \
    --no-wall-clock --quiet "$@"; }
sa > "$t/plain.csv"
sa --secagg > "$t/sa1.csv"
printf '[sim]\nsecagg = 1\n' > "$t/sa.ini"
sa --config "$t/sa.ini" > "$t/sa2.csv"
cmp -s "$t/sa1.csv" "$t/sa2.csv" || fail "--secagg did not replay (or the INI key differs)"
cmp -s "$t/plain.csv" "$t/sa1.csv" && fail "--secagg changed nothing"
p=$(tail -1 "$t/plain.csv" | cut -d, -f2); q=$(tail -1 "$t/sa1.csv" | cut -d, -f2)
awk -v p="$p" -v q="$q" 'BEGIN { exit !(p > 0 && q < 3 * p && q > p / 10) }' ||
    fail "--secagg objective $q, without it $p"
# 10 clients x 4 bytes x (|S_t| = 2 tau = 400, + the canary, + 10 metric words)
[ "$(sed -n 2p "$t/sa1.csv" | cut -d, -f6)" -eq 16440 ] ||
    fail "--secagg bytes_up: $(sed -n 2p "$t/sa1.csv")"
expect_error 2 "pfedme is personalized" --algo pfedme --secagg --rounds 1
expect_error 2 "not --partition features:K" --algo bcfw --partition features:2 --secagg
expect_error 2 "secagg-clip must be > 0" --secagg --sa-clip 0

# The vertical driver: columns in K blocks, bcfw and dpbcfw, one row per
# evaluated iteration, the refusals, the shards.
step "Vertical runs (--partition features:K): rows, bytes, replay, refusals, shards"
V="--data synth:dpbcfw --samples 60 --dim 50 --support 5 --density 0.3 --eta 2"
"$SIM" --algo bcfw --partition features:3 $V --rounds 20 --eval-every 5 --quiet \
    > "$t/v.csv" || fail "bcfw run"
head -1 "$t/v.csv" | grep -qx \
    'round,objective,rel_error,support_precision,support_recall,nnz,bytes_up,bytes_down,wall_ms' \
    || fail "vertical header: $(head -1 "$t/v.csv")"
[ "$(cut -d, -f1 "$t/v.csv" | tr '\n' ' ')" = "round 1 5 10 15 20 " ] ||
    fail "vertical rows: $(cut -d, -f1 "$t/v.csv" | tr '\n' ' ')"
# 3 clients, each a 4-byte index and 60 float64; the broadcast 60 float64 to each
[ "$(sed -n 2p "$t/v.csv" | cut -d, -f7,8)" = "1452,1440" ] ||
    fail "vertical bytes: $(sed -n 2p "$t/v.csv")"
awk -F, 'NR > 1 { if (NR == 2) f = $2; e = $2 } END { exit !(e < f) }' "$t/v.csv" ||
    fail "bcfw did not decrease the objective"
vrun() { "$SIM" --algo dpbcfw --partition features:2 $V --m 20 --rounds 10 --seed "$1" \
    --no-wall-clock --quiet; }
vrun 4 > "$t/v4a.csv"; vrun 4 > "$t/v4b.csv"; vrun 5 > "$t/v5.csv"
cmp -s "$t/v4a.csv" "$t/v4b.csv" || fail "a private vertical run did not replay"
cmp -s "$t/v4a.csv" "$t/v5.csv" && fail "different seeds gave the same private run"
expect_error 2 "fedavg is a horizontal algorithm" --algo fedavg --partition features:2 $V
expect_error 2 "bcfw is a vertical algorithm" --algo bcfw $V
expect_error 2 "bad --partition features:K" --algo bcfw --partition features:0 $V
expect_error 2 "the data has 50 features" --algo bcfw --partition features:51 $V
expect_error 2 "differs from K" --algo bcfw --partition features:2 --clients 3 $V
expect_error 2 "tau-nice sampling draws tau of the 50 columns" --algo bcfw \
    --partition features:2 --sampling 1 --tau 60 $V
"$SIM" --algo bcfw --partition features:3 $V --dump-shards "$t/vs" --quiet ||
    fail "vertical --dump-shards"
[ "$(grep -v '^#' "$t/vs/blocks" | tr '\n' ' ')" = "0 0 17 1 17 17 2 34 16 " ] ||
    fail "blocks: $(cat "$t/vs/blocks")"
for k in 0 1 2; do
    [ "$(wc -l < "$t/vs/client-$k.svm")" -eq 60 ] || fail "shard $k rows"
    seq 0 59 | cmp -s - "$t/vs/client-$k.ids" || fail "shard $k ids"
done
[ -s "$t/vs/truth" ] || fail "no truth with the shards"

# Real data, k-means partition (skipped when the shared data folder is absent).
step "Real data, k-means partition (skipped when the shared data folder is absent)"
if [ -f "$DATA/derived/colon-cancer.libsvm" ]; then
    "$SIM" --algo fediterht --data libsvm:"$DATA/derived/colon-cancer.libsvm" \
        --partition kmeans:4 --clients 4 --parts 2 --tau 50 --rounds 5 --quiet > "$t/colon.csv" \
        || fail "colon-cancer run"
    head -1 "$t/colon.csv" | grep -q test_accuracy || fail "colon: no accuracy"
    "$SIM" --algo dpbcfw --data libsvm:"$DATA/derived/colon-cancer.libsvm" \
        --partition features:4 --m 20 --rounds 5 --quiet > "$t/vcolon.csv" \
        || fail "colon-cancer dpbcfw run"
    head -1 "$t/vcolon.csv" | grep -q test_accuracy || fail "colon dpbcfw: no accuracy"
else
    echo "skipped: $DATA/derived/colon-cancer.libsvm not found"
fi

# MNIST in its canonical gzip'd IDX files, the test set's 10,000 images with
# their labels (skipped when the shared data folder is absent).
step "MNIST from its IDX files: softmax FedAvg over 10 clients (skipped without the data)"
if [ -f "$DATA/mnist/t10k-images-idx3-ubyte.gz" ]; then
    "$SIM" --algo fedavg --loss softmax --clients 10 --rounds 3 --seed 1 --quiet         --data "idx:$DATA/mnist/t10k-images-idx3-ubyte.gz,$DATA/mnist/t10k-labels-idx1-ubyte.gz"         > "$t/mnist.csv" || fail "MNIST run"
    acc=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_accuracy") c = i }
                   END { print $c }' "$t/mnist.csv")
    # 10 classes: chance is 0.1; three rounds already do far better.
    awk -v a="$acc" 'BEGIN { exit !(a > 0.3) }' || fail "MNIST test accuracy $acc"
else
    echo "skipped: $DATA/mnist/t10k-images-idx3-ubyte.gz not found"
fi

# The CSV streams: each round's row is written (and flushed) when the round
# finishes, so a run killed midway keeps whole rows of its finished rounds.
step "--standardize: moments of the pooled training parts, raw dumps; --partition pfedme2020"
# 400 rows, labels 0..9, two varying features and a constant one
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d,%d,%d,5\n", i % 10, 100 + i % 7, (i * 13) % 11 }' \
    > "$t/std.csv"
"$SIM" --algo fedavg --data "csv:$t/std.csv" --partition pfedme2020 --clients 20 --loss softmax \
    --standardize --dump-shards "$t/std" --quiet 2> "$t/std.err" || fail "pfedme2020 dump"
grep -q "^sfl-sim: standardize: .* of 20 clients, 3 features (1 constant)," "$t/std.err" ||
    fail "standardize summary: $(cat "$t/std.err")"
# the overlap line with --quiet: rows repeat across clients
awk '/^sfl-sim: data:/ { exit !($3 > substr($6, 2) + 0 && $9 > 0) }' "$t/std.err" ||
    fail "pfedme2020 overlap: $(cat "$t/std.err")"
# the printed rows and sigma range are those of the raw training shards
# (test parts excluded; a standardized dump would have sigma near 1)
for f in "$t"/std/client-*.svm; do case $f in *.test.svm) ;; *) cat "$f" ;; esac; done |
    grep -v '^#' | awk -v err="$(grep standardize: "$t/std.err")" '
    { n++; for (k = 2; k <= NF; k++) { split($k, a, ":"); s[a[1]] += a[2]; q[a[1]] += a[2] * a[2] } }
    END { split(err, w, " "); lo = 1e300; hi = 0
          for (j = 1; j <= 2; j++) { m = s[j] / n; sd = sqrt(q[j] / n - m * m)
                                     if (sd < lo) lo = sd; if (sd > hi) hi = sd }
          d1 = w[14] - lo; d2 = w[16] - hi
          exit !(w[3] == n && d1 * d1 < 1e-9 * lo * lo && d2 * d2 < 1e-9 * hi * hi) }' ||
    fail "standardize statistics differ from the dumped training rows: $(cat "$t/std.err")"
printf '[sim]\nalgo = fedavg\ndata = synth:sim2\nclients = 3\nrounds = 2\nstandardize = 1\nstandardize_eps = 0.5\n' \
    > "$t/std.ini"
"$SIM" --config "$t/std.ini" --quiet 2> "$t/std2.err" > /dev/null || fail "standardize ini"
grep -q "eps 0.5$" "$t/std2.err" || fail "standardize_eps from the INI: $(cat "$t/std2.err")"
expect_error 2 "standardize-eps must be finite and > 0" --data synth:sim2 --clients 2 \
    --rounds 1 --standardize --standardize-eps 0
expect_error 2 "standardize applies to horizontal runs" --algo bcfw --data synth:dpbcfw \
    --partition features:2 --rounds 1 --standardize

step "CSV rows stream out as rounds finish"
"$SIM" --data synth:sparse --clients 3 --samples 40 --dim 200 --support 5 --tau 10 \
    --rounds 1000000 --quiet > "$t/stream.csv" &
sp=$!
rows() { [ "$(cat "$t/stream.csv" 2> /dev/null | wc -l)" -ge 4 ]; }
n=600
while [ $n -gt 0 ] && ! rows; do sleep 0.1; n=$((n - 1)); done
# stopped, not killed, for the check: SIGKILL can cut a write(2) short at a
# page boundary (the kernel checks for a fatal signal between pages), so a
# row straddling one could be left half written by the kill itself; a
# stopped process finishes the write it is in first
kill -STOP $sp 2>/dev/null || true
stopped() { [ "$(sed -n 's/^[0-9]* ([^)]*) \(.\).*/\1/p' /proc/$sp/stat 2>/dev/null)" = T ]; }
n=600
while [ $n -gt 0 ] && ! stopped; do sleep 0.1; n=$((n - 1)); done
rows || fail "no rows within 60 s of a streaming run"
last=$(tail -c 1 "$t/stream.csv" | od -An -c | tr -d ' ')
kill -9 $sp 2>/dev/null || true
wait $sp 2>/dev/null || true
[ "$last" = '\n' ] || fail "a running sfl-sim left a partial row (rows are not flushed one by one)"
awk -F, 'NR == 1 { n = NF } NF != n || (NR > 1 && $1 != NR - 1) { exit 1 }' "$t/stream.csv" ||
    fail "streamed rows are not whole: $(tail -2 "$t/stream.csv")"

# --plot never loses the run: the CSV goes to stdout whatever happens to the
# plot, a plot that cannot be drawn is one warning line, the exit status
# stays 0, and no temporary file is left behind (in TMPDIR, or /tmp).
mkdir "$t/tmp"
ls -d /tmp/sfl-sim-plot-* > "$t/tmp-before" 2>/dev/null || true
plotrun() { # $1 = PNG path, rest = environment (VAR=value ...)
    png=$1; shift
    set +e
    env TMPDIR="$t/tmp" "$@" "$SIM" --data synth:sparse --clients 3 --rounds 5 --tau 30 \
        --plot "$png" --quiet > "$t/p.csv" 2> "$t/p.err"
    rc=$?
    set -e
    [ $rc -eq 0 ] || fail "--plot $png: exit $rc: $(cat "$t/p.err")"
    [ "$(wc -l < "$t/p.csv")" -eq 6 ] || fail "--plot $png lost the CSV: $(cat "$t/p.csv")"
    [ -z "$(ls -A "$t/tmp")" ] || fail "--plot $png left $(ls -A "$t/tmp") in TMPDIR"
}
step "--plot without gnuplot: a warning, the CSV, exit 0"
plotrun "$t/none.png" PATH=/nonexistent
grep -q "^sfl-sim: warning: no plot written to $t/none.png: cannot run gnuplot" "$t/p.err" ||
    fail "no warning without gnuplot: $(cat "$t/p.err")"
# ... that says how to get it (issue 24 item 8)
grep -qF "gnuplot is not installed (sudo apt-get install gnuplot-nox, or make deps-test)" "$t/p.err" ||
    fail "no hint without gnuplot: $(cat "$t/p.err")"
[ "$(wc -l < "$t/p.err")" -eq 1 ] || fail "more than one line on stderr: $(cat "$t/p.err")"
if command -v gnuplot > /dev/null; then
    step "--plot draws a PNG and still writes the CSV"
    plotrun "$t/p.png"
    [ -s "$t/p.png" ] || fail "no plot"
    [ ! -s "$t/p.err" ] || fail "stderr of a good plot: $(cat "$t/p.err")"
    step "--plot into a directory that does not exist: a warning, exit 0"
    plotrun "$t/no/such/dir/p.png"
    grep -q "^sfl-sim: warning: no plot written to $t/no/such/dir/p.png: gnuplot failed" \
        "$t/p.err" || fail "no warning for a bad path: $(cat "$t/p.err")"
    [ "$(wc -l < "$t/p.err")" -eq 1 ] || fail "more than one line on stderr: $(cat "$t/p.err")"
    step "--plot with quotes, spaces, a newline and gnuplot syntax in the names"
    # (gnuplot runs in this directory: evil.png would appear here)
    odd="$t/it's a \"plot\" \`x\`; set output 'evil.png'
line2.png"
    plotrun "$odd"
    [ -s "$odd" ] || fail "no plot at the odd name"
    [ ! -e evil.png ] || { rm -f evil.png; fail "the file name was run as gnuplot code"; }
    # the data path goes into the title the same way
    mkdir "$t/odd dir's"
    "$SIM" --data synth:sparse --clients 2 --samples 20 --dim 50 --support 3 --tau 3 \
        --rounds 1 --quiet --dump-data "$t/odd dir's/in \"x\" '2'.svm" > /dev/null
    TMPDIR="$t/tmp" "$SIM" --data "libsvm:$t/odd dir's/in \"x\" '2'.svm" --clients 2 --tau 3 \
        --rounds 3 --plot "$t/odd dir's/p.png" --quiet > "$t/p.csv" 2> "$t/p.err" ||
        fail "odd data path: $(cat "$t/p.err")"
    [ -s "$t/odd dir's/p.png" ] && [ ! -s "$t/p.err" ] || fail "odd data path: $(cat "$t/p.err")"
    [ -z "$(ls -A "$t/tmp")" ] || fail "left $(ls -A "$t/tmp") in TMPDIR"
else
    echo "skipped: the PNG checks (gnuplot not installed)"
fi
ls -d /tmp/sfl-sim-plot-* > "$t/tmp-after" 2>/dev/null || true
cmp -s "$t/tmp-before" "$t/tmp-after" || fail "--plot left files in /tmp: $(cat "$t/tmp-after")"
echo "sim e2e: ok"
