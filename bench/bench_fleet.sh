#!/bin/sh
# The coordinator fleet's measures (issue 28; results/fleet.md): a round
# master on a throwaway PostgreSQL cluster (tests/pgcluster.sh) with F
# front-end processes, loaded by bench/loadgen's real agents (mutual TLS,
# Join, Subscribe, train, signed updates), agent i on front-end
# i mod F; or, for the comparison, the same load on one coordinator.
#
#   [F=front-ends] [PER=agents per front-end] [COHORT=c] [SECS=s] [RATE=r]
#   [PROCS=p] [STORE=pg|sqlite] [FOLD=0|1] [HB=ms] [SELWAIT=ms]
#   [DEADLINE=ms] [LGNICE=n] [LGLOG=1] bench/bench_fleet.sh [BUILD]
#   bench/bench_fleet.sh [BUILD] --takeover     (KILLS=5: a short ha_soak.sh)
#   [F=... PER=... KILLS=k] bench/bench_fleet.sh [BUILD] --takeover-load
#   bench/bench_fleet.sh [BUILD] --fleet        (the series of results/fleet.md)
#
# F = 0: no front-end, the N = PER agents connect to the coordinator itself
# (STORE=sqlite: role single, bench_load.sh's coordinator; STORE=pg: role
# master). F >= 1 needs STORE=pg (the default). The job is bench_load.sh's
# (FedIter-HT, d = 100, cohort COHORT (1000), over-selection 10 %, quorum
# 80 %); the agents start at RATE a second (1000 over all front-ends; a
# storm of all at once, RATE=100000, collapses into handshake timeouts and
# backoffs on a loaded 2-core machine) from PROCS (2) load-generator
# processes and run SECS (60) seconds. One line per run:
#   bench_fleet store=... fes=F agents=N cohort=C joined=... all_joined_ms=...
#     joined99_ms=...
#     joins_per_s=... joins_per_s_per_fe=... rounds=... rounds_per_min=...
#     commit_to_commit_ms=... commit_to_next_task_ms=... master_rss_kb=...
#     master_rss_per_agent_kb=... fe_rss_kb=... fe_base_rss_kb=...
#     fe_rss_per_agent_kb=... master_cpu_ms_per_round=... fe_cpu_ms_per_round=...
#     pg_cpu_ms_per_round=... loadgen_cpu_s=... other_cpu_s=... load=...
# then, over the same steady state (FOLD=1: the job has frontend_fold, the
# front-ends fold its updates into partial sums; docs/operations.md):
#   bench_fleet_bytes fold=0|1 rounds=... master_read_kb_per_round=...
#     master_cpu_ms_per_round=... updates_per_round=... partials_per_round=...
# master_read_kb: the master's rchar (/proc/PID/io: every read, its TLS
# connections' and the store's), updates and partials its update and
# partial lines;
# and for the store, over the rounds committed once every agent had joined:
#   bench_fleet_store store=pg xact_per_round=... tup_ins_per_round=...
#     tup_upd_per_round=... tup_del_per_round=... wal_kb_per_round=...
#     join_xact_per_agent=... join_wal_kb_per_agent=...
#   bench_fleet_store store=sqlite write_kb_per_round=... join_write_kb_per_agent=...
# all_joined_ms: loadgen's first agent start to the master's N-th join line
# (-1: not within the run), joined99_ms to its (N - N/100)-th: joins_per_s
# is that many over joined99_ms (bounded by RATE: compare with it), and
# "steady state" below starts there; commit_to_commit_ms: the median time
# between consecutive round_committed lines after it (round turnaround); commit_to_next_task_ms as in
# bench_load.sh. RSS: VmRSS sampled once a second, the last sample before
# the agents stop; fe_rss_kb is the front-ends' mean, fe_base_rss_kb their
# mean before any agent came, fe_rss_per_agent_kb = (fe_rss_kb -
# fe_base_rss_kb) / agents per front-end. CPU per round (user + system) and
# the store's counters are deltas from the steady state's start (sampled
# once a second) to the end, over the rounds committed meanwhile (PostgreSQL's statistics are
# flushed about once a second: a few % of noise at the start instant; the
# end is read after the master exited). pg_cpu: the PostgreSQL server's
# processes (the master's backend, WAL writer, checkpointer). sqlite:
# write_bytes of the coordinator (/proc/PID/io: SQLite's database and WAL,
# before fsync; state_dir must be on a disk, not tmpfs). load: the 1-minute
# load average at the end (2 shared cores: compare runs of one invocation).
# SELWAIT: the master's select_wait_ms (500): a round starts with the full
# selection or, after SELWAIT ms, with min_quorum agents (a large cohort
# while the agents still join: SELWAIT=600000 waits for the full one).
# DEADLINE: the job's deadline_ms (10000). LGNICE: the load generator's
# nice value (0; 10 leaves the measured processes the CPU first on a loaded
# machine: the 1-minute load counts it all the same). LGLOG=1: the agents'
# warnings (why each left: disconnected during=..., coordinator_silent) in
# work/agents-K.log, kept with KEEP.
# HB: the agents' and the master's heartbeat_interval_ms (default 10000)
# and the job's heartbeat_timeout_ms 3 x HB. The run stops (fails) when the
# machine's MemAvailable falls below MIN_AVAIL_MB (1500): the machine is
# shared; mem_available_min_mb is the lowest seen.
# --takeover-load (STORE=pg): a second master on the same store as the
# standby (the front-ends get both addresses); once 99 % of the agents
# have joined, KILLS (3) kills -9 of the leader, each after one more round
# it committed, the killed one started again as the standby; per kill and
# min/median/max: the kill to the new leader's event=first_tasks and to its
# first event=round_committed (the master's default leader_retry_ms, 500):
#   bench_fleet_takeover fes=F agents=N cohort=C kills=K
#     first_tasks_ms=MIN/MEDIAN/MAX first_commit_ms=MIN/MEDIAN/MAX load=...
# Open files: each front-end holds PER + 200 descriptors, each loadgen
# process N / PROCS; the hard limit (`ulimit -Hn`) bounds both. Memory
# mappings: a loadgen process ~4 per agent, vm.max_map_count (65530)
# bounds it to ~16,000 agents (a front-end: a few hundred in all).
# About SECS + 20 s + N / 400 s (agent certificates) per run.
set -eu
B=build
TAKEOVER=0
SERIES=0
LOADKILL=0
for a in "$@"; do
    case $a in
    --takeover) TAKEOVER=1 ;;
    --takeover-load) LOADKILL=1 ;;
    --fleet) SERIES=1 ;;
    -*) echo "usage: $0 [BUILD] [--takeover|--takeover-load|--fleet]" >&2; exit 2 ;;
    *) B=$a ;;
    esac
