#!/bin/sh
# deploy/k8s/secrets.sh: the fleet's PKI and secrets as Kubernetes Secret
# manifests on stdout (docs/operations.md, "A fleet on PostgreSQL").
#
#   deploy/k8s/secrets.sh [--frontend-name NAME]... PKIDIR | kubectl apply -f -
#
# PKIDIR keeps the CA (with its key: keep it offline) and every
# certificate; what exists there is reused, so a second run prints the same
# Secrets. Made with deploy/pki/sfl-pki:
#   sfl-ca              ca.crt (every pod checks peers against it)
#   sfl-master-tls      the masters' certificate: sfl-master, sfl-master-0/1
#                       under the headless Service sfl-master
#   sfl-frontend-tls    the front-ends' certificate, also naming each
#                       --frontend-name (the address agents dial: the load
#                       balancer's DNS name or IP)
#   sfl-admin-tls       sflctl's admin certificate (not mounted anywhere)
#   sfl-fleet-identity  coordinator.key (the task-signing key both masters
#                       use; made by sfl-coordinator --public-key) and
#                       coordinator.pk (the public key agents pin)
#   sfl-postgres-tls    PostgreSQL's server certificate (sfl-postgres.sfl.svc)
#   sfl-postgres-auth   password: the database role sfl's (random)
# Environment: SFL_PKI (default: the sfl-pki beside this tree),
# SFL_COORDINATOR (the sfl-coordinator binary; default: on PATH, else
# build/sfl-coordinator), SFL_K8S_NAMESPACE (default sfl).
set -eu
PROG=secrets.sh
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PKI=${SFL_PKI:-$ROOT/deploy/pki/sfl-pki}
NS=${SFL_K8S_NAMESPACE:-sfl}
die() {
    echo "$PROG: $*" >&2
    exit 1
}
fe_names=""
while [ $# -gt 1 ]; do
    case $1 in
    --frontend-name)
        fe_names="$fe_names $2"
        shift 2
        ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] || die "usage: $PROG [--frontend-name NAME]... PKIDIR"
d=$1
coord=${SFL_COORDINATOR:-$(command -v sfl-coordinator 2>/dev/null || echo "$ROOT/build/sfl-coordinator")}
[ -x "$coord" ] || die "no sfl-coordinator ($coord): build it (make) or set SFL_COORDINATOR"
pki() { sh "$PKI" "$@" >/dev/null || die "sfl-pki $*: failed"; }
svc=$NS.svc
mkdir -p "$d"
[ -f "$d/ca.crt" ] || pki init "$d"
[ -f "$d/coordinator/sfl-master.crt" ] ||
    pki coordinator "$d" sfl-master "sfl-master.$svc" "sfl-master-0.sfl-master.$svc" \
        "sfl-master-1.sfl-master.$svc" "sfl-master.$svc.cluster.local"
# shellcheck disable=SC2086 # names, space-separated
[ -f "$d/frontend/sfl-frontend.crt" ] ||
    pki frontend "$d" sfl-frontend "sfl-frontend.$svc" "sfl-frontend.$svc.cluster.local" $fe_names
[ -f "$d/admin/admin.crt" ] || pki admin "$d" admin
[ -f "$d/postgres/sfl-postgres.crt" ] ||
    pki postgres "$d" sfl-postgres "sfl-postgres.$svc" "sfl-postgres-0.sfl-postgres.$svc" \
        "sfl-postgres.$svc.cluster.local"
mkdir -p "$d/fleet"
chmod 700 "$d/fleet"
pk=$("$coord" --state_dir "$d/fleet" --public-key 2>/dev/null) || die "$coord --public-key failed"
echo "$pk" >"$d/fleet/coordinator.pk"
if [ ! -s "$d/postgres/password" ]; then
    (umask 077 && openssl rand -hex 16 >"$d/postgres/password") || die "openssl rand failed"
fi

b64() { base64 -w 0 <"$1"; }
# secret NAME TYPE KEY=FILE...
secret() {
    printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n' "$1" "$NS"
    printf '  labels:\n    app.kubernetes.io/part-of: sfl\ntype: %s\ndata:\n' "$2"
    shift 2
    for kv in "$@"; do
        printf '  %s: %s\n' "${kv%%=*}" "$(b64 "${kv#*=}")"
    done
}
echo "# Made by deploy/k8s/secrets.sh from $d (keep ca.key offline)."
secret sfl-ca Opaque "ca.crt=$d/ca.crt"
secret sfl-master-tls kubernetes.io/tls "tls.crt=$d/coordinator/sfl-master.crt" "tls.key=$d/coordinator/sfl-master.key"
secret sfl-frontend-tls kubernetes.io/tls "tls.crt=$d/frontend/sfl-frontend.crt" "tls.key=$d/frontend/sfl-frontend.key"
secret sfl-admin-tls kubernetes.io/tls "tls.crt=$d/admin/admin.crt" "tls.key=$d/admin/admin.key" "ca.crt=$d/ca.crt"
secret sfl-fleet-identity Opaque "coordinator.key=$d/fleet/coordinator.key" "coordinator.pk=$d/fleet/coordinator.pk"
secret sfl-postgres-tls kubernetes.io/tls "tls.crt=$d/postgres/sfl-postgres.crt" "tls.key=$d/postgres/sfl-postgres.key"
secret sfl-postgres-auth Opaque "password=$d/postgres/password"
echo "$PROG: Secrets for namespace $NS from $d; agents pin the fleet's key: --coordinator_pk $pk (sfl-pki kit --coordinator-pk), server name sfl-frontend or a --frontend-name" >&2
