#!/bin/sh
# make test-monitoring: the shipped monitoring files against a live
# coordinator on loopback, with Debian's prometheus (Grafana is not
# packaged for Debian, so its dashboard is checked through Prometheus):
#   - promtool check config / check rules on deploy/monitoring/, and
#     promtool test rules on tests/monitoring/alerts_test.yml (each alert
#     fires on made-up series, and stays quiet on healthy ones);
#   - a coordinator with three small jobs: a logistic and an lsq one, each
#     with two agents that hold out rows (loss, accuracy, mse), and a
#     private vertical dpbcfw one on two more agents (privacy ledger);
#   - prometheus runs deploy/monitoring/prometheus.yml with only its target
#     rewritten to this coordinator's metrics port, loads the 14 alert
#     rules, and scrapes it;
#   - tests/docker/prometheus.sh: every panel's query of the Grafana
#     dashboard returns data (and it fails on a panel that has none).
# Run from the repository root after make all: SFL_BIN=build sh tests/monitoring/monitoring.sh
# Exit 77 (skip) without prometheus/promtool (make deps-monitoring).
set -eu
. tests/e2e/lib.sh
SFL_STEP_NAME=monitoring
M=deploy/monitoring

for p in prometheus promtool; do
    command -v $p > /dev/null 2>&1 || skip "$p not installed (make deps-monitoring: Debian's prometheus)"
done
for p in sfl-sim sfl-coordinator sfl-agent sflctl; do
    [ -x "$BIN/$p" ] || fail "$BIN/$p missing (make first)"
done

step "promtool: the shipped config and rules check, the alerts fire as tests/monitoring/alerts_test.yml says"
promtool check config "$M/prometheus.yml" > "$t/promtool.out" 2>&1 || fail "check config: $(cat "$t/promtool.out")"
promtool check rules "$M/alerts.yml" > "$t/promtool.out" 2>&1 || fail "check rules: $(cat "$t/promtool.out")"
promtool test rules tests/monitoring/alerts_test.yml > "$t/promtool.out" 2>&1 ||
    fail "test rules: $(cat "$t/promtool.out")"

step "a coordinator with a logistic, an lsq and a private vertical job; six agents"
pki_federation agent-0 agent-1 agent-2 agent-3 agent-4 agent-5
mkdir -p "$t/data" "$t/rdata" "$t/vdata" "$t/state"
"$BIN/sfl-sim" --data synth:sim2 --clients 2 --samples 200 --seed 5 --dump-shards "$t/data" > /dev/null
"$BIN/sfl-sim" --data synth:sparse --clients 2 --samples 200 --seed 5 --dump-shards "$t/rdata" > /dev/null
"$BIN/sfl-sim" --data synth:dpbcfw --samples 60 --dim 20 --density 0.3 --partition features:2 \
    --seed 7 --test-frac 0 --dump-shards "$t/vdata" > /dev/null
port=$(pick_port)
mport=$((port + 1))
# horizontal jobs: their agents picked by condition (classification or
# regression data)
hjob() { # $1 name, $2 loss, $3 lr, $4 condition
    printf '[job %s]\nalgo = fediterht\nloss = %s\nlr = %s\nconditions = %s\n' "$1" "$2" "$3" "$4"
    printf 'features = 1000\ntau = 100\nlocal_steps = 2\nbatch = 20\nrounds = 4\ncohort = 2\n'
    printf 'overselect = 0\nmin_quorum = 2\ndeadline_ms = 30000\nseed = 5\n\n'
}
{ coordinator_section "127.0.0.1:$port" "127.0.0.1:$mport"; fast_rounds; echo
  hjob logreg logistic 0.03 classes; echo "labels = 0,1"; echo
  hjob regress lsq 0.01 regression
  printf '[job private]\nalgo = dpbcfw\nloss = lsq\nfeatures = 20\nrows = 60\neta = 2\nm = 20\n'
  printf 'epsilon = 1\nrounds = 3\niterations_per_round = 5\ncohort = 2\noverselect = 0\n'
  printf 'min_quorum = 2\ndeadline_ms = 20000\nseed = 7\n'
} > "$t/coordinator.ini"
start_coordinator
for i in 0 1; do start_agent "$i" --eval_fraction 0.2 --conditions classes; done
for i in 0 1; do
    start_agent $((i + 2)) --data "libsvm:$t/rdata/client-$i.svm" --eval_fraction 0.2 \
        --conditions regression
done
block() { awk -v k="$1" '$1 == k { print $2 + 1 ":" $3 }' "$t/vdata/blocks"; }
for k in 0 1; do
    start_agent $((k + 4)) --data "libsvm:$t/vdata/client-$k.svm" --block "$(block $k)" \
        --ids_file "$t/vdata/client-$k.ids"
done
finished() { grep -q "event=job_state job=$1 state=finished" "$t/coord.log"; }
for j in 1 2 3; do wait_for 20 finished $j || fail "job $j did not finish"; done

