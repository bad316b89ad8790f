# A small job pool for the test runners (tests/run.sh, tests/fuzz/run.sh);
# sourced, not run. Most suites and e2e scripts spend their time waiting
# (on sockets, on child processes, on sanitizer start-up), so two at a time
# on a 2-core machine take little longer than the slower of the two.
#
#   pool_run JOBS START REPORT ITEM...
#
# runs `START INDEX SLOT ITEM` for every ITEM, at most JOBS at once, each in
# a background subshell whose exit status is the item's result. SLOT
# (0 .. JOBS - 1) is not shared with another item running at the same time:
# a job may use it to pick resources of its own (tests/e2e/lib.sh's ports).
# Then `REPORT INDEX STATUS SECONDS ITEM` runs in the calling shell, in the
# order of the list whatever order the items end in, so what a runner
# prints is never interleaved and reads as a serial run would: START writes
# everything to files, REPORT prints them. An item for which `POOL_ALONE
# ITEM` (a function name; unset: none) succeeds runs with no other.
# pool_run's status is 0; the REPORT functions record the results.
# Completions come through a FIFO (one "INDEX STATUS SECONDS" line per
# item), so the pool waits on reads, never polls.

pool_run() { # jobs start report item...
    _pj=$1 _pstart=$2 _preport=$3
    shift 3
    [ "$_pj" -ge 1 ] 2>/dev/null || _pj=1
    _pn=0
    for _pi in "$@"; do
        _pn=$((_pn + 1))
        eval "_pitem_$_pn=\$_pi; _prc_$_pn="
    done
    [ "$_pn" -gt 0 ] || return 0
    _pdir=$(mktemp -d "${TMPDIR:-/tmp}/sfl-pool.XXXXXX") || return 1
    mkfifo "$_pdir/done" || { rm -rf "$_pdir"; return 1; }
    # Read-write, so neither open blocks and the read end never sees EOF.
    exec 4<>"$_pdir/done"
    _pfree='' _ps=0
    while [ "$_ps" -lt "$_pj" ]; do _pfree="$_pfree $_ps"; _ps=$((_ps + 1)); done
    _pstarted=0 _pprinted=0 _prunning=0 _palone=0
    while [ "$_pprinted" -lt "$_pn" ]; do
        while [ "$_pstarted" -lt "$_pn" ] && [ "$_prunning" -lt "$_pj" ] && [ "$_palone" = 0 ]; do
            _pk=$((_pstarted + 1))
            eval "_pi=\$_pitem_$_pk"
            if [ -n "${POOL_ALONE:-}" ] && "$POOL_ALONE" "$_pi"; then
                [ "$_prunning" = 0 ] || break
                _palone=1
            fi
            _ps=${_pfree# }; _ps=${_ps%% *}
            _pfree=$(echo "$_pfree" | sed "s/ $_ps\( \|\$\)/\1/")
            eval "_pslot_$_pk=$_ps"
            (
                exec 4>&-
                _t0=$(date +%s)
                "$_pstart" "$_pk" "$_ps" "$_pi" 4>&-
                _r=$?
                echo "$_pk $_r $(($(date +%s) - _t0))" >> "$_pdir/done"
            ) &
            _pstarted=$_pk
            _prunning=$((_prunning + 1))
        done
        read -r _pk _pr _psec <&4 || break
        eval "_prc_$_pk=\$_pr; _psec_$_pk=\$_psec; _pfree=\"\$_pfree \$_pslot_$_pk\""
        _prunning=$((_prunning - 1))
        [ "$_prunning" = 0 ] && _palone=0
        while [ "$_pprinted" -lt "$_pn" ]; do
            _pk=$((_pprinted + 1))
            eval "_pr=\$_prc_$_pk; _psec=\${_psec_$_pk:-0}; _pi=\$_pitem_$_pk"
            [ -n "$_pr" ] || break
            "$_preport" "$_pk" "$_pr" "$_psec" "$_pi"
            _pprinted=$_pk
        done
    done
    exec 4<&-
    wait
    rm -rf "$_pdir"
    return 0
}
