#!/bin/sh
# sfl-coordinator as a systemd Type=notify service, without systemd: a
# python3 unix datagram socket stands in for $NOTIFY_SOCKET and records what
# the coordinator tells the service manager (deploy/systemd/):
#   - READY=1 with a STATUS arrives first, and the port accepts connections
#     by then; WATCHDOG=1 pings come at half of $WATCHDOG_USEC;
#   - `--backup DEST` from a second process while rounds commit gives a
#     verified single-file copy;
#   - SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1 with the outcome,
#     for a reload that creates a new [job] and for a file that no longer
#     parses (the coordinator keeps running);
#   - SIGTERM while an attempt has its quorum (cohort 2, quorum 1, one agent
#     frozen with SIGSTOP so the attempt waits for it): STOPPING=1, that
#     round is committed after the signal, exit status 0, and the restarted
#     coordinator resumes the job from that round.
# Bounded: every wait has a timeout; about 15 s.
set -eu
. tests/e2e/lib.sh
PY=/usr/bin/python3
if ! [ -x "$PY" ]; then
    echo "SKIP: service.sh needs $PY"
    exit 0
fi
port=$(pick_port)
pki_federation agent-0 agent-1
mkdir -p "$t/data"
"$BIN/sfl-sim" --data synth:sparse --clients 2 --samples 40 --dim 50 --support 3 --seed 5 \
    --dump-shards "$t/data"

# Only full selections start (select_wait_ms is long), so an attempt always
# has both agents; with one frozen it waits for it, holding its quorum of 1.
step "start: coordinator under a stand-in service manager"
{ coordinator_section "127.0.0.1:$port" "off"; cat <<EOF
select_wait_ms = 60000
tick_ms = 50
pace_min_ms = 100
idle_retry_ms = 300

[job svc]
algo = fediterht
features = 50
tau = 3
local_steps = 2
lr = 0.1
batch = 40
rounds = 100000
cohort = 2
overselect = 0
min_quorum = 1
deadline_ms = 60000
heartbeat_ms = 60000
seed = 5
EOF
} > "$t/coordinator.ini"
cp "$t/coordinator.ini" "$t/good.ini"

# The stand-in service manager: one line per datagram, newlines as '|'.
cat > "$t/listen.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode("utf-8", "replace").replace("\n", "|") + "\n")
EOF
SOCK="$t/notify.sock"
"$PY" "$t/listen.py" "$SOCK" "$t/notify.log" &
pids="$pids $!"
wait_for 5 test -S "$SOCK" || fail "notify listener did not start"
: > "$t/notify.log"

start_coord() {
    NOTIFY_SOCKET="$SOCK" WATCHDOG_USEC=400000 \
        "$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
    coord=$!
    pids="$pids $coord"
}
notes() { grep -c "$1" "$t/notify.log" || true; }
more_notes() { [ "$(notes "$1")" -ge "$2" ]; }
port_open() {
    "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
        "$port" 2> /dev/null
}
stop_coord() { # SIGTERM, bounded wait; sets rc to the exit status
    kill -TERM "$coord"
    wait_for 20 sh -c "! kill -0 $coord 2>/dev/null" || fail "coordinator did not stop in 20 s"
    rc=0
    wait "$coord" || rc=$?
}

# ---- readiness and watchdog -----------------------------------------------------------
step "readiness and watchdog"
start_coord
wait_for 15 more_notes "^READY=1" 1 || fail "no READY=1"
port_open || fail "READY=1 arrived but port $port does not accept connections"
[ "$(head -n 1 "$t/notify.log")" = "READY=1|STATUS=running; listening on 127.0.0.1:$port (port $port)" ] ||
    fail "first notification: $(head -n 1 "$t/notify.log")"
wait_for 5 more_notes "^WATCHDOG=1$" 3 || fail "fewer than 3 WATCHDOG=1 pings in 5 s"
grep -q "event=watchdog interval_ms=200" "$t/coord.log" || fail "watchdog interval not 200 ms"
echo "notify: READY=1 once listening, WATCHDOG=1 every 200 ms: ok"

# ---- online backup while rounds commit ------------------------------------------------
step "online backup while rounds commit"
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
commits() { grep -c "event=round_committed" "$t/coord.log" || true; }
at_least() { [ "$(commits)" -ge "$1" ]; }
start_agent 0
start_agent 1
wait_for 30 at_least 5 || fail "no 5 committed rounds"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --backup "$t/backup/coordinator.db" \
    > "$t/backup.log" 2>&1 && fail "backup into a missing directory succeeded"
grep -q "No such file or directory" "$t/backup.log" || fail "backup error: $(cat "$t/backup.log")"
mkdir "$t/backup"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --backup "$t/backup/coordinator.db" \
    > "$t/backup.log" 2>&1 || fail "backup: $(cat "$t/backup.log")"
grep -q "^backup of $t/state/coordinator.db written to $t/backup/coordinator.db: [0-9]* bytes, integrity_check ok$" \
    "$t/backup.log" || fail "backup output: $(cat "$t/backup.log")"