done
if [ $SERIES = 1 ]; then
    # results/fleet.md's series, about 12 minutes (PER=4000 for 4 x 4,000
    # on a quiet machine): cohort 1,000 at PER agents on one coordinator
    # (SQLite), on the master alone (PostgreSQL), through 1 front-end; 2
    # and 4 front-ends x PER; 4 x PER on one coordinator; the takeover time.
    # A run that fails is reported and the series goes on.
    me=$0
    P=${PER:-2000}
    uptime
    F=0 STORE=sqlite PER=$P SECS=40 sh "$me" "$B" || echo "bench_fleet: a run failed"
    F=0 STORE=pg PER=$P SECS=40 sh "$me" "$B" || echo "bench_fleet: a run failed"
    for f in 1 2; do F=$f PER=$P SECS=40 sh "$me" "$B" || echo "bench_fleet: a run failed"; done
    # 4 x PER join at ~150 a second on the loaded machine: longer runs
    F=4 PER=$P SECS=80 sh "$me" "$B" || echo "bench_fleet: a run failed"
    # 2 x PER agents over 4 front-ends: the rounds beside 2 front-ends' row
    F=4 PER=$((P / 2)) SECS=60 sh "$me" "$B" || echo "bench_fleet: a run failed"
    F=0 STORE=sqlite PER=$((4 * P)) SECS=80 sh "$me" "$B" || echo "bench_fleet: a run failed"
    sh "$me" "$B" --takeover || echo "bench_fleet: the takeover run failed"
    exit 0
