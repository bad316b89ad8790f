#!/bin/sh
# The placement files without a cluster or an engine (< 1 s): deploy/k8s/
# parsed and every name it uses checked (tests/k8s/check.py: Secrets from
# secrets.sh and their keys, ConfigMaps, Services, StatefulSet pod names in
# the coordinator configs, ports, selectors, probes); first the check must
# catch planted mistakes, each in a copy, one at a time. Then, when
# docker-compose is installed, `docker-compose config` accepts
# docker-compose.fleet.yml and its services run the fleet's roles.
set -eu
. tests/e2e/lib-step.sh
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || skip "no python3-yaml for $PY (apt-get install python3-yaml)"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# plant FILE SED-EXPRESSION WANT: the check on a copy with FILE edited must
# fail with a line containing WANT.
plant() {
    rm -rf "$t/k"
    cp -r deploy/k8s "$t/k"
    sed -i "$2" "$t/k/$1"
    cmp -s "deploy/k8s/$1" "$t/k/$1" && fail "plant '$2' changed nothing in $1"
    if $PY -I tests/k8s/check.py "$t/k" >"$t/out" 2>&1; then
        cat "$t/out"
        fail "the check passed over: $1: $2"
    fi
    grep -qF -- "$3" "$t/out" || { cat "$t/out"; fail "no line '$3' for $1: $2"; }
}

step "planted mistakes fail the check, each named"
plant masters.yaml 's/name: sfl-fleet-identity$/name: sfl-fleet-identty/; s/secretName: sfl-fleet-identity/secretName: sfl-fleet-identty/' \
    "Secret sfl-fleet-identty does not exist"
plant frontends.yaml 's/key: tls.key/key: tls.pem/' "Secret sfl-frontend-tls has no key tls.pem"
plant postgres.yaml 's/serviceName: sfl-postgres/serviceName: postgres/' "serviceName postgres is not a Service"
plant frontends.yaml 's/sfl-master-1.sfl-master.sfl.svc/sfl-master-2.sfl-master.sfl.svc/' \
    "sfl-master-2 is no pod of a StatefulSet behind Service sfl-master"
plant masters.yaml 's/host=sfl-postgres.sfl.svc/host=sfl-pg.sfl.svc/' "host sfl-pg.sfl.svc: no Service sfl-pg"
plant frontends.yaml 's/targetPort: grpc/targetPort: grcp/' "targetPort grcp is not a port"
plant masters.yaml '/readinessProbe:/,/timeoutSeconds/d' "container master: no readinessProbe"
plant frontends.yaml 's/^            name: sfl-frontend-config$/            name: sfl-fe-config/' "ConfigMap sfl-fe-config does not exist"
plant masters.yaml 's/^  maxUnavailable: 1/  selector: {matchLabels: {app: nothing}}\n  maxUnavailable: 1/; /^  selector:$/,/app.kubernetes.io\/name: sfl-master$/d' \
    "PodDisruptionBudget sfl-master"
plant postgres.yaml 's/^  replicas: 1/  replicas: [1/' "does not parse"
plant masters.yaml 's/ sslmode=verify-full/ password=hunter2 sslmode=verify-full/' "a password in the ConfigMap"

step "deploy/k8s: every manifest parses, every name it uses exists"
$PY -I tests/k8s/check.py deploy/k8s || fail "deploy/k8s (the FAIL lines above)"

step "docker-compose.fleet.yml: valid, its services run the fleet's roles"
if command -v docker-compose >/dev/null 2>&1; then
    docker-compose -f docker-compose.fleet.yml --profile tools config >"$t/fleet.yml" 2>"$t/err" ||
        fail "docker-compose config: $(cat "$t/err")"
    for s in pki:pki data:data master1:master master2:master frontend1:frontend \
        frontend2:frontend frontend3:frontend agent:agent; do
        awk -v s="  ${s%%:*}:" '$0 == s { f = 1; next } f && /^  [a-z]/ { f = 0 } f' "$t/fleet.yml" |
            grep -A1 "^    command:" | grep -q "^    - ${s#*:}\$" || fail "service ${s%%:*} does not run role ${s#*:}"
    done
    grep -q "dockerfile: deploy/fleet/postgres.Dockerfile" "$t/fleet.yml" || fail "postgres is not built from deploy/fleet/postgres.Dockerfile"
    echo "docker-compose $(docker-compose version --short 2>/dev/null): valid"
else
    echo "SKIP (this step): docker-compose is not installed"
fi
