#!/bin/sh
# The test runner behind `make test` and its stages (unit, SAN=1 unit, e2e,
# fuzz-quick, test-cross). Runs every suite even after a failure, prints one
# line per suite as it ends and records it, so `make test` can end with one
# summary line whatever failed.
#
#   tests/run.sh unit BIN...      CMocka suites; each log in BIN.log
#   tests/run.sh e2e LOGDIR SCRIPT...
#                                 e2e scripts (sh); their `step` lines reach
#                                 the terminal through fd 3 (lib-step.sh),
#                                 everything else goes to LOGDIR/NAME.log;
#                                 exit 77 is a skip ("SKIP: why" in the log)
#   tests/run.sh record PASS|FAIL|SKIP NAME [WHY]
#                                 records a result the runner did not run
#                                 (a stage whose build failed, say)
#   tests/run.sh summary          "N passed, N failed, N skipped"; exits 1 if
#                                 anything failed or nothing ran
#
# Results go to $SFL_RESULTS (one "PASS|FAIL|SKIP name" per line) when set.
# SFL_TIMEOUT (seconds, default 900) bounds each suite: ten times and more
# what the slowest one needs on a loaded 2-core machine, so only a hang
# reaches it. SFL_WRAP prefixes each unit suite's command (qemu-user for
# cross builds).
set -u

TIMEOUT=${SFL_TIMEOUT:-900}

record() { # result name [why]
    [ -n "${SFL_RESULTS:-}" ] && echo "$1 $2" >> "$SFL_RESULTS"
    return 0
}

now() { date +%s; }

# The "skipped: why" lines a suite printed, joined; empty when none.
skip_reasons() {
    grep -i '^ *skipped: ' "$1" 2>/dev/null | sed 's/^ *[Ss]kipped: //' | sort -u |
        paste -sd ';' - | sed 's/;/; /g'
}

run_unit() {
    fail=0
    for t in "$@"; do
        name=${t#./}
        s=$(now)
        # shellcheck disable=SC2086
        SFL_TEST_DATA=${SFL_TEST_DATA:-../shared/data} timeout "$TIMEOUT" \
            ${SFL_WRAP:-} "$t" > "$t.log" 2>&1
        rc=$?
        s=$(($(now) - s))
        passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$t.log" | tail -n 1)
        skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$t.log" | tail -n 1)
        why=$(skip_reasons "$t.log")
        if [ "$rc" = 124 ]; then
            echo "FAIL    $name (no end after $TIMEOUT s: hung)"
            tail -n 30 "$t.log"; record FAIL "$name"; fail=1
        elif [ "$rc" != 0 ]; then
            echo "FAIL    $name ($s s, exit $rc)"
            cat "$t.log"; record FAIL "$name"; fail=1
        elif [ -n "$skipped" ] && [ "${passed:-0}" = 0 ]; then
            echo "SKIP $name: ${why:-every test skipped}"; record SKIP "$name"
        elif [ -n "$skipped" ]; then
            echo "PASS    $name ($s s; $skipped test(s) skipped: ${why:-no reason given})"
            record PASS "$name"
        else
            echo "PASS    $name ($s s)"; record PASS "$name"
        fi
    done
    return $fail
}

run_e2e() {
    logdir=$1; shift
    fail=0
    for t in "$@"; do
        log="$logdir/${t##*/}.log"
        echo "RUN     $t"
        s=$(now)
        timeout "$TIMEOUT" sh "$t" 3>&1 > "$log" 2>&1
        rc=$?
        s=$(($(now) - s))
        why=$(skip_reasons "$log")
        case $rc in
        0) echo "PASS    $t ($s s${why:+; skipped: $why})"; record PASS "$t" ;;
        77) echo "SKIP $t: $(sed -n 's/^SKIP: //p' "$log" | tail -n 1)"; record SKIP "$t" ;;
        124) echo "FAIL    $t (no end after $TIMEOUT s: hung)"; tail -n 40 "$log"
            record FAIL "$t"; fail=1 ;;
        *) echo "FAIL    $t ($s s, exit $rc)"; cat "$log"; record FAIL "$t"; fail=1 ;;
        esac
    done
    return $fail
}

summary() {
    f=${SFL_RESULTS:?SFL_RESULTS is not set}
    p=0 x=0 k=0
    if [ -s "$f" ]; then
        p=$(grep -c '^PASS ' "$f"); x=$(grep -c '^FAIL ' "$f"); k=$(grep -c '^SKIP ' "$f")
    fi
    if [ "$x" -gt 0 ]; then
        echo "failed:"; sed -n 's/^FAIL /  /p' "$f"
    fi
    echo "$p passed, $x failed, $k skipped"
    [ "$x" = 0 ] && [ "$p" -gt 0 ]
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
unit)
    # One throwaway PostgreSQL cluster for the suites that test the store's
    # PostgreSQL backend (SFL_TEST_PG: its conninfo); without one they skip
    # those tests, saying why. An SFL_TEST_PG already set is used as is.
    pgdir=
    if [ -z "${SFL_TEST_PG:-}" ]; then
        pgdir=$(mktemp -d "${TMPDIR:-/tmp}/sfl-unit-pg.XXXXXX")
        trap 'sh "$(dirname "$0")/pgcluster.sh" destroy "$pgdir" >/dev/null 2>&1; rm -rf "$pgdir"' EXIT
        if SFL_TEST_PG=$(sh "$(dirname "$0")/pgcluster.sh" start "$pgdir" 2>"$pgdir/start.err"); then
            export SFL_TEST_PG
        else
            echo "note: no PostgreSQL cluster for the unit suites ($(tail -n 1 "$pgdir/start.err")): their PostgreSQL tests skip"
            unset SFL_TEST_PG
        fi
    fi
    run_unit "$@" ;;
e2e) run_e2e "$@" ;;
record)
    [ $# -ge 2 ] || { echo "usage: tests/run.sh record PASS|FAIL|SKIP NAME [WHY]" >&2; exit 2; }
    case $1 in PASS) echo "PASS    $2" ;; FAIL) echo "FAIL    $2${3:+: $3}" ;; SKIP) echo "SKIP $2: ${3:-}" ;; esac
    record "$1" "$2" ;;
summary) summary ;;
*) echo "usage: tests/run.sh unit|e2e|record|summary ... (see the header)" >&2; exit 2 ;;
esac
