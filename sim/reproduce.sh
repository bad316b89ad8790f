#!/bin/sh
# make reproduce: run sim/experiments/*.ini and write results/REPORT.md.
# ONLY=fedmac|dpbcfw|secagg (make reproduce ONLY=fedmac) runs that section alone and
# replaces it in the existing report.
set -eu
SIM=${1:-build/sfl-sim}
exec /usr/bin/python3 sim/report.py --sim "$SIM" --data "${SFL_TEST_DATA:-../shared/data}" \
    ${ONLY:+--only "$ONLY"}