fi
if [ $TAKEOVER = 1 ]; then
    # ha_soak.sh prints the takeover time (kill -9 -> the standby's first
    # tasks); KILLS kills instead of the soak's 50.
    KILLS=${KILLS:-5}
    log=$(mktemp -d)
    SFL_BIN=$B SFL_HA_KILLS=$KILLS sh tests/run.sh e2e "$log" tests/e2e/ha_soak.sh > "$log/out" 2>&1 ||
        { tail -20 "$log/out" "$log"/*.log >&2; rm -rf "$log"; exit 1; }
    sed -n "s/^takeover/bench_fleet_takeover kills=$KILLS load=$(cut -d' ' -f1 /proc/loadavg): takeover/p" \
        "$log"/ha_soak.sh.log
    rm -rf "$log"
    exit 0
fi

F=${F:-1}
PER=${PER:-1000}
COHORT=${COHORT:-1000}
SECS=${SECS:-60}
RATE=${RATE:-1000}
PROCS=${PROCS:-2}
STORE=${STORE:-pg}
KILLS=${KILLS:-3}
HB=${HB:-}
[ $LOADKILL = 0 ] || [ "$STORE" = pg ] || { echo "bench_fleet: --takeover-load needs STORE=pg" >&2; exit 2; }
if [ "$F" -gt 0 ]; then N=$((F * PER)); else N=$PER; fi
[ "$F" = 0 ] || [ "$STORE" = pg ] || { echo "bench_fleet: front-ends need STORE=pg" >&2; exit 2; }
ROOT=$(pwd)
t=$(mktemp -d)
master=""
master2=""
fes=""
lg=""
cleanup() {
    for p in $lg $fes $master $master2; do kill -9 "$p" 2>/dev/null || true; done
    [ "$STORE" != pg ] || tests/pgcluster.sh destroy "$t/pg" > /dev/null 2>&1 || true
    [ -z "${KEEP:-}" ] || cp "$t"/*.log "$t"/*.ini "$t"/loadgen.* "$t"/work/agents-*.log "$KEEP"/ 2>/dev/null || true
    rm -rf "$t"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "bench_fleet: $*" >&2
    [ ! -f "$t/master.log" ] || tail -5 "$t/master.log" >&2
    exit 1
}
cpu_ms() { awk '{ print ($14 + $15 + $16 + $17) * 10 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
busy_s() { awk '/^cpu / { printf "%.1f", ($2 + $3 + $4 + $7 + $8) / 100 }' /proc/stat; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
read_kb() { awk '/^rchar:/ { print int($2 / 1024) }' "/proc/$1/io" 2>/dev/null || echo 0; }
# the PostgreSQL server's CPU: the postmaster and its children
pg_cpu_ms() {
    [ "$STORE" = pg ] || { echo 0; return; }
    pm=$(tests/pgcluster.sh pid "$t/pg")
    cat /proc/[0-9]*/stat 2>/dev/null |
        awk -v pm="$pm" '{ sub(/^.*\) /, "") }  # fields from state ($1) on
             $2 == pm { s += ($12 + $13) * 10 } END { print s + 0 }' |
        { read -r c; echo $((c + $(cpu_ms "$pm"))); }
}
sql() { "$PSQL" "$conninfo" -tAF' ' -c "$1"; }
# the store's counters: PostgreSQL's for this database, SQLite's bytes written
store_stat() {
    if [ "$STORE" = pg ]; then
        sql "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted,
                    (SELECT wal_bytes FROM pg_stat_wal)
             FROM pg_stat_database WHERE datname = current_database()"
    else
        awk '/^write_bytes:/ { print $2 }' "/proc/$master/io"
    fi
}

# one descriptor per agent connection (front-ends, the direct coordinator,
# each loadgen process): the hard limit is the ceiling
# shellcheck disable=SC3045
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# shellcheck disable=SC3045
nofile=$(ulimit -n)
if [ "$F" -gt 0 ]; then per_proc=$PER; else per_proc=$N; fi
[ "$nofile" = unlimited ] || [ $((per_proc + 200)) -le "$nofile" ] ||
    fail "open files limit $nofile: a process would hold $((per_proc + 200))"
