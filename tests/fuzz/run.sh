#!/bin/sh
# Runs libFuzzer binaries, FUZZ_JOBS (default 1) at a time (tests/lib-pool.sh;
# make fuzz-quick runs two), each for FUZZ_SECONDS over its corpus, and
# prints one line per fuzzer, in the order given:
#   PASS    fuzz_x (N execs)
#   FAIL    fuzz_x: <reason>            (then the kept input and the log's tail)
# and, when SFL_RESULTS names a file, appends "PASS fuzz_x" or "FAIL fuzz_x"
# to it. Exits 1 if any fuzzer failed.
#
#   SFL_RESULTS=FILE FUZZ_SECONDS=10 sh tests/fuzz/run.sh build/fuzz/bin/fuzz_*
#
# Corpus: the committed seeds tests/fuzz/corpus/<fuzzer>/ are only read; new
# inputs go to $FUZZ_DIR/corpus/<fuzzer>/ (libFuzzer writes to the first
# directory it is given). A crash, leak, sanitizer report, hang (an input
# running FUZZ_INPUT_TIMEOUT s) or memory blow-up (over FUZZ_RSS_MB) fails
# the fuzzer and its input stays in $FUZZ_DIR/crashes/. The whole run of one
# fuzzer is bounded by FUZZ_WALL seconds (default 10 x FUZZ_SECONDS + 60:
# corpus loading and sanitizer start-up on a busy machine). FUZZ_FLAGS adds
# libFuzzer flags, e.g. FUZZ_FLAGS=-use_value_profile=1.
set -u

secs=${FUZZ_SECONDS:-10}
dir=${FUZZ_DIR:-build/fuzz}
wall=${FUZZ_WALL:-$((10 * secs + 60))}
input_timeout=${FUZZ_INPUT_TIMEOUT:-60}
rss=${FUZZ_RSS_MB:-2048}
seeds=${FUZZ_SEEDS:-tests/fuzz/corpus}

fail=0
mkdir -p "$dir/crashes" "$dir/logs" || exit 1
# shellcheck source=tests/lib-pool.sh
. "$(dirname "$0")/../lib-pool.sh"

result() {
    [ -n "${SFL_RESULTS:-}" ] && echo "$1 $2" >>"$SFL_RESULTS"
    return 0
}

# One fuzzer (a pool job): its lines for the terminal go to
# $dir/logs/NAME.out, shown by fuzz_report; exit 0 for a pass.
fuzz_start() { # index slot bin
    bin=$3
    name=$(basename "$bin")
    log=$dir/logs/$name.log
    exec > "$dir/logs/$name.out"
    if [ ! -x "$bin" ]; then
        echo "FAIL    $name: no such fuzzer binary $bin"
        return 1
    fi
    work=$dir/corpus/$name
    mkdir -p "$work"
    set -- "$work"
    [ -d "$seeds/$name" ] && set -- "$@" "$seeds/$name"
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    timeout -k 10 "$wall" "$bin" -max_total_time="$secs" -timeout="$input_timeout" \
        -rss_limit_mb="$rss" -print_final_stats=1 ${FUZZ_FLAGS:-} \
        -artifact_prefix="$dir/crashes/$name-" "$@" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ $rc -eq 0 ] && [ -n "$execs" ]; then
        echo "PASS    $name ($execs execs)"
        return 0
    fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        reason="still running after $wall s (FUZZ_WALL; it was given $secs s)"
    else
        # The first of: the fuzzer's own complaint ("fuzz_x: ..." before an
        # abort), a sanitizer's or libFuzzer's error line; else the status.
        reason=$(grep -m 1 -E "^$name: |^==[0-9]+== ?ERROR|runtime error:|^ERROR: libFuzzer|^SUMMARY: " \
            "$log" | sed 's/^==[0-9]*== *//')
        [ -n "$reason" ] || reason="exit status $rc"
    fi
    echo "FAIL    $name: $reason"
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    [ -n "$input" ] && echo "        input kept in $input (replay: $bin $input)"
    echo "        log: $log"
    tail -n 30 "$log" | sed 's/^/        /'
    return 1
}

fuzz_report() { # index status seconds bin
    name=$(basename "$4")
    cat "$dir/logs/$name.out" 2>/dev/null || echo "FAIL    $name: no result (exit status $2)"
    rm -f "$dir/logs/$name.out"
    if [ "$2" = 0 ]; then
        result PASS "$name"
    else
        result FAIL "$name"
        fail=1
    fi
}

pool_run "${FUZZ_JOBS:-1}" fuzz_start fuzz_report "$@"
exit $fail
