#!/bin/sh
# Every panel of the Grafana dashboard returns data: each target's PromQL of
# deploy/monitoring/grafana-sfl.json, its template variables substituted
# ($instance and $job_name resolved from Prometheus as Grafana would,
# $__rate_interval = 4 x the shipped 15 s scrape interval), is run against
# the Prometheus at HOST:PORT (one that scrapes an sfl coordinator with
# deploy/monitoring/prometheus.yml) until all return data, bounded by
# SFL_PROM_WAIT seconds (default 180: a few scrapes on an idle machine).
# SFL_PROM_ABSENT=REGEX: the panels whose title matches are named and not
# run (a job kind the federation under test lacks: the compose federation
# has no private job).
#
#   tests/docker/prometheus.sh HOST:PORT [DASHBOARD]
#
# Exit 0: every query returns data; 1: one does not, or Prometheus does not
# answer (each query printed with its series count); 2: usage; 77: skipped
# (no python3), with the reason. Used by make test-monitoring
# (tests/monitoring/monitoring.sh) and the compose federation test.
set -u
here=$(dirname "$0")
dash=${2:-$here/../../deploy/monitoring/grafana-sfl.json}
case ${1:-} in
'' | -h | --help)
    sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
*:*) ;;
*)
    echo "prometheus.sh: '$1' is not HOST:PORT" >&2
    exit 2
    ;;
esac
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
    echo "SKIP: $PY not found (apt-get install python3)"
    exit 77
fi
[ -r "$dash" ] || { echo "FAIL: no dashboard '$dash'"; exit 1; }
src=$here/../../server/service/coordmetrics.c
[ -r "$src" ] || src=
"$PY" -I "$here/dashboard.py" check "$dash" $src || exit 1
"$PY" -I "$here/dashboard.py" query "$dash" "http://$1" --timeout "${SFL_PROM_WAIT:-180}" \
    --rate-interval 1m ${SFL_PROM_ABSENT:+--absent "$SFL_PROM_ABSENT"}
