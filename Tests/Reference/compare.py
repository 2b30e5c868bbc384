#!/usr/bin/env python3
"""Compare two CSV files of the same winback report.

    compare.py WINBACK_CSV REFERENCE_CSV

Same header, same number of rows, same key columns (month, offer_id, kind); integer cells
exactly; decimal cells within 0.00005 (the reports write 4 decimals, so: equal to the 4th
decimal; amounts, written with 3, exactly), but the revenue intervals within 0.001. An empty
cell only matches an empty cell. Prints a short summary with the largest decimal difference; exits 1 on any mismatch, listing the first 10 differing cells.
"""

import csv
import re
import sys
from decimal import Decimal

KEY_COLUMNS = {"month", "offer_id", "kind", "currency"}
INTEGER = re.compile(r"-?\d+")
DECIMAL = re.compile(r"-?\d+\.\d+")
TOLERANCE = Decimal("0.00005")
# Intervals of revenue (docs/rules.md §13.3) come from a square root in doubles and are written
# in units with three decimals: equal to the third decimal, one unit of it either way.
INTERVAL_COLUMNS = {"revenue_lift_low", "revenue_lift_high"}
INTERVAL_TOLERANCE = Decimal("0.001")


def read(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise SystemExit(f"{path}: empty file (no header)")
    return rows[0], rows[1:]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    a_path, b_path = argv[1], argv[2]
    a_header, a_rows = read(a_path)
    b_header, b_rows = read(b_path)
    problems = []
    if a_header != b_header:
        print(f"header differs:\n  winback:   {a_header}\n  reference: {b_header}")
        return 1
    if len(a_rows) != len(b_rows):
        problems.append(f"row count: winback {len(a_rows)}, reference {len(b_rows)}")

    max_diff = Decimal(0)
    cells = decimals = 0
    for i, (ra, rb) in enumerate(zip(a_rows, b_rows), start=2):  # line numbers, header = 1
        if len(ra) != len(a_header) or len(rb) != len(b_header):
            problems.append(f"line {i}: field count winback {len(ra)}, reference {len(rb)}")
            continue
        key = ",".join(v for name, v in zip(a_header, rb) if name in KEY_COLUMNS)
        for name, va, vb in zip(a_header, ra, rb):
            cells += 1
            where = f"line {i} [{key}] {name}: winback {va!r}, reference {vb!r}"
            if name in KEY_COLUMNS:
                if va != vb:
                    problems.append(where + " (key)")
                continue
            if va == vb:
                if DECIMAL.fullmatch(va):
                    decimals += 1
                continue
            if DECIMAL.fullmatch(va) and DECIMAL.fullmatch(vb):
                decimals += 1
                diff = abs(Decimal(va) - Decimal(vb))
                max_diff = max(max_diff, diff)
                if diff > (INTERVAL_TOLERANCE if name in INTERVAL_COLUMNS else TOLERANCE):
                    problems.append(where + f" (differs by {diff})")
            elif INTEGER.fullmatch(va) and INTEGER.fullmatch(vb):
                problems.append(where + f" (differs by {int(va) - int(vb)})")
            else:
                problems.append(where)

    name = b_path.rsplit("/", 1)[-1]
    print(f"{name}: {len(b_rows)} rows (winback {len(a_rows)}), {cells} cells compared, "
          f"{decimals} decimal cells, max decimal difference {max_diff}, "
          f"{len(problems)} mismatches")
    for p in problems[:10]:
        print("  " + p)
    if len(problems) > 10:
        print(f"  ... and {len(problems) - 10} more")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
