#!/bin/sh
# sfl-entrypoint: the roles of the sfl image (docs/docker.md). One image, the
# first argument picks the role:
#
#   pki           CA, coordinator and admin certificates, the coordinator's
#                 task-signing identity; its public key to $SFL_PKI_DIR/coordinator.pk
#   data          every agent's shard: synthetic (sfl-sim) or $SFL_INPUT split
#   coordinator   generate coordinator.ini (or use $SFL_COORDINATOR_INI), run it
#   master        a fleet's round master (role = master, store = $SFL_STORE; the
#                 fleet identity copied from $SFL_FLEET_IDENTITY_DIR)
#   frontend      a fleet's front-end (role = frontend, master = $SFL_MASTERS,
#                 certificate $SFL_PKI_DIR/frontend/$SFL_FRONTEND_NAME.crt)
#   agent         claim a shard, issue this agent's certificate, run sfl-agent
#                 ($SFL_COORDINATOR may list HOST:PORT,HOST:PORT,...: with
#                 SFL_AGENT_SPREAD=1 the list starts at entry shard mod N)
#   ctl ARGS      sflctl with the admin certificate (on admin_listen)
#   probe [HOST:PORT]  can this container open a TCP connection to the
#                 coordinator (default the first of $SFL_COORDINATOR)? 3 s at most
#   sim ARGS      sfl-sim
#   health [ROLE] container health check
#   anything else is executed as given (sh, sfl-coordinator --help, ...)
#
# deploy/netns-federation.sh runs this same script outside a container: every
# path comes from an environment variable whose default is the image's path.
# POSIX sh (the image's /bin/sh is dash); `health` also uses bash.
set -eu

PROG=sfl-entrypoint
: "${SFL_BIN_DIR:=/usr/local/bin}"
: "${SFL_PKI_TOOL:=$SFL_BIN_DIR/sfl-pki}"
: "${SFL_PKI_DIR:=/pki}"
: "${SFL_DATA_DIR:=/data}"
: "${SFL_STATE_DIR:=/var/lib/sfl}"
: "${SFL_AGENT_STATE_DIR:=/var/lib/sfl-agent}"
: "${SFL_RUN_DIR:=/tmp}"
: "${SFL_COORDINATOR_NAME:=coordinator}"
: "${SFL_COORDINATOR:=$SFL_COORDINATOR_NAME:7443}"
: "${SFL_ADMIN_NAME:=admin}"
: "${SFL_LISTEN:=0.0.0.0:7443}"
: "${SFL_METRICS_LISTEN:=0.0.0.0:9464}"
# The coordinator's listener for sflctl (admin certificates only): on every
# address of the container, so the ctl service reaches it by name.
: "${SFL_ADMIN_LISTEN:=0.0.0.0:7444}"
# sflctl's address: the coordinator's admin_listen port by the service name;
# the agents' listener when admin_listen is off.
case $SFL_ADMIN_LISTEN in
off) : "${SFL_CTL_COORDINATOR:=$SFL_COORDINATOR}" ;;
*) : "${SFL_CTL_COORDINATOR:=$SFL_COORDINATOR_NAME:${SFL_ADMIN_LISTEN##*:}}" ;;
esac
: "${SFL_WAIT_S:=300}"
# The fleet (docker-compose.fleet.yml, deploy/k8s/; docs/operations.md, "A
# fleet on PostgreSQL"). SFL_ROLE: single (today's coordinator), master or
# frontend. SFL_STORE: the coordinator's store key ('' = its default, SQLite
# in the state directory). SFL_MASTERS: a front-end's master list.
: "${SFL_ROLE:=single}"
: "${SFL_STORE:=}"
: "${SFL_MASTERS:=}"
: "${SFL_FRONTEND_NAME:=$(hostname 2>/dev/null || echo frontend)}"
# Where the pki service leaves the fleet identity (coordinator.key: master
# and standby sign tasks with the same key) and the PostgreSQL secrets
# (password, pgpass, server certificate): volumes of their own, mounted only
# where they are needed. Empty = not a fleet.
: "${SFL_FLEET_IDENTITY_DIR:=}"
: "${SFL_PG_SECRET_DIR:=}"
: "${SFL_LEASE_TTL_S:=45}"
: "${SFL_LEASE_REFRESH_S:=10}"
: "${SFL_CLAIM_WAIT_S:=300}"

