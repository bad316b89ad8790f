# Progress and skips for the e2e scripts; sourced (`. tests/e2e/lib-step.sh`,
# lib.sh does it), not a test itself: make e2e runs tests/e2e/*.sh except
# lib*.sh.
#
# step TEXT  one progress line: in the script's log and, when the runner
#            opened fd 3, there too (tests/run.sh: a file it prints above
#            the script's result line, so two scripts run at once never mix
#            their lines; a script run by hand with 3>&1 shows them as they
#            happen).
# skip WHY   ends the script as skipped (exit 77); the runner prints
#            "SKIP <script>: WHY" instead of PASS.
SFL_STEP_NAME=${0##*/}
step() {
    echo "step: $*"
    { printf '        %s: %s\n' "$SFL_STEP_NAME" "$*" >&3; } 2>/dev/null || true
}
skip() {
    echo "SKIP: $*"
    exit 77
}
