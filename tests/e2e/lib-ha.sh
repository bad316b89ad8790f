# Shared setup of the round-master failover tests (ha.sh, ha_fence.sh,
# ha_soak.sh); sourced after lib.sh, not a test itself. Gives:
#   ha_setup ROUNDS [JOBKEYS]  PKI (3 agents), shards, a throwaway PostgreSQL
#                       cluster ($t/pg, destroyed on exit), masters m1 and m2
#                       ($t/m1.ini, $t/m2.ini: role = master, the same store
#                       and fleet identity, own state_dir and ports), PK
#   master_start NAME   runs NAME under a supervisor that starts it again
#                       when it exits (3: fenced; 1: the store unreachable at
#                       the start), as systemd's Restart=always would; a kill
#                       -9 (status 137) ends the supervisor. $t/NAME.pid holds
#                       the running process's pid, $t/NAME.exits every exit
#                       status
#   master_kill NAME    kill -9 of NAME's process; its supervisor ends
#   freeze_inflight NAME  SIGSTOP of NAME (the leader) at an instant when a
#                       round of job 1 is in flight in the store and no session
#                       is inside a statement or transaction (so nothing can
#                       change under the frozen master): tried again (SIGCONT,
#                       SIGSTOP) until that holds; the check runs on the
#                       frozen state, so its outcome does not depend on speed
#   leader_epoch        the highest epoch any master logged event=leader with
#   leader_name         the master that logged it
#   ha_agents           starts agent-0..2 one at a time (ids follow the
#                       shards, as sfl-sim's clients) with both masters'
#                       addresses
#   fe_start F [LINES]  front-end F (sfl-pki frontend fe<F>; both masters, metrics
#                       off, LINES appended to its [coordinator]) started and
#                       waited for until it reached a master: its pid in fe_<F>,
#                       its port in fp<F>
#   fleet_agent I ADDRS starts agent-I (its pid in agent_<I>) with the
#                       addresses ADDRS (masters or front-ends), heartbeats
#                       every 500 ms
#   ctl_leader          points $t/sflctl.ini at the leading master; sets CTL
#   same_as_sim         the job's model (exported from the leader) equals
#                       sfl-sim's bit for bit
#   history_once        sflctl job history shows rounds 1..ROUNDS once each
# Skips (exit 77) when PostgreSQL's server binaries are not installed.
PSQL=
HA_ROUNDS=
ha_cleanup() {
    touch "$t/stop" 2>/dev/null || true
    for n in m1 m2; do
        [ -f "$t/$n.pid" ] && kill -9 "$(cat "$t/$n.pid")" 2>/dev/null || true
    done
    tests/pgcluster.sh destroy "$t/pg" > /dev/null 2>&1 || true
    cleanup
}
trap ha_cleanup EXIT