step "prometheus with deploy/monitoring/prometheus.yml, its target rewritten to 127.0.0.1:$mport"
pport=$(pick_port)
mkdir -p "$t/prom"
sed "s/'127.0.0.1:9464'/'127.0.0.1:$mport'/" "$M/prometheus.yml" > "$t/prom/prometheus.yml"
cp "$M/alerts.yml" "$t/prom/alerts.yml"
[ "$(diff "$M/prometheus.yml" "$t/prom/prometheus.yml" | grep -c '^[<>]')" -eq 2 ] ||
    fail "the target rewrite changed more or less than one line"
prometheus --config.file="$t/prom/prometheus.yml" --storage.tsdb.path="$t/prom/data" \
    --web.listen-address="127.0.0.1:$pport" > "$t/prometheus.log" 2>&1 &
pids="$pids $!"
prom_get() { # $1 path: the body on stdout
    /usr/bin/python3 -I -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(
        'http://127.0.0.1:$pport' + sys.argv[1], timeout=5).read().decode())" "$1" 2> /dev/null
}
ready() { prom_get /-/ready > /dev/null; }
wait_for 10 ready || fail "prometheus did not start"
rules() {
    prom_get /api/v1/rules | /usr/bin/python3 -I -c "import json, sys
d = json.load(sys.stdin)['data']['groups']
sys.exit(sum(len(g['rules']) for g in d) != 14)"
}
wait_for 5 rules || fail "prometheus did not load the 14 rules of alerts.yml: $(prom_get /api/v1/rules)"
up() {
    prom_get '/api/v1/query?query=up%7Bjob%3D%22sfl-coordinator%22%7D' | grep -q '"value":\[[0-9.]*,"1"\]'
}
wait_for 20 up || fail "prometheus does not scrape the coordinator: $(prom_get /api/v1/targets)"
# the coordinator's job="ID" label arrives as sfl_job (metric_relabel_configs)
relabelled() {
    prom_get '/api/v1/query?query=sfl_job_committed_round%7Bsfl_job%3D%223%22%2Cname%3D%22private%22%2Cexported_job%3D%22%22%7D' |
        grep -q '"value":\[[0-9.]*,"3"\]'
}
wait_for 5 relabelled || fail "no sfl_job label: $(prom_get '/api/v1/query?query=sfl_job_committed_round')"

step "every panel of the Grafana dashboard returns data (tests/docker/prometheus.sh)"
rc=0
tests/docker/prometheus.sh "127.0.0.1:$pport" > "$t/panels.out" 2>&1 || rc=$?
cat "$t/panels.out"
[ "$rc" -eq 0 ] || fail "tests/docker/prometheus.sh exit $rc"
# and it fails on a panel without data: personal accuracy (no FedMac job here)
/usr/bin/python3 -I - deploy/monitoring/grafana-sfl.json "$t/nodata.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d["panels"] if p["id"] == 12)
p["targets"].append(dict(p["targets"][0], refId="B",
                         expr=p["targets"][0]["expr"].replace("eval_accuracy", "personal_accuracy")))
json.dump(d, open(sys.argv[2], "w"))
EOF
rc=0
SFL_PROM_WAIT=3 tests/docker/prometheus.sh "127.0.0.1:$pport" "$t/nodata.json" > "$t/nodata.out" 2>&1 ||
    rc=$?
[ "$rc" -eq 1 ] && grep -q "^FAIL panel 12 'Held-out accuracy per job' B: 0 series" "$t/nodata.out" ||
    fail "a panel without data passed (exit $rc): $(cat "$t/nodata.out")"
echo "monitoring: $(tail -1 "$t/panels.out")"

# A picture of the dashboard (Grafana is not packaged for Debian): its panels
# drawn from the same queries' ranges, screenshot in headless Chromium to
# build/dashboard.png when Chromium is there.
step "the dashboard drawn from Prometheus, screenshot to $SFL_BIN/dashboard.png"
/usr/bin/python3 -I tests/docker/dashboard.py render deploy/monitoring/grafana-sfl.json \
    "http://127.0.0.1:$pport" "$t/dashboard.html" 3 > "$t/render.out" 2>&1 ||
    fail "dashboard.py render: $(cat "$t/render.out")"
if command -v chromium > /dev/null 2>&1; then
    rm -f "$SFL_BIN/dashboard.png"
    timeout 60 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$t/chromium" \
        --window-size=1200,1500 --screenshot="$SFL_BIN/dashboard.png" "file://$t/dashboard.html" \
        > "$t/chromium.out" 2>&1 || true
    if [ -s "$SFL_BIN/dashboard.png" ]; then
        echo "monitoring: dashboard screenshot $SFL_BIN/dashboard.png"
    else
        echo "monitoring: no dashboard screenshot (chromium: $(tail -n 2 "$t/chromium.out"))"
    fi
fi