log() { echo "$PROG: $*" >&2; }
die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

# A decimal number in [$2, $3], or die naming the variable $4.
check_int() {
    case $1 in
    '' | *[!0-9]*) die "$4 must be a number (got '$1')" ;;
    esac
    if [ "$1" -lt "$2" ] || [ "$1" -gt "$3" ]; then die "$4 must be in $2..$3 (got $1)"; fi
}

# Waits up to SFL_WAIT_S seconds for file $1 ($2 says what makes it).
wait_file() {
    n=0
    while [ ! -s "$1" ]; do
        [ $n -eq 0 ] && log "waiting for $1 ($2)"
        n=$((n + 1))
        [ $n -le "$SFL_WAIT_S" ] || die "$1 did not appear in ${SFL_WAIT_S}s ($2 has not run?)"
        sleep 1
    done
}

# Writes stdin to $1 through a temporary file and a rename, so readers never
# see half a file.
write_atomic() {
    cat >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
}

# The value of KEY in the data service's meta file ('' when absent).
meta() {
    sed -n "s/^$1=//p" "$SFL_DATA_DIR/meta" | head -n 1
}

# ---- pki ---------------------------------------------------------------------------

cmd_pki() {
    umask 077
    mkdir -p "$SFL_PKI_DIR"
    d=$SFL_PKI_DIR
    [ -f "$d/ca.crt" ] || "$SFL_PKI_TOOL" init "$d" >&2
    if [ ! -f "$d/coordinator/$SFL_COORDINATOR_NAME.crt" ]; then
        # shellcheck disable=SC2086 # extra subjectAltNames, space-separated
        "$SFL_PKI_TOOL" coordinator "$d" "$SFL_COORDINATOR_NAME" ${SFL_COORDINATOR_SANS:-} >&2
    fi
    [ -f "$d/admin/$SFL_ADMIN_NAME.crt" ] || "$SFL_PKI_TOOL" admin "$d" "$SFL_ADMIN_NAME" >&2
    pki_fleet
    # The task-signing identity lives in the coordinator's state (a fleet's:
    # in SFL_FLEET_IDENTITY_DIR, copied by each master); agents pin its
    # public key, which is not secret. Re-read at every run, so a state
    # volume made afresh is published too.
    idir=${SFL_FLEET_IDENTITY_DIR:-$SFL_STATE_DIR}
    pk=$("$SFL_BIN_DIR/sfl-coordinator" --state_dir "$idir" --public-key) ||
        die "cannot create or read the coordinator identity in $idir"
    echo "$pk" | write_atomic "$d/coordinator.pk"
    chmod 644 "$d/coordinator.pk"
    log "pki: CA $d/ca.crt, coordinator $SFL_COORDINATOR_NAME, admin $SFL_ADMIN_NAME, coordinator key $pk"
}