ha_setup() { # $1 = rounds, $2 = extra [job] keys (may be empty)
    HA_ROUNDS=$1
    pgbin=
    for b in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$b/initdb" ] && { pgbin=$b; break; }
    done
    [ -n "$pgbin" ] || skip "no PostgreSQL server binaries (Debian: apt-get install postgresql-15)"
    PSQL="$pgbin/psql"
    conninfo=$(tests/pgcluster.sh start "$t/pg") || fail "cannot start the PostgreSQL cluster"
    [ -z "${HA_PG_SETUP:-}" ] || $HA_PG_SETUP
    pki_federation agent-0 agent-1 agent-2
    mkdir -p "$t/data" "$t/m1" "$t/m2"
    SIMDATA="--data synth:sparse --clients 3 --samples 40 --dim 2000 --support 10 --seed 7"
    # shellcheck disable=SC2086
    "$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
    p1=$(pick_port)
    p2=$(pick_port)
    while [ "$p2" -le $((p1 + 1)) ] && [ "$p2" -ge $((p1 - 1)) ]; do p2=$(pick_port); done
    for n in m1 m2; do
        case $n in m1) p=$p1 ;; *) p=$p2 ;; esac
        printf '[coordinator]\nlisten = 127.0.0.1:%s\nadmin_listen = 127.0.0.1:%s\nmetrics_listen = off\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nstore = postgresql:%s\nrole = master\nleader_retry_ms = 200\nheartbeat_interval_ms = 500\n' \
            "$p" $((p + 1)) "$t/pki/coordinator/coord.crt" "$t/pki/coordinator/coord.key" \
            "$t/pki/ca.crt" "$t/$n" "$conninfo" > "$t/$n.ini"
        { fast_rounds; cat <<EOT

[job ha]
algo = fediterht
features = 2000
tau = 10
local_steps = 2
lr = 0.1
batch = 40
rounds = $HA_ROUNDS
cohort = 3
overselect = 0
min_quorum = 3
deadline_ms = 30000
seed = 7
aggregation = ordered
${2:-}
EOT
        } >> "$t/$n.ini"
    done
    # One fleet identity: m2 gets a copy of m1's key (agents pin it).
    PK=$("$BIN/sfl-coordinator" --config "$t/m1.ini" --public-key 2>> "$t/m1.log")
    cp "$t/m1/coordinator.key" "$t/m2/coordinator.key"
    chmod 600 "$t/m2/coordinator.key"
    [ "$("$BIN/sfl-coordinator" --config "$t/m2.ini" --public-key 2>> "$t/m2.log")" = "$PK" ] ||
        fail "m2 does not have m1's identity"
}

