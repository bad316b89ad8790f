#!/bin/sh
# A throwaway PostgreSQL cluster for tests: the store's PostgreSQL backend
# (test_store), the fleet's e2e tests. Never the system's cluster.
#
#   tests/pgcluster.sh start DIR     initdb (first time) + start; prints the
#                                    conninfo line on stdout
#   tests/pgcluster.sh stop DIR      fast shutdown, data kept (start again
#                                    resumes it on the same port: a restart)
#   tests/pgcluster.sh destroy DIR   stop and remove the data
#   tests/pgcluster.sh conninfo DIR  the conninfo of a started cluster
#   tests/pgcluster.sh pid DIR       the postmaster's pid (for kill tests)
#
# DIR is the caller's (any owner, e.g. under build/). The data directory
# itself lives in a fresh /tmp/sfl-pg.XXXXXX owned by the user the server
# runs as: PostgreSQL refuses to run as root, so as root the server runs as
# $SFL_PG_USER (default postgres, else nobody) and DIR/data names that
# directory. The server listens on 127.0.0.1 only, on a free port picked
# here (retried when another process took it first), with its socket in
# the data directory; authentication is trust on loopback, superuser "sfl",
# fsync and full_page_writes on (the crash tests rely on them). Binaries:
# $SFL_PG_BIN, else Debian's /usr/lib/postgresql/<newest>/bin, else PATH.
# Exits non-zero with the reason on stderr (and the server log's tail).
# SFL_PG_LISTEN (default 127.0.0.1) widens listen_addresses for a test that
# reaches the server from a network namespace (ha_partition.sh; it adds its
# own pg_hba.conf line).
set -eu

die() { echo "pgcluster: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 start|stop|destroy|conninfo|pid DIR"
cmd=$1
dir=$2

bin=${SFL_PG_BIN:-}
if [ -z "$bin" ]; then
    for b in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$b/initdb" ] && { bin=$b; break; }
    done
fi
if [ -z "$bin" ]; then
    b=$(command -v initdb 2>/dev/null || true)
    [ -n "$b" ] || die "no PostgreSQL server binaries (initdb): install postgresql (Debian: apt-get install postgresql-15), or set SFL_PG_BIN"
    bin=$(dirname "$b")
fi

# as_user CMD...: runs CMD as the server's user (itself when not root)
if [ "$(id -u)" = 0 ]; then
    user=${SFL_PG_USER:-}
    if [ -z "$user" ]; then
        if id postgres >/dev/null 2>&1; then user=postgres; else user=nobody; fi
    fi
    as_user() { runuser -u "$user" -- "$@"; }
else
    user=$(id -un)
    as_user() { "$@"; }
fi

data() {
    [ -f "$dir/data" ] || die "$dir: no cluster here (run: $0 start $dir)"
    cat "$dir/data"
}

port_of() { sed -n "s/^port = \([0-9]*\).*/\1/p" "$1/postgresql.auto.sfl" 2>/dev/null | tail -1; }

conninfo() { echo "host=127.0.0.1 port=$(port_of "$1") user=sfl dbname=postgres connect_timeout=10"; }

free_port() {
    /usr/bin/python3 - <<'EOF'
import random, socket
for _ in range(200):
    p = random.randint(32000, 39999)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
EOF
}

start() {
    mkdir -p "$dir"
    if [ ! -f "$dir/data" ]; then
        d=$(mktemp -d /tmp/sfl-pg.XXXXXX)
        chmod 700 "$d"
        [ "$(id -u)" = 0 ] && chown "$user" "$d"
        as_user "$bin/initdb" -D "$d/db" -U sfl --auth=trust -E UTF8 --locale=C \
            >"$dir/initdb.log" 2>&1 || { tail -5 "$dir/initdb.log" >&2; die "initdb failed (log $dir/initdb.log)"; }
        echo "$d" >"$dir/data"
    fi
    d=$(data)
    tries=0
    while :; do
        port=$(port_of "$d")
        if [ -z "$port" ] || [ "$tries" -gt 0 ]; then
            port=$(free_port)
            [ -n "$port" ] || die "no free loopback port"
            # the settings this script owns, read back by port_of
            as_user sh -c "printf 'port = %s\n' $port > '$d/postgresql.auto.sfl'"
        fi
        if as_user "$bin/pg_ctl" -D "$d/db" -l "$d/server.log" -w -t 60 \
            -o "-c listen_addresses=${SFL_PG_LISTEN:-127.0.0.1} -c port=$port -c unix_socket_directories=$d -c max_connections=200 -c shared_buffers=32MB -c fsync=on -c full_page_writes=on" \
            start >"$dir/pg_ctl.log" 2>&1; then
            break
        fi
        tries=$((tries + 1))
        if [ "$tries" -ge 5 ] || ! grep -q "could not bind\|already in use" "$d/server.log" 2>/dev/null; then
            tail -5 "$d/server.log" >&2 2>/dev/null || true
            die "the server did not start (log $d/server.log)"
        fi
    done
    conninfo "$d"
}

case $cmd in
start) start ;;
stop)
    d=$(data)
    as_user "$bin/pg_ctl" -D "$d/db" -m fast -w -t 60 stop >/dev/null 2>&1 || true ;;
destroy)
    [ -f "$dir/data" ] || exit 0
    d=$(data)
    as_user "$bin/pg_ctl" -D "$d/db" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    case $d in /tmp/sfl-pg.*) rm -rf "$d" ;; esac
    rm -f "$dir/data" ;;
conninfo) conninfo "$(data)" ;;
pid) head -1 "$(data)/db/postmaster.pid" ;;
*) die "unknown command $cmd (start, stop, destroy, conninfo, pid)" ;;
esac