# The fleet's certificates and secrets, each made once (existing files are
# kept): one front-end certificate per name in SFL_FRONTENDS (each also
# names SFL_FRONTEND_SERVER_NAME, the name agents check, and SFL_FRONTEND_SANS);
# with SFL_PG_SECRET_DIR, PostgreSQL's server certificate (SFL_POSTGRES_NAME
# and SFL_POSTGRES_SANS), the fleet role's password (random, 32 hex digits)
# and a libpq passfile for the masters.
pki_fleet() {
    for f in ${SFL_FRONTENDS:-}; do
        [ -f "$d/frontend/$f.crt" ] && continue
        # shellcheck disable=SC2086 # extra subjectAltNames, space-separated
        "$SFL_PKI_TOOL" frontend "$d" "$f" "${SFL_FRONTEND_SERVER_NAME:-frontend}" ${SFL_FRONTEND_SANS:-} >&2
    done
    [ -n "$SFL_PG_SECRET_DIR" ] || return 0
    s=$SFL_PG_SECRET_DIR
    mkdir -p "$s"
    chmod 700 "$s"
    pg=${SFL_POSTGRES_NAME:-postgres}
    if [ ! -s "$s/server.crt" ] || [ ! -s "$s/server.key" ]; then
        rm -f "$d/postgres/$pg.crt" "$d/postgres/$pg.key"
        # shellcheck disable=SC2086 # extra subjectAltNames, space-separated
        "$SFL_PKI_TOOL" postgres "$d" "$pg" ${SFL_POSTGRES_SANS:-} >&2
        mv -f "$d/postgres/$pg.key" "$s/server.key"
        mv -f "$d/postgres/$pg.crt" "$s/server.crt"
        rmdir "$d/postgres" 2>/dev/null || true
    fi
    if [ ! -s "$s/password" ]; then
        openssl rand -hex 16 | write_atomic "$s/password" || die "cannot write $s/password"
        chmod 600 "$s/password"
    fi
    # libpq's passfile: host:port:database:user:password, mode 0600.
    printf '*:*:%s:%s:%s\n' "${SFL_PG_DB:-sfl}" "${SFL_PG_USER:-sfl}" "$(head -n 1 "$s/password")" |
        write_atomic "$s/pgpass"
    chmod 600 "$s/pgpass"
    log "pki: fleet: front-ends ${SFL_FRONTENDS:-none}, PostgreSQL certificate $pg, password and pgpass in $s"
}

# ---- data --------------------------------------------------------------------------