_supervise() { # $1 = name
    while [ ! -e "$t/stop" ]; do
        # HA_WRAP_<name>: a prefix, e.g. ip netns exec NS (ha_partition.sh)
        eval "_w=\${HA_WRAP_$1:-}"
        $_w "$BIN/sfl-coordinator" --config "$t/$1.ini" >> "$t/$1.log" 2>&1 &
        echo $! > "$t/$1.pid"
        rc=0
        wait $! || rc=$?
        echo "$rc" >> "$t/$1.exits"
        # kill -9 (the tests' own kills) ends the supervisor: the test
        # starts NAME again when it wants a standby back.
        [ "$rc" -ne 137 ] || break
        # Restart delay, as systemd's RestartSec (not a synchronisation):
        # a master that cannot reach the store exits 1 at once.
        [ "$rc" -eq 3 ] || sleep 0.2
    done
}
master_start() { # $1 = name
    rm -f "$t/$1.pid"
    _supervise "$1" &
    pids="$pids $!"
    wait_for 5 test -s "$t/$1.pid" || fail "$1 did not start"
}
master_kill() { # $1 = name
    _n=$1
    _p=$(cat "$t/$_n.pid")
    touch "$t/$_n.exits"
    _exits=$(wc -l < "$t/$_n.exits")
    kill -9 "$_p"
    # its supervisor records the exit (137) and ends
    _more() { [ "$(wc -l < "$t/$_n.exits")" -gt "$_exits" ]; }
    wait_for 5 _more || fail "$_n (pid $_p) did not die"
}
_sql() { "$PSQL" "$conninfo" -tAc "$1"; }
freeze_inflight() { # $1 = name
    _p=$(cat "$t/$1.pid")
    _tries=0
    while :; do
        kill -STOP "$_p"
        _busy=$(_sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
                      AND state <> 'idle' AND pid <> pg_backend_pid()") || fail "psql"
        _live=$(_sql "SELECT count(*) FROM rounds WHERE job_id = 1
                      AND state IN ('selecting', 'training', 'aggregating')") || fail "psql"
        [ "$_busy" -ne 0 ] || [ "$_live" -eq 0 ] || return 0
        kill -CONT "$_p"
        _tries=$((_tries + 1))
        [ $_tries -lt 200 ] || fail "no instant with a round in flight in 200 tries"
    done
}
leader_epoch() {
    cat "$t"/m1.log "$t"/m2.log 2>/dev/null |
        sed -n 's/.* event=leader epoch=\([0-9]*\) .*/\1/p' | sort -n | tail -1
}
leader_name() {
    _e=$(leader_epoch)
    for n in m1 m2; do
        grep -q " event=leader epoch=$_e " "$t/$n.log" 2>/dev/null && { echo $n; return; }
    done
}
# The masters' logs together: rounds committed by either.
committed() { cat "$t"/m1.log "$t"/m2.log 2>/dev/null | grep -c "event=round_committed job=1 " || true; }
at_least() { [ "$(committed)" -ge "$1" ]; }
finished() { cat "$t"/m1.log "$t"/m2.log 2>/dev/null | grep -q "event=job_state job=1 state=finished"; }
has_epoch() { [ "$(leader_epoch)" = "$1" ]; }

ha_agents() {
    _joined() { [ "$(cat "$t"/m1.log "$t"/m2.log 2>/dev/null | grep -c "event=join ")" -ge "$1" ]; }
    for i in 0 1 2; do
        fleet_agent $i "${HA_ADDRS:-127.0.0.1:$p1,127.0.0.1:$p2}"
        wait_for 20 _joined $((i + 1)) || fail "agent-$i did not join"
    done
}

fe_start() { # $1 = number, $2 = more [coordinator] lines (may be empty)
    [ -f "$t/pki/frontend/fe$1.crt" ] || "$PKI" frontend "$t/pki" "fe$1" > /dev/null
    printf '[coordinator]\nrole = frontend\nmaster = 127.0.0.1:%s,127.0.0.1:%s\nlisten = 127.0.0.1:0\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = off\n%b' \
        "$p1" "$p2" "$t/pki/frontend/fe$1.crt" "$t/pki/frontend/fe$1.key" "$t/pki/ca.crt" \
        "$t/fe$1" "${2:-}" > "$t/fe$1.ini"
    "$BIN/sfl-coordinator" --config "$t/fe$1.ini" >> "$t/fe$1.log" 2>&1 &
    eval "fe_$1=$!"
    pids="$pids $!"
    wait_for 10 grep -q "event=started role=frontend" "$t/fe$1.log" || fail "front-end $1 did not start"
    eval "fp$1=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$1.log" | tail -1)"
    wait_for 10 grep -q "event=master_open" "$t/fe$1.log" || fail "front-end $1 did not reach a master"
}

fleet_agent() { # $1 = agent number, $2 = the front-ends' addresses
    "$BIN/sfl-agent" --coordinator "$2" --server_name 127.0.0.1 \
        --ca "$t/pki/ca.crt" --cert "$t/pki/agent/agent-$1.crt" \
        --key "$t/pki/agent/agent-$1.key" --coordinator_pk "$PK" \
        --data "libsvm:$t/data/client-$1.svm" --state_dir "$t/agent-$1" \
        --backoff_min_ms 100 --backoff_max_ms 300 --heartbeat_interval_ms 500 \
        >> "$t/agent-$1.log" 2>&1 &
    eval "agent_$1=$!"
    pids="$pids $!"
}

ctl_leader() {
    case $(leader_name) in m1) admin_port=$((p1 + 1)) ;; m2) admin_port=$((p2 + 1)) ;;
        *) fail "no master leads" ;; esac
    port=$admin_port
    sflctl_config
}

same_as_sim() {
    ctl_leader
    $CTL model export 1 "$t/net.model" > "$t/export.out" 2>&1 ||
        fail "sflctl model export: $(cat "$t/export.out")"
    # shellcheck disable=SC2086
    "$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 10 --local-steps 2 --lr 0.1 --batch 40 \
        --rounds "$HA_ROUNDS" --quiet --model-out "$t/sim.model" > /dev/null
    same_model "$t/net.model" "$t/sim.model"
}

history_once() {
    ctl_leader
    $CTL job history 1 > "$t/history.out" 2>&1 || fail "sflctl job history: $(cat "$t/history.out")"
    /usr/bin/python3 - "$t/history.out" "$HA_ROUNDS" <<'EOP' || fail "history: a round lost or committed twice"
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0].strip().isdigit()]
rounds = [int(r[0]) for r in rows]
want = list(range(1, int(sys.argv[2]) + 1))
assert rounds == want, f"committed rounds {rounds[:10]}... ({len(rounds)}) != 1..{want[-1]}"
print(f"history: rounds 1..{want[-1]} committed once each")
EOP
}
