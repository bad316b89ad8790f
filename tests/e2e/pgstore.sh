#!/bin/sh
# A single coordinator on a PostgreSQL store (store = postgresql:CONNINFO,
# docs/configuration.md): a throwaway cluster (tests/pgcluster.sh), a short
# job with 2 agents, the coordinator killed with SIGKILL once a round is
# committed and restarted. After the kill, with the coordinator down, the
# store holds no round committed twice and the checkpoint of the last
# committed round; after the restart the job resumes from it and runs to
# its end with sfl-sim's model bit for bit (what SQLite gives: crash.sh).
# Also: state_loaded names the backend and never the password, and
# --backup refuses a PostgreSQL store naming pg_dump. ~10 s on an idle
# 2-core machine. Skips (77) without PostgreSQL's server binaries.
set -eu
. tests/e2e/lib.sh
ROUNDS=12

if ! ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1 && ! command -v initdb > /dev/null &&
    [ -z "${SFL_PG_BIN:-}" ]; then
    skip "no PostgreSQL server binaries (Debian: apt-get install postgresql-15)"
fi
command -v psql > /dev/null || skip "no psql (postgresql-client)"
pgdir="$t/pg"
mkdir -p "$pgdir"
stop_pg() { sh tests/pgcluster.sh destroy "$pgdir" > /dev/null 2>&1 || true; }
trap 'stop_pg; cleanup' EXIT
conninfo=$(sh tests/pgcluster.sh start "$pgdir") || fail "pgcluster start"
step "PostgreSQL cluster up ($conninfo)"

pki_federation agent-0 agent-1
mkdir -p "$t/data" "$t/state"
SIMDATA="--data synth:sparse --clients 2 --samples 50 --dim 2000 --support 20 --seed 7"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --dump-shards "$t/data"
port=$(pick_port)
# a password the server ignores (trust auth): it must never reach the log
{ coordinator_section "127.0.0.1:$port" off; fast_rounds; cat <<EOT
store = postgresql:$conninfo password=pg-secret-123

[job pg]
algo = fediterht
features = 2000
tau = 20
local_steps = 2
lr = 0.1
batch = 50
rounds = $ROUNDS
cohort = 3
overselect = 0
min_quorum = 2
deadline_ms = 20000
seed = 7
aggregation = ordered
EOT
} > "$t/coordinator.ini"

q() { psql -X -q -t -A -v ON_ERROR_STOP=1 "$conninfo" -c "$1"; }

"$BIN/sfl-coordinator" --config "$t/coordinator.ini" --backup "$t/copy.db" > "$t/backup.log" 2>&1 &&
    fail "--backup of a PostgreSQL store succeeded"
grep -q "pg_dump" "$t/backup.log" || fail "--backup does not name pg_dump: $(cat "$t/backup.log")"
# PK: what the agents pin (start_agent)
PK=$("$BIN/sfl-coordinator" --config "$t/coordinator.ini" --public-key 2>> "$t/coord.log")
export PK
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
wait_for 10 grep -q "event=started" "$t/coord.log" || fail "coordinator did not start"
grep -q "event=state_loaded backend=postgresql " "$t/coord.log" ||
    fail "state_loaded does not name the backend"
! grep -q "pg-secret-123" "$t/coord.log" || fail "the conninfo's password reached the log"
[ "$(q "SELECT MAX(version) FROM schema_version")" = 10 ] || fail "schema not migrated to 10"
for i in 0 1; do start_agent $i; done
committed() { [ "$(grep -c "event=round_committed job=1 " "$t/coord.log")" -ge "$1" ]; }
wait_for 20 committed 2 || fail "no round committed on PostgreSQL"
kill -9 "$coord"
wait "$coord" 2> /dev/null || true
last=$(q "SELECT last_committed_round FROM jobs WHERE id = 1")
twice=$(q "SELECT count(*) FROM (SELECT round FROM rounds WHERE job_id = 1 AND state = 'committed' GROUP BY round HAVING count(*) > 1) x")
ck=$(q "SELECT COALESCE(MAX(round), 0) FROM checkpoints WHERE job_id = 1")
# a cohort of 3 from 2 agents: each round starts only when select_wait_ms
# (300 ms) ends, so the 10 rounds left are over 3 s away whatever the
# machine's speed and the kill lands mid-job
if [ "$last" -lt 2 ] || [ "$last" -ge $ROUNDS ] || [ "$twice" != 0 ] || [ "$ck" != "$last" ]; then
    fail "store after kill -9: last $last, committed twice $twice, checkpoint $ck"
fi
step "kill -9 after round $last: store consistent (checkpoint $ck, no round twice)"
"$BIN/sfl-coordinator" --config "$t/coordinator.ini" >> "$t/coord.log" 2>&1 &
coord=$!
pids="$pids $coord"
restarted() { [ "$(grep -c "event=started" "$t/coord.log")" -ge 2 ]; }
wait_for 10 restarted || fail "coordinator did not restart"
finished() { grep -q "event=job_state job=1 state=finished" "$t/coord.log"; }
wait_for 60 finished || fail "the job did not finish"
sflctl_config
$CTL model export 1 "$t/net.model" > "$t/export.log" 2>&1 ||
    fail "sflctl model export: $(cat "$t/export.log")"
# shellcheck disable=SC2086
"$BIN/sfl-sim" $SIMDATA --algo fediterht --tau 20 --local-steps 2 --lr 0.1 --batch 50 \
    --rounds $ROUNDS --quiet --model-out "$t/sim.model" > /dev/null
same_model "$t/net.model" "$t/sim.model"
echo "PASS: a coordinator on PostgreSQL survived kill -9 after round $last; the job" \
    "finished with sfl-sim's model"