[ "$nofile" = unlimited ] || [ $((N / PROCS + 200)) -le "$nofile" ] ||
    fail "open files limit $nofile: raise PROCS (each loadgen process holds N / PROCS)"

# a loadgen agent takes ~4 memory mappings (glibc mmaps its larger
# buffers): vm.max_map_count (65530) bounds a process to ~16,000 agents
maps=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 65530)
[ $((N * 4 / PROCS + 1000)) -le "$maps" ] ||
    fail "vm.max_map_count $maps: raise PROCS (each loadgen process maps ~4 per agent)"
[ -x "$B/bench/loadgen" ] || make --no-print-directory "$B/bench/loadgen" > /dev/null
PKI="$ROOT/deploy/pki/sfl-pki"
"$PKI" init "$t/pki" > /dev/null
"$PKI" coordinator "$t/pki" coord > /dev/null
mkdir -p "$t/data" "$t/work" "$t/state"
"$B/sfl-sim" --data synth:sparse --clients 100 --samples 30 --dim 100 --support 5 --seed 7 \
    --dump-shards "$t/data"
if [ "$STORE" = pg ]; then
    conninfo=$(tests/pgcluster.sh start "$t/pg") || fail "cannot start the PostgreSQL cluster"
    PSQL=psql
    # shellcheck disable=SC2012
    for b in ${SFL_PG_BIN:-} $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$b/psql" ] && { PSQL=$b/psql; break; }
    done
fi

port=$((20000 + $$ % 12000))
conns=$((N + 100))
hs=$((conns < 512 ? conns : 512))
cat > "$t/master.ini" <<EOF
[coordinator]
listen = 127.0.0.1:$port
cert = $t/pki/coordinator/coord.crt
key = $t/pki/coordinator/coord.key
ca = $t/pki/ca.crt
state_dir = $t/state
$([ "$STORE" = pg ] && printf 'store = postgresql:%s\nrole = master\n' "$conninfo")
metrics_listen = off
max_agents = $conns
max_conns = $conns
max_handshakes = $hs
max_handshakes_per_ip = $hs
admin_listen = off
select_wait_ms = ${SELWAIT:-500}
tick_ms = 50
pace_min_ms = 200
idle_retry_ms = 1000
$([ -z "$HB" ] || echo "heartbeat_interval_ms = $HB")

[job load]
algo = fediterht
features = 100
tau = 5
local_steps = 2
lr = 0.1
batch = 30
rounds = 1000000
cohort = $COHORT
overselect = 0.1
min_quorum = $((COHORT * 4 / 5))
deadline_ms = ${DEADLINE:-10000}
seed = 7
frontend_fold = ${FOLD:-0}
$([ -z "$HB" ] || echo "heartbeat_timeout_ms = $((3 * HB))")
EOF
PK=$("$B/sfl-coordinator" --config "$t/master.ini" --public-key 2>> "$t/master.log")
"$B/sfl-coordinator" --config "$t/master.ini" >> "$t/master.log" 2>&1 &
master=$!
n=300
until grep -q "event=started" "$t/master.log" 2> /dev/null; do
    n=$((n - 1))
    [ $n -gt 0 ] || fail "the coordinator did not start"
    sleep 0.1
done

mlist=127.0.0.1:$port
if [ $LOADKILL = 1 ]; then
    # a standby master on the same store with the fleet's identity (a copy
    # of coordinator.key), listening on port + 1 once it leads; the
    # front-ends get both addresses
    mkdir -p "$t/state2"
    cp "$t/state/coordinator.key" "$t/state2/coordinator.key"
    chmod 600 "$t/state2/coordinator.key"
    sed -e "s|^listen = .*|listen = 127.0.0.1:$((port + 1))|" -e "s|^state_dir = .*|state_dir = $t/state2|" \
        "$t/master.ini" > "$t/master2.ini"
    "$B/sfl-coordinator" --config "$t/master2.ini" >> "$t/master2.log" 2>&1 &
    master2=$!
    n=300
    until grep -q "event=standby" "$t/master2.log" 2> /dev/null; do
        n=$((n - 1))
        [ $n -gt 0 ] || fail "the second master did not wait as the standby"
        sleep 0.1
    done
    mlist="$mlist,127.0.0.1:$((port + 1))"
