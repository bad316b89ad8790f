#!/bin/sh
# README.md's "Running a federation" walk-through, run as a new user would:
# the code block marked <!-- walkthrough ... --> is extracted and run line by
# line in one shell (comments skipped), in a scratch copy of the repository
# root (deploy/ copied, the programs of $SFL_BIN linked into build/) whose
# deploy/local/*.ini get free ports instead of 7443, 7444 and 9464. Each
# line is a step. Like a user pasting line by line, the runner waits before `job
# create` until both agents have joined, so the job is created while they
# are connected and idle; it must reach them at once on their open Subscribe
# streams (no agent logs a Wait before its first training). Checks: every
# line succeeds, `sflctl watch 1` returns once the job finished, `sflctl
# jobs` shows it finished with all its rounds, and the last line stops every
# process. The whole block is bounded by 120 s (it needs a few seconds on an
# idle machine); the time to the finished job is printed.
set -eu
. tests/e2e/lib.sh
SFL_STEP_NAME=walkthrough.sh

for p in sfl-sim sfl-coordinator sfl-agent sflctl; do
    [ -x "$BIN/$p" ] || fail "$BIN/$p missing (make first)"
done
case $BIN in /*) abs=$BIN ;; *) abs=$ROOT/$BIN ;; esac

step "extracting the walk-through from README.md"
awk '/^<!-- walkthrough/ { mark = 1; next }
     mark && /^```sh/ { on = 1; mark = 0; next }
     on && /^```/ { on = 0; next }
     on { print }
     { mark = mark && /^[ \t]*$/ }' README.md > "$t/block.sh"
[ -s "$t/block.sh" ] || fail "no <!-- walkthrough --> code block in README.md"
grep -q " watch 1" "$t/block.sh" || fail "the walk-through does not watch job 1"

step "a scratch copy of the repository root"
r=$t/repo
mkdir -p "$r/build"
cp -R "$ROOT/deploy" "$r/deploy"
for p in sfl-sim sfl-coordinator sfl-agent sflctl; do ln -s "$abs/$p" "$r/build/$p"; done
port=$(pick_port)
mport=$((port + 1))
aport=$(pick_port)
[ "$aport" != "$port" ] && [ "$aport" != "$mport" ] && [ "$((aport + 1))" != "$port" ] || aport=$((port + 2))
sed -i "s/:7443\$/:$port/; s/:9464\$/:$mport/; s/:7444\$/:$aport/" "$r"/deploy/local/*.ini
# The checks below read the agents' per-round lines (training, wait): debug.
for a in 0 1; do echo "log_level = debug" >> "$r/deploy/local/agent-$a.ini"; done
grep -q ":$port\$" "$r/deploy/local/coordinator.ini" || fail "deploy/local/coordinator.ini has no listen = ...:7443"

# The script a user's shell would run: each line, preceded by its step and
# followed by a time mark. Before `job create`: wait for both agents' Join.
{
    echo "set -e"
    echo ". '$ROOT/tests/e2e/lib-step.sh'"
    echo "SFL_STEP_NAME=walkthrough.sh"
    echo "echo \"start \$(date +%s%N)\" > '$t/marks'"
    n=0
    while IFS= read -r line; do
        case $line in '' | '#'*) continue ;; esac
        n=$((n + 1))
        case $line in
        *" watch 1"*) watch_n=$n ;;
        *"job create"*)
            echo "step 'waiting for both agents to join, as a user would before the next line'"
            echo "until [ \"\$(grep -c 'event=join ' build/local/coordinator.log)\" -ge 2 ]; do sleep 0.1; done"
            ;;
        esac
        q=$(printf '%s' "$line" | sed "s/'/'\\\\''/g")
        echo "step 'README line $n: $q'"
        echo "$line"
        echo "echo \"line$n \$(date +%s%N)\" >> '$t/marks'"
    done < "$t/block.sh"
} > "$t/walk.sh"

# Whatever the block leaves running in the scratch copy is killed at exit.
reap() {
    for d in /proc/[0-9]*; do
        [ "$(readlink "$d/cwd" 2>/dev/null)" = "$r" ] || continue
        kill -9 "${d#/proc/}" 2>/dev/null || true
    done
}
trap 'reap; cleanup' EXIT

step "running the walk-through"
rc=0
(cd "$r" && timeout 120 sh "$t/walk.sh") > "$t/walk.out" 2> "$t/walk.err" || rc=$?
cp "$r"/build/local/*.log "$t/" 2>/dev/null || true
[ "$rc" -eq 0 ] || fail "the walk-through failed (status $rc; 124: not done in 120 s): $(tail -n 5 "$t/walk.err")"

step "checking the job finished, reached idle agents at once, and everything stopped"
grep -q "^job 1 walk: finished, 20/20 rounds committed" "$t/walk.out" ||
    fail "sflctl watch 1 did not end with the job finished: $(cat "$t/walk.out")"
grep -Eq "^1 +walk +fediterht +finished +20/20 " "$t/walk.out" ||
    fail "sflctl jobs does not show job 1 finished: $(cat "$t/walk.out")"
grep -q "^job 1 round 20: dimension 200" "$t/walk.out" || fail "model export: $(cat "$t/walk.out")"
for a in 0 1; do
    log=$r/build/local/agent-$a.log
    first=$(grep -n "event=training" "$log" | head -n 1 | cut -d: -f1)
    [ -n "$first" ] || fail "agent-$a never trained"
    head -n "$first" "$log" | grep -q "event=wait " &&
        fail "agent-$a got a Wait before its first task: $(grep "event=wait " "$log" | head -n 1)"
    grep -q "event=stopped" "$log" || fail "agent-$a did not stop"
done
grep -q "event=stopped" "$r/build/local/coordinator.log" || fail "the coordinator did not stop"
for d in /proc/[0-9]*; do
    [ "$(readlink "$d/cwd" 2>/dev/null)" = "$r" ] && fail "process ${d#/proc/} still runs after the last line"
done

start=$(sed -n 's/^start //p' "$t/marks")
fin=$(sed -n "s/^line$watch_n //p" "$t/marks")
end=$(tail -n 1 "$t/marks" | cut -d' ' -f2)
lines=$(grep -c "^step 'README line" "$t/walk.sh")
echo "walkthrough e2e: ok ($lines README lines; job finished $(( (fin - start) / 1000000 )) ms after the first line, everything stopped after $(( (end - start) / 1000000 )) ms)"
