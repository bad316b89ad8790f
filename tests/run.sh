#!/bin/sh
# The test runner behind `make test` and its stages (unit, SAN=1 unit, e2e,
# fuzz-quick, test-cross). Runs every suite even after a failure, prints one
# line per suite and records it, so `make test` can end with one summary
# line whatever failed.
#
#   tests/run.sh unit BIN...      CMocka suites; each log in BIN.log
#   tests/run.sh e2e LOGDIR SCRIPT...
#                                 e2e scripts (sh); their `step` lines (fd 3,
#                                 lib-step.sh) reach the terminal when the
#                                 script ends, everything else goes to
#                                 LOGDIR/NAME.log; exit 77 is a skip
#                                 ("SKIP: why" in the log)
#   tests/run.sh record PASS|FAIL|SKIP NAME [WHY]
#                                 records a result the runner did not run
#                                 (a stage whose build failed, say)
#   tests/run.sh summary          "N passed, N failed, N skipped"; exits 1 if
#                                 anything failed or nothing ran
#
# SFL_JOBS (default 2) suites or scripts run at once (tests/lib-pool.sh);
# what each printed is shown whole, in the order of the arguments, as a
# serial run would show it (a failure's whole log, too). Their "(N s)" is
# each one's own wall time.
# Results go to $SFL_RESULTS (one "PASS|FAIL|SKIP name" per line) when set.
# SFL_TIMEOUT (seconds, default 900) bounds each suite: ten times and more
# what the slowest one needs on a loaded 2-core machine, so only a hang
# reaches it. SFL_WRAP prefixes each unit suite's command (qemu-user for
# cross builds).
set -u

TIMEOUT=${SFL_TIMEOUT:-900}
JOBS=${SFL_JOBS:-2}
# shellcheck source=tests/lib-pool.sh
. "$(dirname "$0")/lib-pool.sh"

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

# One unit suite (a pool job: tests/lib-pool.sh); its output in BIN.log.
unit_start() { # index slot bin
    # shellcheck disable=SC2086
    SFL_TEST_DATA=${SFL_TEST_DATA:-../shared/data} timeout "$TIMEOUT" \
        ${SFL_WRAP:-} "$3" > "$3.log" 2>&1
}

unit_report() { # index status seconds bin
    t=$4 rc=$2 s=$3
    name=${t#./}
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
}

run_unit() {
    fail=0
    pool_run "$JOBS" unit_start unit_report "$@"
    return $fail
}

# One e2e script (a pool job): everything it prints goes to LOGDIR/NAME.log,
# its step lines (fd 3) to LOGDIR/NAME.steps until it ends. It gets its own
# TCP port range (SFL_PORT_SLOT of SFL_PORT_SLOTS: tests/e2e/lib.sh's
# pick_port), so two scripts at once never pick the same port.
e2e_start() { # index slot script
    log="$logdir/${3##*/}.log"
    SFL_PORT_SLOT=$2 SFL_PORT_SLOTS=$JOBS timeout "$TIMEOUT" sh "$3" \
        3> "${log%.log}.steps" > "$log" 2>&1
}

e2e_report() { # index status seconds script
    t=$4 rc=$2 s=$3
    log="$logdir/${t##*/}.log"
    echo "RUN     $t"
    cat "${log%.log}.steps" 2>/dev/null; rm -f "${log%.log}.steps"
    why=$(skip_reasons "$log")
    case $rc in
    0) echo "PASS    $t ($s s${why:+; skipped: $why})"; record PASS "$t" ;;
    77) echo "SKIP $t: $(sed -n 's/^SKIP: //p' "$log" | tail -n 1)"; record SKIP "$t" ;;
    124) echo "FAIL    $t (no end after $TIMEOUT s: hung)"; tail -n 40 "$log"
        record FAIL "$t"; fail=1 ;;
    *) echo "FAIL    $t ($s s, exit $rc)"; cat "$log"; record FAIL "$t"; fail=1 ;;
    esac
}

# A script whose header has the line "# run.sh: alone" runs with no other
# (it measures or loads the whole machine).
e2e_alone() { grep -q '^# run.sh: alone' "$1"; }

run_e2e() {
    logdir=$1; shift
    fail=0
    POOL_ALONE=e2e_alone pool_run "$JOBS" e2e_start e2e_report "$@"
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
        # test_store's restart test makes a cluster of its own in $pgdir/restart
        trap 'for d in "$pgdir/restart" "$pgdir"; do sh "$(dirname "$0")/pgcluster.sh" destroy "$d" >/dev/null 2>&1; done; rm -rf "$pgdir"' EXIT
        if SFL_TEST_PG=$(sh "$(dirname "$0")/pgcluster.sh" start "$pgdir" 2>"$pgdir/start.err"); then
            export SFL_TEST_PG
            # where the restart test makes its own cluster (it runs
            # pgcluster.sh: not from under qemu-user)
            if [ -z "${SFL_WRAP:-}" ]; then SFL_TEST_PG_DIR=$pgdir; export SFL_TEST_PG_DIR; fi
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