fi
dests=127.0.0.1:$port
if [ "$F" -gt 0 ]; then
    dests=""
    hs=$((PER + 100 < 512 ? PER + 100 : 512))
    f=0
    while [ $f -lt "$F" ]; do
        "$PKI" frontend "$t/pki" "fe$f" > /dev/null
        printf '[coordinator]\nrole = frontend\nmaster = %s\nlisten = 127.0.0.1:0\ncert = %s\nkey = %s\nca = %s\nstate_dir = %s\nmetrics_listen = off\nmax_conns = %s\nmax_handshakes = %s\nmax_handshakes_per_ip = %s\n' \
            "$mlist" "$t/pki/frontend/fe$f.crt" "$t/pki/frontend/fe$f.key" "$t/pki/ca.crt" \
            "$t/fe$f" $((PER + 100)) $hs $hs > "$t/fe$f.ini"
        "$B/sfl-coordinator" --config "$t/fe$f.ini" >> "$t/fe$f.log" 2>&1 &
        fes="$fes $!"
        n=300
        until grep -q "event=master_open" "$t/fe$f.log" 2> /dev/null; do
            n=$((n - 1))
            [ $n -gt 0 ] || fail "front-end $f did not reach the master: $(tail -3 "$t/fe$f.log")"
            sleep 0.1
        done
        fp=$(sed -n 's/.*event=started role=frontend port=\([0-9]*\) .*/\1/p' "$t/fe$f.log" | tail -1)
        dests="$dests${dests:+,}127.0.0.1:$fp"
        f=$((f + 1))
    done
fi
fe_rss() {  # the front-ends' mean VmRSS
    [ -n "$fes" ] || { echo 0; return; }
    s=0; c=0
    for p in $fes; do s=$((s + $(rss_kb "$p"))); c=$((c + 1)); done
    echo $((s / c))
}
fe_cpu() { s=0; for p in $fes; do s=$((s + $(cpu_ms "$p"))); done; echo $s; }
febase=$(fe_rss)
# --takeover-load: KILLS kills -9 of the leading master once the agents
# have joined; before each, one more round committed by the leader (observed
# progress); after it, the kill's milliseconds and the standby's first_tasks
# and first round_committed lines after it go to $t/takeovers; the killed
# one is started again and waits as the standby
tsms() {  # a log line's ts= as milliseconds of the day
    awk '{ s = substr($0, index($0, "ts=") + 14, 12)
           print ((substr(s, 1, 2) * 60 + substr(s, 4, 2)) * 60 + substr(s, 7, 6)) * 1000 }'
}
count() { grep -c "$1" "$2" 2> /dev/null || true; }
wait_count() {  # PATTERN FILE N SECONDS: until FILE has more than N lines of PATTERN
    w=$(($(date +%s) + $4))
    until [ "$(count "$1" "$2")" -gt "$3" ]; do
        [ "$(date +%s)" -le $w ] || return 1
        sleep 0.05
    done
}
takeover_kills() {
    : > "$t/takeovers"
    cur=1
    k=0
    while [ $k -lt "$KILLS" ]; do
        k=$((k + 1))
        if [ $cur = 1 ]; then log=$t/master.log; slog=$t/master2.log; spid=$master2
        else log=$t/master2.log; slog=$t/master.log; spid=$master2; fi
        wait_count "event=round_committed " "$log" "$(count "event=round_committed " "$log")" 300 ||
            fail "kill $k: no round committed by the leader in 300 s"
        nft=$(count "event=first_tasks " "$slog")
        nst=$(count "event=standby " "$log")
        kill_ms=$(($(date +%s%3N) % 86400000))
        kill -9 "$master"
        wait "$master" 2> /dev/null || true
        wait_count "event=first_tasks " "$slog" "$nft" 120 || fail "kill $k: the standby did not take over"
        ft=$(grep "event=first_tasks " "$slog" | sed -n "$((nft + 1))p" | tsms)
        nrc=$(grep -n "event=first_tasks " "$slog" | sed -n "$((nft + 1))s/:.*//p")
        w=$(($(date +%s) + 300))
        until tail -n "+$nrc" "$slog" | grep -q "event=round_committed "; do
            [ "$(date +%s)" -le $w ] || fail "kill $k: no round committed after the takeover"
            sleep 0.05
        done
        rc=$(tail -n "+$nrc" "$slog" | grep -m1 "event=round_committed " | tsms)
        echo "$k $kill_ms $ft $rc $(cut -d' ' -f1 /proc/loadavg)" >> "$t/takeovers"
        # the killed master comes back as the standby
        "$B/sfl-coordinator" --config "$([ $cur = 1 ] && echo "$t/master.ini" || echo "$t/master2.ini")" \
            >> "$log" 2>&1 &
        master=$spid
        master2=$!
        wait_count "event=standby " "$log" "$nst" 60 || fail "kill $k: the killed master did not come back as the standby"
        cur=$((3 - cur))
    done
}
s_store=$(store_stat)