[ "$(ls "$t/backup")" = "coordinator.db" ] || fail "backup left files: $(ls "$t/backup")"
"$PY" - "$t/backup/coordinator.db" > "$t/backupcheck.log" 2>&1 <<'EOF' || fail "backup copy: $(cat "$t/backupcheck.log")"
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
q = lambda sql: db.execute(sql).fetchone()[0]
assert q("PRAGMA integrity_check") == "ok"
assert q("PRAGMA journal_mode") == "delete", q("PRAGMA journal_mode")
assert q("PRAGMA application_id") == 0x73666C63
n = q("SELECT count(*) FROM rounds WHERE state = 'committed'")
last = q("SELECT last_committed_round FROM jobs WHERE id = 1")
ck = q("SELECT max(round) FROM checkpoints WHERE job_id = 1")
assert n >= 5 and n == last == ck, (n, last, ck)
print(f"backup: {n} committed rounds, checkpoint of round {ck}")
EOF
cat "$t/backupcheck.log"

# ---- reload ---------------------------------------------------------------------------
step "reload"
cat >> "$t/coordinator.ini" <<'EOF'

[job second]
features = 50
tau = 3
conditions = never_reported
EOF
kill -HUP "$coord"
wait_for 10 more_notes "^READY=1" 2 || fail "no READY=1 after SIGHUP"
grep "^RELOADING=1" "$t/notify.log" | grep -Eq "^RELOADING=1\|MONOTONIC_USEC=[0-9]+\|STATUS=reloading the configuration$" ||
    fail "RELOADING=1: $(grep RELOADING "$t/notify.log")"
grep "^READY=1" "$t/notify.log" | sed -n 2p |
    grep -q "^READY=1|STATUS=running; reloaded $t/coordinator.ini: 1 jobs added$" ||
    fail "READY=1 after reload: $(grep '^READY' "$t/notify.log")"
grep -q "event=reload config=$t/coordinator.ini jobs_added=1 " "$t/coord.log" || fail "no reload line"
# the order: RELOADING=1 before the second READY=1
[ "$(grep -E '^(READY|RELOADING)' "$t/notify.log" | cut -c1-9 | tr '\n' ' ')" = "READY=1|S RELOADING READY=1|S " ] ||
    fail "order: $(grep -E '^(READY|RELOADING)' "$t/notify.log")"
printf '[coordinator\nlisten = nowhere\n' > "$t/coordinator.ini"
kill -HUP "$coord"
wait_for 10 more_notes "^READY=1" 3 || fail "no READY=1 after a failed reload"
grep "^READY=1" "$t/notify.log" | sed -n 3p | grep -q "^READY=1|STATUS=running; reload failed: " ||
    fail "READY=1 after failed reload: $(grep '^READY' "$t/notify.log")"
grep -q "event=reload_failed" "$t/coord.log" || fail "no reload_failed line"
cp "$t/good.ini" "$t/coordinator.ini"
kill -0 "$coord" || fail "the coordinator died on a bad reload"
echo "notify: RELOADING=1 + MONOTONIC_USEC then READY=1 (job added; bad file kept running): ok"

# ---- graceful stop with an attempt that has its quorum -------------------------------
# Stuck: the last attempt opened has an accepted update and no commit, so it
# waits for the frozen agent.
stuck() {
    r=$(grep "event=round_open job=1 " "$t/coord.log" | tail -n 1 | sed 's/.* round=\([0-9]*\) .*/\1/')
    [ -n "$r" ] || return 1
    if grep -q "event=round_committed job=1 round=$r " "$t/coord.log"; then return 1; fi
    grep -q "event=update .*job=1 round=$r .*verdict=accepted" "$t/coord.log"
}
caught=0
for try in 1 2 3 4 5 6 7 8 9 10; do
    kill -STOP "$agent_1"
    sleep 1
    if stuck; then caught=1; break; fi
    kill -CONT "$agent_1"
    sleep 0.3
done
[ $caught = 1 ] || fail "no attempt caught waiting for the frozen agent"
R=$r
mark=$(wc -l < "$t/coord.log")
stop_coord
[ "$rc" -eq 0 ] || fail "exit status $rc after SIGTERM"
grep -q "^STOPPING=1|STATUS=stopping: committing rounds that have a quorum$" "$t/notify.log" ||
    fail "no STOPPING=1: $(tail -n 3 "$t/notify.log")"
tail -n +"$((mark + 1))" "$t/coord.log" > "$t/stop.log"
grep -q "event=signal signal=TERM" "$t/stop.log" || fail "no signal line"
grep -q "event=round_committed job=1 round=$R .*accepted=1 " "$t/stop.log" ||
    fail "round $R (quorum reached) not committed at SIGTERM: $(cat "$t/stop.log")"
grep -q "event=stopped" "$t/stop.log" || fail "no stopped line"

start_coord
wait_for 15 grep -q "event=job_resumed job=1 name=svc state=running committed_round=$R " \
    "$t/coord.log" || fail "the job did not resume from round $R"
grep "event=state_loaded" "$t/coord.log" | tail -n 1 | grep -q "rounds_abandoned=0" ||
    fail "the graceful stop left live rounds"
wait_for 15 more_notes "^READY=1" 4 || fail "no READY=1 after the restart"
kill -CONT "$agent_1"
stop_coord
[ "$rc" -eq 0 ] || fail "exit status $rc after the second SIGTERM"
echo "graceful stop: round $R committed at SIGTERM with its quorum, exit 0, resumed from it: ok"
echo "service e2e: ok"
