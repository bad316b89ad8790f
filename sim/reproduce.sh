#!/bin/sh
# make reproduce: run sim/experiments/*.ini and write results/REPORT.md.
# ONLY=preamble|fedht|gradmp|fedmac|dpbcfw|secagg|notes (make reproduce ONLY=fedht)
# runs that section alone and replaces it in the existing report (SECTIONS in
# sim/report.py). Run CSVs go to results/runs/ (ignored by git).
set -eu
SIM=${1:-build/sfl-sim}
exec /usr/bin/python3 sim/report.py --sim "$SIM" --data "${SFL_TEST_DATA:-../shared/data}" \
    ${ONLY:+--only "$ONLY"}