nice -n "${LGNICE:-0}" "$B/bench/loadgen" --pki "$t/pki" --agents "$N" --coordinator "$dests" --coordinator-pk "$PK" \
    --data-dir "$t/data" --shards 100 --work "$t/work" --seconds "$SECS" \
    --rate "$RATE" --procs "$PROCS" ${HB:+--heartbeat-ms "$HB"} ${LGLOG:+--log "$LGLOG"} > "$t/loadgen.out" 2> "$t/loadgen.err" &
lg=$!
busy0=$(busy_s)
c0=$(($(cpu_ms $master) + $(fe_cpu)))
limit=$((SECS + 60 + N / 200))
deadline=$(($(date +%s) + limit))
joined=""
n=0
while kill -0 $lg 2>/dev/null; do
    n=$((n + 1))
    [ "$(date +%s)" -le $deadline ] || fail "loadgen did not finish in $limit s"
    if [ $((n % 5)) = 0 ]; then
        mrss=$(rss_kb $master)
        # the machine is shared: stop short of exhausting its memory
        avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
        [ "$avail" -ge "${minavail:-$avail}" ] || minavail=$avail
        minavail=${minavail:-$avail}
        [ "$avail" -ge "${MIN_AVAIL_MB:-1500}" ] ||
            fail "MemAvailable $avail MB < ${MIN_AVAIL_MB:-1500} MB: stopped with $(grep -c "event=join " "$t/master.log") joined (loadgen $(awk '/^VmRSS/ { print $2 }' /proc/$lg/status 2>/dev/null) kB in its parent)"
        frss=$(fe_rss)
        if [ -z "$joined" ] && [ "$(grep -c "event=join " "$t/master.log")" -ge $((N - N / 100)) ]; then
            joined=1
            j_mcpu=$(cpu_ms $master)
            j_read=$(read_kb $master)
            j_lines=$(grep -c "event=update \|event=partial " "$t/master.log" || true)
            j_parts=$(grep -c "event=partial " "$t/master.log" || true)
            j_fcpu=$(fe_cpu)
            j_pcpu=$(pg_cpu_ms)
            j_store=$(store_stat)
            j_rounds=$(grep -c "event=round_committed " "$t/master.log" || true)
            [ $LOADKILL = 0 ] || takeover_kills
        fi
    fi
    sleep 0.2
done
wait $lg || fail "loadgen failed: $(cat "$t/loadgen.err")"
lg=""
e_mcpu=$(cpu_ms $master)
e_read=$(read_kb $master)
e_lines=$(grep -c "event=update \|event=partial " "$t/master.log" || true)
e_parts=$(grep -c "event=partial " "$t/master.log" || true)
e_fcpu=$(fe_cpu)
e_pcpu=$(pg_cpu_ms)
busy1=$(busy_s)
[ "$STORE" = pg ] || e_store=$(store_stat)
e_rounds=$(grep -c "event=round_committed " "$t/master.log" || true)
kill -TERM $master
wait $master || true
master=""
# the master's backend flushed its statistics as it exited
[ "$STORE" != pg ] || e_store=$(store_stat)
for p in $fes; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
fes_n=$F
fes=""
load=$(cut -d' ' -f1 /proc/loadavg)
[ -n "$joined" ] || { j_read=$e_read; j_lines=$e_lines; j_parts=$e_parts; }
[ -n "$joined" ] || { j_mcpu=$e_mcpu; j_fcpu=$e_fcpu; j_pcpu=$e_pcpu; j_store=$e_store; j_rounds=$e_rounds; }
rounds=$((e_rounds - j_rounds))

