#!/bin/sh
# Compare winback's campaign reports with the reference implementation on one world.
#
#   Tests/Reference/run.sh WORLD_DIR            (SEED and CUSTOMERS tune a new world;
#                                               MONEY=1 gives it a money: block and rates)
#
# Makes the world with make_world.py when WORLD_DIR has no pipeline.yaml, runs
# `${WINBACK:-winback} run WORLD_DIR/pipeline.yaml --threads 2`, runs measure.py into
# WORLD_DIR/reference, and compares winback-uplift.csv, retention-after-return.csv,
# revenue-after-return.csv and winback-revenue-uplift.csv.
# Exits non-zero when winback fails or any report differs.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 WORLD_DIR" >&2
    exit 64
fi
WORLD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
WINBACK=${WINBACK:-winback}
PYTHON=${PYTHON:-python3}

if [ ! -f "$WORLD/pipeline.yaml" ]; then
    if [ "${MONEY:-0}" = 1 ]; then
        "$PYTHON" "$HERE/make_world.py" "$WORLD" --customers "${CUSTOMERS:-3000}" --seed "${SEED:-1}" --money
    else
        "$PYTHON" "$HERE/make_world.py" "$WORLD" --customers "${CUSTOMERS:-3000}" --seed "${SEED:-1}"
    fi
fi

"$WINBACK" run "$WORLD/pipeline.yaml" --threads 2 --quiet
"$PYTHON" "$HERE/measure.py" "$WORLD/pipeline.yaml" "$WORLD/reference"

REPORTS="$WORLD/out/reference/2026-11-22/reports"
status=0
for report in winback-uplift.csv retention-after-return.csv revenue-after-return.csv \
    winback-revenue-uplift.csv; do
    if [ ! -f "$REPORTS/$report" ]; then
        echo "$report: winback did not write $REPORTS/$report"
        status=1
        continue
    fi
    "$PYTHON" "$HERE/compare.py" "$REPORTS/$report" "$WORLD/reference/$report" || status=1
done
exit $status