cmd_data() {
    shards=${SFL_SHARDS:-8}
    check_int "$shards" 1 100000 SFL_SHARDS
    seed=${SFL_SEED:-1}
    d=$SFL_DATA_DIR
    mkdir -p "$d"
    if [ -n "${SFL_INPUT:-}" ]; then
        [ -r "$SFL_INPUT" ] || die "SFL_INPUT=$SFL_INPUT is not a readable file (is its directory mounted?)"
        size=$(wc -c <"$SFL_INPUT")
        part=${SFL_PARTITION:-iid}
        spec="libsvm:$SFL_INPUT bytes=$size shards=$shards partition=$part seed=$seed"
        set -- --data "libsvm:$SFL_INPUT" --partition "$part" --test-frac 0
    else
        dim=${SFL_DIM:-1000}
        spec="synth:sparse shards=$shards samples=${SFL_SAMPLES:-200} dim=$dim support=${SFL_SUPPORT:-20} noise=${SFL_NOISE:-0} seed=$seed"
        set -- --data synth:sparse --samples "${SFL_SAMPLES:-200}" --dim "$dim" \
            --support "${SFL_SUPPORT:-20}" --noise "${SFL_NOISE:-0}"
    fi
    if [ -f "$d/meta" ]; then
        old=$(meta spec)
        [ "$old" = "$spec" ] || die "the data volume holds shards made as '$old', not '$spec':
  agents may have trained on them. Keep the old settings, or start over with
  'docker-compose down -v' (removes every volume: CA, state, data)."
        log "data: $shards shards present ($spec)"
        return 0
    fi
    rm -rf "$d"/.new.*
    tmp=$d/.new.$$
    mkdir -p "$tmp"
    "$SFL_BIN_DIR/sfl-sim" "$@" --clients "$shards" --seed "$seed" --dump-shards "$tmp" ||
        die "sfl-sim could not write the shards"
    if [ -n "${SFL_INPUT:-}" ]; then
        # The job needs the feature count and, for classification, the label
        # values: a few distinct integer labels make a classification problem.
        features=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, ":"); if (kv[1] + 0 > m) m = kv[1] + 0 } }
            END { print m + 0 }' "$SFL_INPUT")
        labels=$(awk '{ print $1 + 0 }' "$SFL_INPUT" | sort -gu | awk '
            { n++; if ($1 != int($1)) frac = 1; s = s (n > 1 ? "," : "") $1 }
            END { if (n >= 2 && n <= 32 && !frac) print s }')
        case $labels in
        '') loss=lsq ;;
        *,*,*) loss=softmax ;;
        *) loss=logistic ;;
        esac
    else
        features=$dim labels="" loss=lsq
    fi
    mkdir -p "$d/shards" "$d/claims"
    for f in "$tmp"/*; do mv -f "$f" "$d/shards/"; done
    rmdir "$tmp"
    printf 'spec=%s\nshards=%s\nfeatures=%s\nloss=%s\nlabels=%s\n' \
        "$spec" "$shards" "$features" "$loss" "$labels" | write_atomic "$d/meta"
    log "data: wrote $shards shards to $d/shards ($spec; features=$features loss=$loss${labels:+ labels=$labels})"
}

# ---- coordinator -------------------------------------------------------------------

# "key = value" for a job key when the value is not empty.
kv() {
    case $2 in
    '') ;;
    *'
'*) die "the value of $1 has a newline" ;;
    *) echo "$1 = $2" ;;
    esac
}

coordinator_ini() {
    p=$SFL_PKI_DIR
    if [ "$SFL_ROLE" = frontend ]; then
        crt=$p/frontend/$SFL_FRONTEND_NAME
    else
        crt=$p/coordinator/$SFL_COORDINATOR_NAME
    fi
    cat <<EOF
# Generated by sfl-entrypoint at every start (docs/docker.md); a job is
# created once, when its name is new, and then lives in the store.
[coordinator]
listen = $SFL_LISTEN
cert = $crt.crt
key = $crt.key
ca = $p/ca.crt
state_dir = $SFL_STATE_DIR
EOF
    # A front-end has no admin listener (sflctl talks to the master); its
    # metrics listener serves its own sfl_fe_* metrics.
    echo "metrics_listen = $SFL_METRICS_LISTEN"
    if [ "$SFL_ROLE" != frontend ]; then
        echo "admin_listen = $SFL_ADMIN_LISTEN"
    fi
    case $SFL_ROLE in
    single) ;;
    master | frontend) echo "role = $SFL_ROLE" ;;
    *) die "SFL_ROLE must be single, master or frontend (got '$SFL_ROLE')" ;;
    esac
    kv store "$SFL_STORE"
    if [ "$SFL_ROLE" = frontend ]; then
        [ -n "$SFL_MASTERS" ] || die "a front-end needs SFL_MASTERS (HOST:PORT[,HOST:PORT...])"
        kv master "$SFL_MASTERS"
        # The front-end holds no job: the master's store does.
        return 0
    fi
    echo
    if [ -n "${SFL_JOB_FILE:-}" ]; then
        [ -r "$SFL_JOB_FILE" ] || die "SFL_JOB_FILE=$SFL_JOB_FILE is not readable"
        cat "$SFL_JOB_FILE"
        return 0
    fi
    echo "[job ${SFL_JOB_NAME:-demo}]"
    kv algo "${SFL_JOB_ALGO:-fediterht}"
    kv loss "${SFL_JOB_LOSS:-$(meta loss)}"
    kv labels "${SFL_JOB_LABELS:-$(meta labels)}"
    kv features "${SFL_JOB_FEATURES:-$(meta features)}"
    kv tau "${SFL_JOB_TAU:-20}"
    kv local_steps "${SFL_JOB_LOCAL_STEPS:-5}"
    kv lr "${SFL_JOB_LR:-0.1}"
    kv batch "${SFL_JOB_BATCH:-50}"
    kv lambda "${SFL_JOB_LAMBDA:-}"
    kv rounds "${SFL_JOB_ROUNDS:-50}"
    kv cohort "${SFL_JOB_COHORT:-3}"
    kv overselect "${SFL_JOB_OVERSELECT:-0.25}"
    kv min_quorum "${SFL_JOB_MIN_QUORUM:-2}"
    kv deadline_ms "${SFL_JOB_DEADLINE_MS:-60000}"
    kv heartbeat_timeout_ms "${SFL_JOB_HEARTBEAT_MS:-}"
    kv max_attempts "${SFL_JOB_MAX_ATTEMPTS:-}"
    kv encoding "${SFL_JOB_ENCODING:-}"
    kv seed "${SFL_JOB_SEED:-1}"
}

# A master's copy of the fleet identity: master and standby must sign with
# the key the agents pinned (coordinator.pk). Copied when missing or
# different; never made here (the pki service makes it once).
fleet_identity() {
    [ -n "$SFL_FLEET_IDENTITY_DIR" ] || return 0
    src=$SFL_FLEET_IDENTITY_DIR/coordinator.key
    wait_file "$src" "the pki service makes the fleet identity"
    if ! cmp -s "$src" "$SFL_STATE_DIR/coordinator.key" 2>/dev/null; then
        if ! (umask 077 && cp "$src" "$SFL_STATE_DIR/coordinator.key.tmp.$$" &&
            mv -f "$SFL_STATE_DIR/coordinator.key.tmp.$$" "$SFL_STATE_DIR/coordinator.key"); then
            die "cannot copy the fleet identity into $SFL_STATE_DIR"
        fi
        log "master: fleet identity copied from $src"
    fi
}

cmd_coordinator() {
    case $SFL_ROLE in
    master | frontend) echo "$SFL_ROLE" >"$SFL_RUN_DIR/sfl-role" 2>/dev/null || true ;;
    *) echo coordinator >"$SFL_RUN_DIR/sfl-role" 2>/dev/null || true ;;
    esac
    ini=${SFL_COORDINATOR_INI:-}
    if [ "$SFL_ROLE" = master ] && [ -n "$SFL_FLEET_IDENTITY_DIR" ]; then
        # also with SFL_COORDINATOR_INI (deploy/k8s: the identity is a
        # Secret, state_dir an emptyDir; the key must be mode 0600)
        mkdir -p "$SFL_STATE_DIR"
        chmod 700 "$SFL_STATE_DIR"
        fleet_identity
    fi
    if [ -z "$ini" ]; then
        wait_file "$SFL_PKI_DIR/coordinator.pk" "the pki service"
        # A front-end holds no job (it needs no data); the others make the
        # demo job from the data's meta file.
        [ "$SFL_ROLE" = frontend ] || wait_file "$SFL_DATA_DIR/meta" "the data service"
        mkdir -p "$SFL_STATE_DIR"
        chmod 700 "$SFL_STATE_DIR"
        ini=$SFL_STATE_DIR/coordinator.ini
        coordinator_ini >"$ini.tmp.$$"
        mv -f "$ini.tmp.$$" "$ini"
    fi
    set -f
    # shellcheck disable=SC2086 # extra flags, space-separated
    exec "$SFL_BIN_DIR/sfl-coordinator" --config "$ini" ${SFL_COORDINATOR_ARGS:-}
}

# ---- agent -------------------------------------------------------------------------

# Seconds since the modification of $1; a large number when it is missing.
age() {
    m=$(stat -c %Y "$1" 2>/dev/null) || {
        echo 999999
        return 0
    }
    echo $(($(date +%s) - m))
}

# A claim is live while its owner refreshes the lease (a new claim without a
# lease yet counts from the directory's creation).
live() {
    if [ -e "$1/lease" ]; then a=$(age "$1/lease"); else a=$(age "$1"); fi
    [ "$a" -lt "$SFL_LEASE_TTL_S" ]
}

# Takes over the claim directory $claims/$1 (held: made by us, or locked).
take() {
    printf '%s\n' "$name" | write_atomic "$claims/$1/owner"
    touch "$claims/$1/lease"
    echo "$1" | write_atomic "$state/shard"
}

# Runs "$@" holding the lock of claim $i ($claims/$i.lock, mkdir is atomic);
# a lock older than 60 s is left over from a crash and broken.
with_lock() {
    wl_n=0
    until mkdir "$claims/$i.lock" 2>/dev/null; do
        if [ "$(age "$claims/$i.lock")" -gt 60 ]; then
            rmdir "$claims/$i.lock" 2>/dev/null || true
        fi
        wl_n=$((wl_n + 1))
        [ $wl_n -lt 50 ] || return 1
        sleep 0.1
    done
    wl_rc=0
    "$@" || wl_rc=$?
    rmdir "$claims/$i.lock"
    return $wl_rc
}

mine() { [ "$(cat "$claims/$i/owner" 2>/dev/null)" = "$name" ] && touch "$claims/$i/lease"; }
stale_take() {
    if live "$claims/$i"; then return 1; fi
    take "$i"
}

# Our shard: the one this agent claimed before, if it is still ours; else
# the lowest unclaimed index (mkdir is atomic, so two agents never get the
# same one); else one whose owner stopped refreshing its lease.
claim_shard() {
    if [ -s "$state/shard" ]; then
        i=$(cat "$state/shard")
        if [ -d "$claims/$i" ] && with_lock mine; then
            log "agent $name: keeps shard $i"
            return 0
        fi
        log "agent $name: shard $i was taken over while this agent was away; claiming another"
    fi
    i=0
    while [ "$i" -lt "$shards" ]; do
        if mkdir "$claims/$i" 2>/dev/null; then
            take "$i"
            log "agent $name: claimed shard $i of $shards"
            return 0
        fi
        i=$((i + 1))
    done
    i=0
    while [ "$i" -lt "$shards" ]; do
        if ! live "$claims/$i" && with_lock stale_take; then
            log "agent $name: took over shard $i of $shards (its owner's lease expired)"
            return 0
        fi
        i=$((i + 1))
    done
    return 1
}

# This agent's certificate (CN = its name), issued from the CA in the PKI
# directory at the first start, and again if the CA changed.
agent_cert() {
    tls=$state/tls
    if [ -s "$tls/agent.crt" ] && [ -s "$tls/agent.key" ] &&
        openssl verify -CAfile "$SFL_PKI_DIR/ca.crt" "$tls/agent.crt" >/dev/null 2>&1; then
        return 0
    fi
    [ -r "$SFL_PKI_DIR/ca.key" ] || die "cannot read $SFL_PKI_DIR/ca.key to issue this agent's certificate"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/sfl-agent-pki.XXXXXX")
    ln -s "$SFL_PKI_DIR/ca.crt" "$tmp/ca.crt"
    ln -s "$SFL_PKI_DIR/ca.key" "$tmp/ca.key"
    "$SFL_PKI_TOOL" agent "$tmp" "$name" >/dev/null || {
        rm -rf "$tmp"
        die "cannot issue the certificate of $name"
    }
    mkdir -p "$tls"
    mv -f "$tmp/agent/$name.key" "$tls/agent.key"
    mv -f "$tmp/agent/$name.crt" "$tls/agent.crt"
    rm -rf "$tmp"
    log "agent $name: certificate issued (CN=$name)"
}

# spread LIST K: the comma-separated LIST rotated to start at entry K mod N,
# so agents spread over a fleet's front-ends and each falls back to the next.
spread() {
    echo "$1" | awk -F, -v k="$2" '{ for (i = 0; i < NF; i++) printf "%s%s", (i ? "," : ""), $((k + i) % NF + 1); print "" }'
}

cmd_agent() {
    echo agent >"$SFL_RUN_DIR/sfl-role" 2>/dev/null || true
    wait_file "$SFL_PKI_DIR/coordinator.pk" "the pki service"
    wait_file "$SFL_DATA_DIR/meta" "the data service"
    state=$SFL_AGENT_STATE_DIR
    claims=$SFL_DATA_DIR/claims
    shards=$(meta shards)
    check_int "$shards" 1 100000 "shards in $SFL_DATA_DIR/meta"
    umask 077
    mkdir -p "$state" "$claims"
    chmod 700 "$state"
    # The name is chosen once and kept in the state directory, so a
    # restarted or recreated container (same volume) stays the same agent.
    if [ -s "$state/name" ]; then
        name=$(cat "$state/name")
    else
        name=${SFL_AGENT_NAME:-agent-$(hostname)}
        echo "$name" | write_atomic "$state/name"
    fi
    case $name in
    '' | [!A-Za-z0-9]* | *[!A-Za-z0-9._-]*) die "agent name '$name' is not 1-64 of A-Z a-z 0-9 . _ -" ;;
    esac
    [ ${#name} -le 64 ] || die "agent name '$name' is longer than 64 characters"
    n=0 said=0
    until claim_shard; do
        if [ $said -eq 0 ]; then
            log "agent $name: all $shards shards are claimed by live agents; waiting up to" \
                "${SFL_CLAIM_WAIT_S}s for a lease to expire (more agents than SFL_SHARDS?)"
            said=1
        fi
        n=$((n + 5))
        [ $n -le "$SFL_CLAIM_WAIT_S" ] || die "no free shard for $name"
        sleep 5
    done
    shard=$(cat "$state/shard")
    agent_cert
    pk=$(cat "$SFL_PKI_DIR/coordinator.pk")
    addrs=$SFL_COORDINATOR
    if [ "${SFL_AGENT_SPREAD:-0}" = 1 ]; then
        addrs=$(spread "$SFL_COORDINATOR" "$shard")
        log "agent $name: coordinator list $addrs"
    fi
    set -f
    # shellcheck disable=SC2086 # extra flags, space-separated
    "$SFL_BIN_DIR/sfl-agent" --coordinator "$addrs" --server_name "$SFL_COORDINATOR_NAME" \
        --ca "$SFL_PKI_DIR/ca.crt" --cert "$state/tls/agent.crt" --key "$state/tls/agent.key" \
        --coordinator_pk "$pk" --data "libsvm:$SFL_DATA_DIR/shards/client-$shard.svm" \
        --state_dir "$state" ${SFL_AGENT_ARGS:-} &
    child=$!
    # The lease says this claim is alive; it stops with the agent.
    (
        trap 'kill "$s" 2>/dev/null; exit 0' TERM
        while kill -0 "$child" 2>/dev/null; do
            touch "$claims/$shard/lease" 2>/dev/null || true
            sleep "$SFL_LEASE_REFRESH_S" &
            s=$!
            wait "$s" || true
        done
    ) &
    refresher=$!
    trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT HUP
    while :; do
        rc=0
        wait "$child" || rc=$?
        # a signal interrupts wait; the agent is still stopping then
        kill -0 "$child" 2>/dev/null || break
    done
    kill "$refresher" 2>/dev/null || true
    exit "$rc"
}

# ---- ctl, sim, health --------------------------------------------------------------

cmd_ctl() {
    c=$SFL_PKI_DIR/admin/$SFL_ADMIN_NAME
    [ -r "$c.key" ] || die "no admin certificate $c.crt (has the pki service run?)"
    ini=$(mktemp "${TMPDIR:-/tmp}/sflctl.XXXXXX")
    cat >"$ini" <<EOF
[sflctl]
coordinator = $SFL_CTL_COORDINATOR
server_name = $SFL_COORDINATOR_NAME
ca = $SFL_PKI_DIR/ca.crt
cert = $c.crt
key = $c.key
EOF
    rc=0
    "$SFL_BIN_DIR/sflctl" --config "$ini" "$@" || rc=$?
    rm -f "$ini"
    exit "$rc"
}

# Coordinator: GET /metrics answers 200 with sfl metrics (bash's /dev/tcp:
# the slim image has no curl). A fleet's master: the same once it leads; a
# standby listens on nothing and is healthy while it runs (it only waits
# for the leader lock). A front-end: its agents' port accepts connections. Agent: the lease refresher is alive. Other
# roles: healthy.
cmd_health() {
    role=${1:-$(cat "$SFL_RUN_DIR/sfl-role" 2>/dev/null || true)}
    # shellcheck disable=SC2016 # bash expands them
    tcp='exec 3<>"/dev/tcp/$1/$2"'
    case $role in
    frontend)
        port=${SFL_LISTEN##*:}
        exec timeout 5 bash -c "$tcp" health 127.0.0.1 "$port"
        ;;
    master)
        # listening on neither port: a standby
        if ! timeout 3 bash -c "$tcp" health 127.0.0.1 "${SFL_LISTEN##*:}" 2>/dev/null &&
            ! timeout 3 bash -c "$tcp" health 127.0.0.1 "${SFL_METRICS_LISTEN##*:}" 2>/dev/null; then
            exit 0
        fi
        cmd_health coordinator
        ;;
    coordinator)
        addr=$SFL_METRICS_LISTEN metrics=1
        if [ "$addr" = off ] || [ -z "$addr" ]; then
            addr=$SFL_LISTEN metrics=0
        fi
        host=${addr%:*} port=${addr##*:}
        case $host in '' | 0.0.0.0 | '[::]' | '*') host=127.0.0.1 ;; esac
        host=${host#[}
        host=${host%]}
        # shellcheck disable=SC2016 # bash expands them
        if [ $metrics = 0 ]; then # the gRPC port accepts connections
            exec timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' health "$host" "$port"
        fi
        # shellcheck disable=SC2016 # bash expands them
        exec timeout 5 bash -c '
            exec 3<>"/dev/tcp/$1/$2" || exit 1
            printf "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n" "$1" >&3
            IFS= read -r status <&3 || exit 1
            case $status in "HTTP/1."?" 200"*) ;; *) echo "metrics: $status"; exit 1 ;; esac
            grep -q "^sfl_start_time_seconds" <&3' health "$host" "$port"
        ;;
    agent)
        shard=$(cat "$SFL_AGENT_STATE_DIR/shard" 2>/dev/null) || exit 1
        [ "$(age "$SFL_DATA_DIR/claims/$shard/lease")" -le $((2 * SFL_LEASE_REFRESH_S + 5)) ]
        ;;
    *) exit 0 ;;
    esac
}

# The way an agent reaches the coordinator, without TLS: a TCP connection to
# $1 (default $SFL_COORDINATOR) within 3 s. One line: which address it
# resolved to and whether the connection opened.
cmd_probe() {
    to=${1:-${SFL_COORDINATOR%%,*}}
    host=${to%:*} port=${to##*:}
    host=${host#[}
    host=${host%]}
    case $port in '' | *[!0-9]*) die "probe: HOST:PORT expected (got '$to')" ;; esac
    ip=$(getent hosts "$host" | awk '{ print $1; exit }')
    [ -n "$ip" ] || die "probe: $host does not resolve in this container"
    # shellcheck disable=SC2016 # bash expands them
    if timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe "$ip" "$port" 2>/dev/null; then
        echo "$PROG: probe: $host:$port ($ip) accepts connections"
    else
        die "probe: no connection to $host:$port ($ip) within 3 s (is the coordinator up? does a firewall drop traffic between the containers? docs/docker.md, Troubleshooting)"
    fi
}

usage() {
    sed -n '2,22p' "$0" 2>/dev/null | sed 's/^# \{0,1\}//' || true
    echo "Environment: see docs/docker.md and deploy/docker/compose.env.example."
}

[ $# -ge 1 ] || set -- help
cmd=$1
shift
case $cmd in
pki) cmd_pki "$@" ;;
data) cmd_data "$@" ;;
coordinator) cmd_coordinator "$@" ;;
master | frontend)
    SFL_ROLE=$cmd
    cmd_coordinator "$@"
    ;;
agent) cmd_agent "$@" ;;
ctl) cmd_ctl "$@" ;;
sim) exec "$SFL_BIN_DIR/sfl-sim" "$@" ;;
health) cmd_health "$@" ;;
probe) cmd_probe "$@" ;;
help | -h | --help) usage ;;
*) exec "$cmd" "$@" ;;
esac