if [ $LOADKILL = 1 ]; then
    [ -s "$t/takeovers" ] || fail "no kill: the agents did not join within the run"
    # kill -> first tasks, kill -> first commit: min, median, max
    awk -v f="$F" -v n="$N" -v cohort="$COHORT" -v load="$load" '
    function d(a, b) { return (a - b + 86400000) % 86400000 }
    function sort(a, c,   i, j, x) {
        for (i = 2; i <= c; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    }
    function med(a, c) { return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2 }
    { ft[++c] = d($3, $2); rc[c] = d($4, $2); l = l (l ? "," : "") $5
      printf "  kill %d: first_tasks %d ms, first commit %d ms, load %s\n", $1, ft[c], rc[c], $5 }
    END {
        sort(ft, c); sort(rc, c)
        printf "bench_fleet_takeover fes=%d agents=%d cohort=%d kills=%d first_tasks_ms=%d/%d/%d " \
               "first_commit_ms=%d/%d/%d load=%s\n", f, n, cohort, c, ft[1], med(ft, c), ft[c],
               rc[1], med(rc, c), rc[c], load
    }' "$t/takeovers"
    sed 's/^/  /' "$t/loadgen.out"
    exit 0
fi
lgcpu=$(sed -n 's/.* cpu_s=\([0-9.]*\).*/\1/p' "$t/loadgen.out")
start=$(sed -n 's/^loadgen: start_ms=\([0-9]*\)$/\1/p' "$t/loadgen.err")
awk -v n="$N" -v f="$fes_n" -v store="$STORE" -v cohort="$COHORT" -v start="$start" \
    -v mrss="${mrss:-0}" -v frss="${frss:-0}" -v fbase="$febase" -v rounds="$rounds" \
    -v mcpu="$((e_mcpu - j_mcpu))" -v fcpu="$((e_fcpu - j_fcpu))" -v pcpu="$((e_pcpu - j_pcpu))" \
    -v lgcpu="$lgcpu" -v busy="$busy0 $busy1" -v c0c1="$c0 $((e_mcpu + e_fcpu))" -v load="$load" '
function ms(line,   s) {
    s = substr(line, index(line, "ts=") + 14, 12)
    return ((substr(s, 1, 2) * 60 + substr(s, 4, 2)) * 60 + substr(s, 7, 6)) * 1000
}
function since(t, t0) { return t == "" ? -1 : (t - t0 + 86400000) % 86400000 }
function field(line, k,   i, r) {
    i = index(line, " " k "=")
    if (!i) return ""
    r = substr(line, i + length(k) + 2)
    sub(/ .*/, "", r)
    return r
}
function median(a, c,   i, j, x) {
    if (c == 0) return -1
    for (i = 2; i <= c; i++) {
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
        a[j + 1] = x
    }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
/event=join / { if (++joins == n) tall = ms($0); if (joins == n - int(n / 100)) tjoin = ms($0) }
/event=update / && / verdict=accepted/ { last[field($0, "round")] = ms($0) }
/event=round_committed / {
    tc = ms($0)
    if (tjoin != "" && tc >= tjoin) {
        if (!ncommit++) first = tc; else c2c[++nc2c] = tc - lastc
        lastc = tc
    }
}
/event=round_open / {
    r = field($0, "round")
    if (field($0, "attempt") == 0 && (r - 1) in last) c2t[++nc2t] = ms($0) - last[r - 1]
}
END {
    split(busy, b, " "); split(c0c1, c, " ")
    other = b[2] - b[1] - (c[2] - c[1]) / 1000 - lgcpu
    aj = start == "" ? -1 : since(tall, start)
    aj99 = start == "" ? -1 : since(tjoin, start)
    jps = aj99 > 0 ? (n - int(n / 100)) * 1000 / aj99 : 0
    rpm = ncommit > 1 && lastc > first ? (ncommit - 1) * 60000 / (lastc - first) : 0
    held = f > 0 ? n / f : n
    printf "bench_fleet store=%s fes=%d agents=%d cohort=%d joined=%d all_joined_ms=%d joined99_ms=%d " \
           "joins_per_s=%.0f joins_per_s_per_fe=%.0f rounds=%d rounds_per_min=%.1f " \
           "commit_to_commit_ms=%s commit_to_next_task_ms=%s master_rss_kb=%d " \
           "master_rss_per_agent_kb=%.2f fe_rss_kb=%d fe_base_rss_kb=%d fe_rss_per_agent_kb=%.1f " \
           "master_cpu_ms_per_round=%.0f fe_cpu_ms_per_round=%.0f pg_cpu_ms_per_round=%.0f " \
           "loadgen_cpu_s=%s other_cpu_s=%.1f load=%s\n",
           store, f, n, cohort, joins, aj, aj99, jps, (f > 0 ? jps / f : jps), rounds, rpm,
           median(c2c, nc2c), median(c2t, nc2t), mrss, mrss / n, frss, fbase,
           (f > 0 ? (frss - fbase) / held : 0), (rounds ? mcpu / rounds : -1),
           (rounds ? fcpu / rounds : -1), (rounds ? pcpu / rounds : -1), lgcpu, other, load
}' "$t/master.log"
awk -v fold="${FOLD:-0}" -v r="$rounds" -v kb=$((e_read - j_read)) -v cpu=$((e_mcpu - j_mcpu)) \
    -v lines=$((e_lines - j_lines)) -v parts=$((e_parts - j_parts)) 'BEGIN {
    d = r > 0 ? r : 1
    printf "bench_fleet_bytes fold=%d rounds=%d master_read_kb_per_round=%.1f " \
           "master_cpu_ms_per_round=%.0f updates_per_round=%.1f partials_per_round=%.1f\n",
           fold, r, kb / d, cpu / d, (lines - parts) / d, parts / d
}'
# shellcheck disable=SC2086
# (s: before the agents, j: once all had joined, e: the end)
# (no round in the steady state: the counters are shown per 1 round, rounds=0)
[ "$rounds" -gt 0 ] && div=$rounds || div=1
if [ "$STORE" = pg ]; then
    awk -v s="$s_store" -v j="$j_store" -v e="$e_store" -v r="$rounds" -v d="$div" -v n="$N" 'BEGIN {
        split(s, z, " "); split(j, a, " "); split(e, b, " ")
        printf "bench_fleet_store store=pg rounds=%d xact_per_round=%.1f tup_ins_per_round=%.1f " \
               "tup_upd_per_round=%.1f tup_del_per_round=%.1f wal_kb_per_round=%.1f " \
               "join_xact_per_agent=%.2f join_wal_kb_per_agent=%.2f\n",
               r, (b[1] - a[1]) / d, (b[2] - a[2]) / d, (b[3] - a[3]) / d, (b[4] - a[4]) / d,
               (b[5] - a[5]) / 1024 / d, (a[1] - z[1]) / n, (a[5] - z[5]) / 1024 / n
    }'
else
    awk -v s="$s_store" -v j="$j_store" -v e="$e_store" -v r="$rounds" -v d="$div" -v n="$N" 'BEGIN {
        printf "bench_fleet_store store=sqlite rounds=%d write_kb_per_round=%.1f " \
               "join_write_kb_per_agent=%.2f\n", r, (e - j) / 1024 / d, (j - s) / 1024 / n
    }'
fi
sed 's/^/  /' "$t/loadgen.out"
echo "  mem_available_min_mb=${minavail:-0} joined_at_end=$(grep -c "event=join " "$t/master.log")"
grep -c "event=round_failed" "$t/master.log" | sed 's/^/  rounds failed: /'
