#!/bin/sh
# sfl-postgres: the fleet's PostgreSQL (deploy/fleet/postgres.Dockerfile,
# docker-compose.fleet.yml, deploy/k8s/postgres.yaml).
#
#   run      wait for the password and the TLS certificate, initdb into
#            $PGDATA on the first start (the role and database of the fleet
#            made there), then run postgres in the foreground
#   health   pg_isready on the local socket
#
# Authentication: from the network only `hostssl` with scram-sha-256, for
# the one role and database of the fleet ($SFL_PG_USER, $SFL_PG_DB); the
# superuser postgres only on the container's Unix socket (peer: the
# operating system user postgres, i.e. `docker exec` / `kubectl exec`, for
# pg_dump, pg_basebackup and psql). Nothing is trusted on a network.
#
# Environment (defaults in brackets):
#   PGDATA              the cluster [/var/lib/postgresql/data/pgdata]; the
#                       volume is mounted on its parent
#   SFL_PG_SECRET_DIR   holds password (the fleet role's password, one line),
#                       server.crt and server.key [/pgsecret]; read at every
#                       start: the password is set again (rotation = new
#                       file + restart)
#   SFL_PG_USER, SFL_PG_DB   the fleet's role and database [sfl, sfl]
#   SFL_PG_ARGS         extra `-c name=value` settings for postgres
#   SFL_PG_SOCKET_DIR   the superuser's Unix socket [/run/postgresql]
#   PGPORT              the port [5432]
#   SFL_WAIT_S          seconds to wait for the secret files [300]
set -eu
PROG=sfl-postgres
: "${PGDATA:=/var/lib/postgresql/data/pgdata}"
: "${SFL_PG_SECRET_DIR:=/pgsecret}"
: "${SFL_PG_USER:=sfl}"
: "${SFL_PG_DB:=sfl}"
: "${SFL_WAIT_S:=300}"
: "${SFL_PG_SOCKET_DIR:=/run/postgresql}"
: "${PGPORT:=5432}"
export PGPORT
SOCK=$SFL_PG_SOCKET_DIR
TLS=$(dirname "$PGDATA")/tls

log() { echo "$PROG: $*" >&2; }
die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

wait_file() {
    n=0
    while [ ! -s "$1" ]; do
        [ $n -eq 0 ] && log "waiting for $1 ($2)"
        n=$((n + 1))
        [ $n -le "$SFL_WAIT_S" ] || die "$1 did not appear in ${SFL_WAIT_S}s ($2)"
        sleep 1
    done
}

valid_ident() {
    case $1 in
    '' | [!a-z_]* | *[!a-z0-9_]*) die "$2 must be a lowercase SQL identifier (got '$1')" ;;
    esac
}

# psql as the superuser on the socket, ON_ERROR_STOP; the SQL on stdin.
su_psql() {
    psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -U postgres -d postgres "$@"
}

cmd_run() {
    valid_ident "$SFL_PG_USER" SFL_PG_USER
    valid_ident "$SFL_PG_DB" SFL_PG_DB
    s=$SFL_PG_SECRET_DIR
    wait_file "$s/password" "the pki service writes it"
    wait_file "$s/server.crt" "the pki service writes it"
    wait_file "$s/server.key" "the pki service writes it"
    pw=$(head -n 1 "$s/password")
    case $pw in
    ???????????????*) ;;
    *) die "$s/password: the password must have at least 16 characters" ;;
    esac
    case $pw in *[!A-Za-z0-9._~+/=-]*) die "$s/password: only A-Z a-z 0-9 . _ ~ + / = - please" ;; esac
    umask 077
    # postgres wants its key owned by itself and mode 0600 (a Kubernetes
    # Secret volume is owned by root): a private copy at every start.
    mkdir -p "$TLS"
    cp "$s/server.crt" "$TLS/server.crt"
    cp "$s/server.key" "$TLS/server.key"
    chmod 600 "$TLS/server.key"
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
        log "initdb into $PGDATA (first start)"
        rm -rf "$PGDATA"
        mkdir -p "$PGDATA"
        chmod 700 "$PGDATA"
        initdb -D "$PGDATA" -U postgres -E UTF8 --locale=C --auth-local=peer \
            --auth-host=reject >"$(dirname "$PGDATA")/initdb.log" 2>&1 ||
            die "initdb failed: $(tail -n 5 "$(dirname "$PGDATA")/initdb.log")"
        init=1
    else
        init=0
    fi
    cat >"$PGDATA/pg_hba.conf" <<HBA
# Written by sfl-postgres at every start.
# TYPE   DATABASE       USER            ADDRESS  METHOD
local    all            postgres                 peer
local    replication    postgres                 peer
local    $SFL_PG_DB     $SFL_PG_USER             scram-sha-256
hostssl  $SFL_PG_DB     $SFL_PG_USER    all      scram-sha-256
HBA
    set -- -c "port=$PGPORT" -c "ssl=on" -c "ssl_cert_file=$TLS/server.crt" -c "ssl_key_file=$TLS/server.key" \
        -c "ssl_min_protocol_version=TLSv1.2" -c "password_encryption=scram-sha-256" \
        -c "unix_socket_directories=$SOCK" -c "unix_socket_permissions=0700"
    # The role, its database and its password, on the socket only (no
    # network listener yet): made at the first start, the password set at
    # every start.
    pg_ctl -D "$PGDATA" -w -t 120 -l "$(dirname "$PGDATA")/bootstrap.log" \
        -o "-c listen_addresses='' $(printf "%s " "$@")" start >/dev/null ||
        die "postgres did not start: $(tail -n 5 "$(dirname "$PGDATA")/bootstrap.log")"
    {
        if [ $init = 1 ]; then
            echo "CREATE ROLE $SFL_PG_USER LOGIN;"
        fi
        echo "ALTER ROLE $SFL_PG_USER PASSWORD :'pw';"
    } | su_psql -v pw="$pw" || die "cannot set the role $SFL_PG_USER"
    if [ $init = 1 ]; then
        echo "CREATE DATABASE $SFL_PG_DB OWNER $SFL_PG_USER;" | su_psql ||
            die "cannot create the database $SFL_PG_DB"
        echo "REVOKE ALL ON DATABASE $SFL_PG_DB FROM PUBLIC;" | su_psql
        log "initdb: role $SFL_PG_USER and database $SFL_PG_DB made"
    fi
    pg_ctl -D "$PGDATA" -w -t 120 -m fast stop >/dev/null || die "postgres did not stop after the bootstrap"
    log "postgres: listening on *:$PGPORT (hostssl scram-sha-256 for $SFL_PG_USER@$SFL_PG_DB only)"
    # shellcheck disable=SC2086 # extra settings, space-separated
    exec postgres -D "$PGDATA" -c "listen_addresses=*" "$@" ${SFL_PG_ARGS:-}
}

case ${1:-run} in
run) cmd_run ;;
health) exec pg_isready -q -h "$SOCK" -U postgres -d postgres -t 4 ;;
-h | --help | help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' ;;
*) exec "$@" ;;
esac
