#!/bin/sh
# deploy/monitoring/ without a coordinator, in a second (make test): the
# Grafana dashboard's structure (every panel with the datasource variable,
# targets and a unique id; only metrics server/service/coordmetrics.c renders; the
# panels the docs promise), and, when Debian's prometheus is installed,
# promtool check config / check rules / test rules. make test-monitoring
# runs the same files against a live coordinator.
set -eu
. tests/e2e/lib-step.sh
fail() { echo "FAIL: $*"; exit 1; }
M=deploy/monitoring
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

step "the dashboard's structure and metric names"
/usr/bin/python3 -I tests/docker/dashboard.py check "$M/grafana-sfl.json" server/service/coordmetrics.c ||
    fail "dashboard check"
# the check fails on a metric the coordinator does not render, a repeated
# panel id and a panel without a datasource
sed 's/"sfl_job_train_loss{/"sfl_job_train_los{/' "$M/grafana-sfl.json" > "$t/typo.json"
/usr/bin/python3 -I - "$M/grafana-sfl.json" "$t" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["panels"][1]["id"] = d["panels"][0]["id"]
json.dump(d, open(sys.argv[2] + "/dup.json", "w"))
d = json.load(open(sys.argv[1]))
del d["panels"][2]["datasource"]
json.dump(d, open(sys.argv[2] + "/nods.json", "w"))
EOF
for bad in typo dup nods; do
    if /usr/bin/python3 -I tests/docker/dashboard.py check "$t/$bad.json" server/service/coordmetrics.c \
        > "$t/$bad.out" 2>&1; then
        fail "dashboard check passed $bad.json"
    fi
done
grep -q "sfl_job_train_los is not a metric" "$t/typo.out" || fail "typo: $(cat "$t/typo.out")"
grep -q "id missing or not unique" "$t/dup.out" || fail "dup: $(cat "$t/dup.out")"
grep -q "datasource None" "$t/nods.out" || fail "nods: $(cat "$t/nods.out")"

if command -v promtool > /dev/null 2>&1; then
    step "promtool: config, rules, and the alerts' unit tests"
    promtool check config "$M/prometheus.yml" > "$t/p.out" 2>&1 || fail "$(cat "$t/p.out")"
    promtool check rules "$M/alerts.yml" > "$t/p.out" 2>&1 || fail "$(cat "$t/p.out")"
    promtool test rules tests/monitoring/alerts_test.yml > "$t/p.out" 2>&1 || fail "$(cat "$t/p.out")"
else
    echo "skipped: promtool checks (no promtool: make deps-monitoring)"
fi
echo "dashboard: ok"
