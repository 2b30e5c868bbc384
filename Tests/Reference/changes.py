#!/usr/bin/env python3
"""An independent computation of a run's segment changes (docs/rules.md §10.5).

    changes.py PIPELINE BASELINE_FOLDER TONIGHT_AS_OF OUT_DIR

BASELINE_FOLDER is the published run compared with (its segments/*.csv and manifest.json);
tonight's segments are computed here, from the pipeline's inputs with the §3 rules of
measure.py (no renewal info, no requireApple) and the experiment's holdout (§9.1): each offer's
segment, best-offer and holdout. Writes OUT_DIR/<S>.csv for every segment S: entered and changed
rows in tonight's order, then exited rows in the baseline's order with their reason, the first
that applies of returned, redeemed, held_out, unknown_customer, then the first failing
criterion of §3 rule 10 for the baseline row's offer. Standard library only.
"""

import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402  (the §3 rules, written from docs/rules.md)

HEADER = ["change", "subscription_group_id", "original_transaction_id", "offer_id", "previous_offer_id", "reason"]


def order_key(group, original):
    """§4.1: bytewise by (subscription_group_id, original_transaction_id)."""
    return (group.encode("utf-8"), original.encode("utf-8"))


def failures(tl, group, offer, T, date_text):
    """Every criterion of §3 rule 8 that fails, labelled and in the order of rule 10."""
    out = []
    if tl.active:
        out.append("active")
    if offer.group != group or offer.product_id != tl.product_id:
        out.append("other_product")
    if not offer.live_on(date_text):
        out.append("offer_not_live")
    if offer.territories and tl.storefront not in offer.territories:
        out.append("territory")
    if tl.paid_months < offer.paid_duration:
        out.append("paid_duration")
    if tl.months_since < offer.since_min:
        out.append("too_recent")
    if tl.months_since > offer.since_max:
        out.append("too_long_ago")
    if offer.wait is not None and offer.offer_id in tl.winback_ends:
        if measure.whole_months(tl.winback_ends[offer.offer_id], T) < offer.wait:
            out.append("wait_between_offers")
    return out


def read_segment(path):
    """The rows of a published segment CSV: [(group, original, offer_id)] in file order."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    g, o, f = head.index("subscription_group_id"), head.index("original_transaction_id"), head.index("offer_id")
    return [(r[g], r[o], r[f]) for r in rows[1:]]


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 64
    pipeline_path, baseline, tonight_text, out_dir = argv[1:]
    with open(pipeline_path, encoding="utf-8") as fh:
        cfg = measure.parse_yaml(fh.read())
    base = os.path.dirname(os.path.abspath(pipeline_path))
    tx = cfg["transactions"]
    paths = tx.get("paths") if isinstance(tx, dict) else tx
    files = measure.resolve_paths(base, [paths] if isinstance(paths, str) else paths)
    offers_path = cfg["offers"]
    if not os.path.isabs(offers_path):
        offers_path = os.path.join(base, offers_path)
    offers = measure.read_offers(offers_path)
    T = measure.parse_as_of(tonight_text)
    date_text = measure.date_of_ms(T).isoformat()
    gap_days = int(cfg.get("consecutiveGapDays") or 60)
    with open(os.path.join(baseline, "manifest.json"), encoding="utf-8") as fh:
        baseline_as_of = measure.parse_as_of(json.load(fh)["asOf"])

    rows, _ = measure.read_transactions(files, cfg.get("environment") or "Production")
    present = set()
    customers = {}
    for r in rows:
        present.add((r.group, r.original_transaction_id))
        if r.ownership == "PURCHASED":
            customers.setdefault((r.group, r.original_transaction_id), []).append(r)
    for cust_rows in customers.values():
        cust_rows.sort(key=lambda r: (r.purchase, measure.tid_key(r)))

    experiment = cfg.get("experiment")
    applies = False
    if isinstance(experiment, dict):
        exp_name = str(experiment["name"])
        bp = measure.parse_holdout_basis_points(experiment["holdout"])
        applies = T >= measure.parse_as_of(str(experiment["start"]))

    def held_out(key):
        return applies and measure.bucket(exp_name, key[0], key[1]) < bp

    # Tonight's evaluation: each customer's timeline and eligible offers, ranked (§3 rules 8-9).
    timelines, ranked = {}, {}
    for key, cust_rows in customers.items():
        tl = measure.timeline_at(cust_rows, T, gap_days)
        if tl is None:
            continue
        timelines[key] = tl
        ok = [o for o in offers if not failures(tl, key[0], o, T, date_text)]
        ok.sort(key=lambda o: (0 if o.high else 1, o.index))
        ranked[key] = ok

    ordered = sorted(ranked, key=lambda k: order_key(*k))
    segments = {}
    seen = set()
    for o in offers:
        if o.offer_id in seen:
            continue
        seen.add(o.offer_id)
        segments[o.offer_id] = ("offer", [(k, o.offer_id) for k in ordered
                                          if not held_out(k) and any(x.offer_id == o.offer_id for x in ranked[k])])
    segments["best-offer"] = ("best", [(k, ranked[k][0].offer_id) for k in ordered if ranked[k] and not held_out(k)])
    if isinstance(experiment, dict):
        segments["holdout"] = ("holdout", [(k, ranked[k][0].offer_id) for k in ordered if ranked[k] and held_out(k)])

    def reason(kind, key, offer_id):
        tl = timelines.get(key)
        if tl is not None and tl.active:  # no renewal info: never in billing retry
            return "returned"
        for r in customers.get(key, []):
            if (r.offer_type == 4 and r.offer_id == offer_id and baseline_as_of <= r.purchase < T):
                return "redeemed"
        if tl is not None and kind != "holdout" and held_out(key):
            return "held_out"
        if key not in present:
            return "unknown_customer"
        offer = next((o for o in offers if o.offer_id == offer_id), None)
        if offer is None:
            return "offer_not_in_catalog"
        if tl is None:
            return "not_subscriber"
        failed = failures(tl, key[0], offer, T, date_text)
        if failed:
            return failed[0]
        return "not_held_out" if kind == "holdout" else "dropped_by_require_apple"

    os.makedirs(out_dir, exist_ok=True)
    for name, (kind, tonight) in segments.items():
        before = read_segment(os.path.join(baseline, "segments", name + ".csv"))
        before_offer = {(g, o): f for g, o, f in before}
        tonight_offer = dict(tonight)
        entered = [["entered", k[0], k[1], f, "", ""] for k, f in tonight if k not in before_offer]
        changed = [["changed", k[0], k[1], f, before_offer[k], ""] for k, f in tonight
                   if kind != "offer" and k in before_offer and before_offer[k] != f]
        exited = [["exited", g, o, "", f, reason(kind, (g, o), f)] for g, o, f in before
                  if (g, o) not in tonight_offer]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(entered + changed + exited)
        with open(os.path.join(out_dir, name + ".csv"), "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())
    print(f"changes.py: {len(segments)} segments -> {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
