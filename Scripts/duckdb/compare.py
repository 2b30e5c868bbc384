#!/usr/bin/env python3
"""winback against DuckDB SQL on the same world: the same answer, and how long each takes.

    Scripts/duckdb/compare.py PIPELINE.yaml [--winback BIN] [--runs N] [--threads N]

Runs Scripts/duckdb/eligibility.sql (docs/rules.md §3 in DuckDB SQL: read_json over the gzipped
exports, window functions for the periods and the runs) and `winback run PIPELINE --threads N`
in turn, N times each, so that a machine whose speed drifts slows both alike. Checks that the
SQL's best offers are winback's (segments/best-offer.csv: group, original transaction id, paid
months, months since last subscribed, offer), then prints the median wall times and their
ratio. Needs the duckdb Python package (pip install duckdb). Exits 1 when the answers differ.
Measure on a quiet machine: this is a benchmark, not a test.
"""

import argparse
import csv
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def as_of_ms(value):
    """The pipeline's asOf (a date or an ISO 8601 instant in UTC) in ms since the epoch."""
    if isinstance(value, dt.datetime):
        return int(value.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    if isinstance(value, dt.date):
        return int(dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
    text = str(value).replace("Z", "+00:00")
    if len(text) == 10:
        text += "T00:00:00+00:00"
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def sql_for(pipeline_path, out):
    with open(pipeline_path, encoding="utf-8") as fh:
        p = yaml.safe_load(fh)
    base = os.path.dirname(os.path.abspath(pipeline_path))

    def at(path):
        return path if os.path.isabs(path) else os.path.join(base, path)

    paths = p["transactions"]["paths"]
    renewals = p.get("renewalInfo") or []
    if p["transactions"].get("format", "appstore-ndjson") != "appstore-ndjson" or len(renewals) > 1:
        raise SystemExit("compare.py reads appstore-ndjson exports and at most one renewal-info path")
    settings = {
        "TRANSACTIONS": "', '".join(at(x) for x in paths),
        "RENEWALS": at(renewals[0]) if renewals else None,
        "OFFERS": at(p["offers"]),
        "AS_OF": str(as_of_ms(p["asOf"])),
        "GAP_DAYS": str(p.get("consecutiveGapDays", 60)),
        "OUT": out,
    }
    with open(os.path.join(HERE, "eligibility.sql"), encoding="utf-8") as fh:
        text = fh.read()
    if settings["RENEWALS"] is None:
        raise SystemExit("compare.py needs a renewalInfo path (the SQL reads one)")
    # A list of globs: read_json takes ['a', 'b'].
    text = text.replace("'${TRANSACTIONS}'", "['" + settings.pop("TRANSACTIONS") + "']")
    for key, value in settings.items():
        text = text.replace("${" + key + "}", value)
    return text


def run_duckdb(sql, threads):
    import duckdb

    started = time.perf_counter()
    con = duckdb.connect(":memory:", config={"threads": threads})
    con.execute(sql)
    con.close()
    return time.perf_counter() - started


def run_winback(binary, pipeline, output, threads):
    started = time.perf_counter()
    subprocess.run(
        [binary, "run", pipeline, "--threads", str(threads), "--output", output, "--quiet"],
        check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def best_offers(path, columns):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [tuple(r[c] for c in columns) for r in rows]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pipeline")
    ap.add_argument("--winback", default=os.path.join(HERE, "../../.build/release/winback"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv[1:])
    work = tempfile.mkdtemp(prefix="winback-duckdb.")
    try:
        out = os.path.join(work, "best-offer.csv")
        sql = sql_for(args.pipeline, out)
        times = {"winback": [], "duckdb": []}
        for i in range(args.runs):
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
            times["duckdb"].append(run_duckdb(sql, args.threads))
            times["winback"].append(run_winback(args.winback, args.pipeline, os.path.join(work, "out"), args.threads))
            print(f"round {i + 1}/{args.runs}: duckdb {times['duckdb'][-1]:.3f} s, "
                  f"winback {times['winback'][-1]:.3f} s", file=sys.stderr)
        with open(args.pipeline, encoding="utf-8") as fh:
            name = yaml.safe_load(fh)["name"]
        ours = os.path.join(work, "out", name, "latest", "segments", "best-offer.csv")
        columns = ["subscription_group_id", "original_transaction_id", "paid_months",
                   "months_since_last_subscribed", "offer_id"]
        a, b = best_offers(ours, columns), best_offers(out, columns)
        if a != b:
            diff = [(x, y) for x, y in zip(a, b) if x != y][:10]
            print(f"the answers differ: winback {len(a)} customers, duckdb {len(b)}; first differences:")
            for x, y in diff:
                print(f"  winback {x}\n  duckdb  {y}")
            return 1
        w, d = statistics.median(times["winback"]), statistics.median(times["duckdb"])
        print(f"same best offers for {len(a)} customers")
        print(f"duckdb  {d:.3f} s (median of {args.runs}, {args.threads} threads)")
        print(f"winback {w:.3f} s (median of {args.runs}, {args.threads} threads): {d / w:.2f} × faster")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
