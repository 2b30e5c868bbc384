#!/usr/bin/env python3
"""A small world for checking winback's campaign measurements against measure.py.

    make_world.py OUT_DIR --customers N --seed S

Writes OUT_DIR/transactions-0.jsonl.gz and transactions-1.jsonl.gz (decoded App Store
Server API NDJSON, docs/rules.md §2.1), OUT_DIR/offers.json (docs/rules.md §2.4) and OUT_DIR/pipeline.yaml
(docs/rules.md §2.5 and §9.1). It is deliberately shaped unlike `winback generate`: two groups with
their own product ids, irregular churn and come-back, returns exactly one whole month after
the previous end, purchases at the first and the last millisecond of a month, every offer
type (and an unknown one), free trials, refunds known late or not yet, upgrades, duplicated
transactions with different signedDate, rows after the as-of date, family sharing, sandbox
and non-subscription rows. The same seed gives the same bytes.
"""

import argparse
import datetime as _dt
import gzip
import io
import json
import os
import random
import uuid

DAY = 86_400_000
HOUR = 3_600_000
EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()


def ms(year, month, day, hour=0, minute=0, second=0, milli=0):
    return ((_dt.date(year, month, day).toordinal() - EPOCH_ORDINAL) * DAY
            + ((hour * 60 + minute) * 60 + second) * 1000 + milli)


def month_start_ms(t):
    d = _dt.date.fromordinal(t // DAY + EPOCH_ORDINAL)
    return ms(d.year, d.month, 1)


def next_month_start_ms(t):
    d = _dt.date.fromordinal(t // DAY + EPOCH_ORDINAL)
    return ms(d.year + (d.month == 12), d.month % 12 + 1, 1)


def add_months(t, k):
    """Same time of day, day of month clamped (as docs/rules.md §3 defines it)."""
    day_index, tod = divmod(t, DAY)
    d = _dt.date.fromordinal(day_index + EPOCH_ORDINAL)
    index = d.year * 12 + d.month - 1 + k
    y, m0 = divmod(index, 12)
    m = m0 + 1
    last = 31 if m == 12 else (_dt.date(y, m + 1, 1) - _dt.date(y, m, 1)).days
    return (_dt.date(y, m, min(d.day, last)).toordinal() - EPOCH_ORDINAL) * DAY + tod


AS_OF = ms(2026, 11, 22)
FIRST = ms(2023, 2, 1)
LAST = ms(2027, 4, 1)  # rows after the as-of exist in exports and must be ignored

GROUP_A = "7300000001"
GROUP_B = "7300000002"
PRODUCTS = {
    GROUP_A: {"monthly": "org.reference.reader.plus.monthly",
              "premium": "org.reference.reader.premium.monthly",
              "yearly": "org.reference.reader.plus.yearly"},
    GROUP_B: {"monthly": "org.reference.maps.pro.monthly",
              "premium": "org.reference.maps.pro.quarterly",
              "yearly": "org.reference.maps.pro.annual"},
}
MONTHS_OF = {"monthly": 1, "premium": 1, "yearly": 12}
GROUP_B_PREMIUM_MONTHS = 3  # the "premium" plan of group B is quarterly

OFFERS = [
    {"offerId": "wb.reader.comeback", "referenceName": "Reader: half price for 2 months",
     "subscriptionGroupId": GROUP_A, "productId": PRODUCTS[GROUP_A]["monthly"],
     "appleId": "6400000001", "duration": "ONE_MONTH", "offerMode": "PAY_AS_YOU_GO",
     "periodCount": 2,
     "customerEligibilityPaidSubscriptionDurationInMonths": 2,
     "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 12},
     "customerEligibilityWaitBetweenOffersInMonths": None,
     "startDate": "2024-01-01", "endDate": None, "priority": "NORMAL"},
    {"offerId": "wb.reader.vipfree", "referenceName": "Reader: a free month for loyal readers",
     "subscriptionGroupId": GROUP_A, "productId": PRODUCTS[GROUP_A]["monthly"],
     "duration": "ONE_MONTH", "offerMode": "FREE_TRIAL", "periodCount": 1,
     "customerEligibilityPaidSubscriptionDurationInMonths": 6,
     "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 2, "maximum": 24},
     "customerEligibilityWaitBetweenOffersInMonths": 6,
     "startDate": "2026-06-01", "priority": "HIGH",
     "territories": ["USA", "CAN"]},
    {"offerId": "wb.maps.annualback", "referenceName": "Maps: first year at a discount",
     "subscriptionGroupId": GROUP_B, "productId": PRODUCTS[GROUP_B]["yearly"],
     "appleId": "6400000003", "duration": "ONE_YEAR", "offerMode": "PAY_UP_FRONT",
     "periodCount": 1,
     "customerEligibilityPaidSubscriptionDurationInMonths": 12,
     "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 1, "maximum": 36},
     "customerEligibilityWaitBetweenOffersInMonths": 12,
     "startDate": "2024-03-01", "endDate": "2026-12-31",
     "territories": ["DEU", "FRA", "JPN", "USA"]},
    {"offerId": "wb.maps.monthlytrial", "referenceName": "Maps: two free weeks",
     "subscriptionGroupId": GROUP_B, "productId": PRODUCTS[GROUP_B]["monthly"],
     "duration": "TWO_WEEKS", "offerMode": "FREE_TRIAL", "periodCount": 1,
     "customerEligibilityPaidSubscriptionDurationInMonths": 1,
     "customerEligibilityTimeSinceLastSubscribedInMonths": {"minimum": 3, "maximum": 18},
     "customerEligibilityWaitBetweenOffersInMonths": 2,
     "priority": "HIGH"},
]

STOREFRONTS = ["USA"] * 30 + ["CAN"] * 12 + ["FRA"] * 14 + ["DEU"] * 14 + ["JPN"] * 12 + \
              ["GBR"] * 8 + [None] * 4 + ["BRA"] * 6


class World:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.next_tid = 310000000000000 + seed % 1000 * 10 ** 9
        self.rows = []  # (row dict, file index or None = random)
        self.last_group = self.last_otid = None

    def tid(self):
        self.next_tid += self.rng.randint(1, 9)
        return str(self.next_tid)

    # ------------------------------------------------------------------ one customer
    def customer(self, index):
        rng = self.rng
        group = GROUP_A if rng.random() < 0.6 else GROUP_B
        otid = str(120000000000000 + index * 7919)
        if index > 0 and rng.random() < 0.02:
            # the previous customer's originalTransactionId in the other group: a distinct
            # customer, since a customer is (group, originalTransactionId)
            group = GROUP_B if self.last_group == GROUP_A else GROUP_A
            otid = self.last_otid
        self.last_group, self.last_otid = group, otid
        storefront = rng.choice(STOREFRONTS)
        token = str(uuid.UUID(int=rng.getrandbits(128), version=4)) if rng.random() < 0.4 else None
        if token and rng.random() < 0.3:
            token = token.upper()
        ownership = "FAMILY_SHARED" if rng.random() < 0.02 else None
        c = {"group": group, "otid": otid, "storefront": storefront, "token": token,
             "ownership": ownership}

        t = rng.randint(FIRST, AS_OF + 60 * DAY)
        plan = "yearly" if rng.random() < 0.25 else "monthly"
        first = True
        stints = 0
        while t < LAST and stints < 8:
            stints += 1
            t = self.stint(c, t, plan, first)
            first = False
            if rng.random() < 0.12:
                break  # gone for good
            t = self.come_back_time(t)
            r = rng.random()
            plan = "yearly" if r < 0.2 else ("premium" if r < 0.3 else "monthly")

    def come_back_time(self, reach):
        """Irregular gaps; some exactly one whole month (or a millisecond less) after the
        reach, some snapped to the first or last millisecond of a month."""
        rng = self.rng
        r = rng.random()
        if r < 0.06:
            return add_months(reach, 1)
        if r < 0.10:
            return add_months(reach, 1) - 1
        if r < 0.25:
            t = reach + rng.randint(0, 59) * DAY + rng.randint(0, DAY - 1)
        elif r < 0.32:
            t = reach + 60 * DAY + rng.choice([0, 1, -1, DAY])
        else:
            t = reach + rng.randint(61, 700) * DAY + rng.randint(0, DAY - 1)
        s = rng.random()
        if s < 0.10:
            t = month_start_ms(t)
        elif s < 0.20:
            t = next_month_start_ms(t) - 1
        return t  # a snap to the month's start may overlap the previous stint: rule 3 cuts it

    def return_offer(self, c, plan, first):
        """(offerType, offerIdentifier, offerDiscountType, rows in the offer) for a stint's start."""
        rng = self.rng
        r = rng.random()
        if first:
            if r < 0.45:
                return 1, None, "FREE_TRIAL", 1
            if r < 0.50:
                return 3, "CODE.LAUNCH-23", "PAY_UP_FRONT", 1
            return None, None, None, 0
        if r < 0.40:
            # a win-back offer: mostly one of the group's catalog offers, sometimes a retired id
            ids = [o for o in OFFERS if o["subscriptionGroupId"] == c["group"]]
            pick = rng.random()
            if pick < 0.1:
                return 4, "wb.retired.summer24", "PAY_AS_YOU_GO", 1
            offer = rng.choice(ids)
            mode = offer["offerMode"]
            count = offer["periodCount"] if mode == "PAY_AS_YOU_GO" else 1
            if rng.random() < 0.15:
                mode = rng.choice(["FREE_TRIAL", "PAY_AS_YOU_GO"])
            return 4, offer["offerId"], mode, count
        if r < 0.50:
            return 2, "promo.loyalty:2025", rng.choice(["PAY_AS_YOU_GO", "FREE_TRIAL"]), rng.randint(1, 3)
        if r < 0.58:
            return 3, "code.spring26", rng.choice(["PAY_UP_FRONT", "FREE_TRIAL"]), 1
        if r < 0.62:
            return 1, None, "FREE_TRIAL", 1
        if r < 0.66:
            return 7, rng.choice(["partner.bundle", None]), None, 1
        return None, None, None, 0

    def stint(self, c, t, plan, first):
        """Rows from t until the customer stops renewing; returns the last expiresDate."""
        rng = self.rng
        offer_type, offer_id, discount, offer_rows = self.return_offer(c, plan, first)
        months = MONTHS_OF[plan]
        if c["group"] == GROUP_B and plan == "premium":
            months = GROUP_B_PREMIUM_MONTHS
        product = PRODUCTS[c["group"]][plan]
        n = rng.choice([1, 1, 2, 3, 4, 6, 8, 12, 15, 20, 30]) if months == 1 else rng.randint(1, 3)
        if months == 3:
            n = rng.randint(1, 5)
        storefront = c["storefront"]
        start = t
        i = 0
        last_end = t
        while i < n + offer_rows and start < LAST:
            in_offer = i < offer_rows
            if in_offer and discount == "FREE_TRIAL" and offer_type in (1, 2, 3, 4):
                length = rng.choice([7 * DAY, 14 * DAY]) if offer_type == 1 and rng.random() < 0.5 else None
                end = start + length if length else add_months(start, 1)
            else:
                end = add_months(start, months)
            row = self.row(c, product, start, end, storefront)
            if in_offer and offer_type is not None:
                row["offerType"] = offer_type
                if offer_id is not None:
                    row["offerIdentifier"] = offer_id
                if discount is not None:
                    row["offerDiscountType"] = discount
                    row["offerPeriod"] = "P1M"
            # refunds: soon after purchase, or months later (maybe after the as-of)
            if rng.random() < 0.04:
                late = rng.random() < 0.5
                rev = start + (rng.randint(40, 400) * DAY if late else rng.randint(1, 20) * HOUR)
                self.refunded(row, rev)
            # a mid-period upgrade to another plan of the group
            if rng.random() < 0.03 and end - start > 2 * DAY:
                up_at = rng.randint(start + HOUR, end - HOUR)
                row["isUpgraded"] = True
                if rng.random() < 0.6:
                    row["revocationDate"] = up_at
                    row["revocationReason"] = 0
                self.emit(row)
                plan = "yearly" if plan != "yearly" else "premium"
                months = MONTHS_OF[plan]
                if c["group"] == GROUP_B and plan == "premium":
                    months = GROUP_B_PREMIUM_MONTHS
                product = PRODUCTS[c["group"]][plan]
                start = up_at
                last_end = max(last_end, end)
                i += 1
                continue
            self.emit(row)
            last_end = max(last_end, end)
            # next renewal: usually at the end, sometimes minutes early, sometimes after a
            # billing-retry delay of a few days
            r = rng.random()
            if r < 0.85:
                start = end
            elif r < 0.92:
                start = end - rng.randint(1, 600) * 1000
            else:
                start = end + rng.randint(1, 20) * DAY
            if rng.random() < 0.01:
                storefront = rng.choice(["USA", "FRA", "JPN"])
            i += 1
        return last_end

    def row(self, c, product, start, end, storefront):
        r = {"transactionId": self.tid(), "originalTransactionId": c["otid"],
             "subscriptionGroupIdentifier": c["group"], "productId": product,
             "purchaseDate": start, "expiresDate": end,
             "signedDate": start + self.rng.randint(1, 5000)}
        if self.rng.random() < 0.9:
            r["type"] = "Auto-Renewable Subscription"
        if self.rng.random() < 0.8:
            r["environment"] = "Production"
        if c["ownership"]:
            r["inAppOwnershipType"] = c["ownership"]
        elif self.rng.random() < 0.7:
            r["inAppOwnershipType"] = "PURCHASED"
        if storefront:
            r["storefront"] = storefront
        if c["token"]:
            r["appAccountToken"] = c["token"]
        if self.rng.random() < 0.5:
            r["currency"] = self.rng.choice(["USD", "EUR", "JPY", "KRW"])
            r["price"] = self.rng.choice(PRICES[r["currency"]])
        if self.rng.random() < 0.03:
            del r["signedDate"]
        return r

    def refunded(self, row, rev):
        """The row as first sold and, signed later, with its revocation: both are exported."""
        original = dict(row)
        row["revocationDate"] = rev
        row["revocationReason"] = self.rng.choice([0, 1])
        kind = self.rng.random()
        if kind < 0.3:  # docs/rules.md §13.1: prorated at 0, 50, 100 % or any share
            row["revocationType"] = "REFUND_PRORATED"
            row["revocationPercentage"] = self.rng.choice([0, 50000, 100000, self.rng.randint(0, 100000)])
        elif kind < 0.4:
            row["revocationType"] = "FAMILY_REVOKE"
        elif kind < 0.6:
            row["revocationType"] = "REFUND_FULL"
        row["signedDate"] = rev + self.rng.randint(1, 100000)
        if rev < LAST:
            self.rows.append((original, None))
        else:  # not exported yet: only the version without the refund exists
            row.clear()
            row.update(original)

    def emit(self, row):
        rng = self.rng
        self.rows.append((row, None))
        r = rng.random()
        if r < 0.04 and "signedDate" in row:
            # an older version (signed earlier, here with no storefront) placed in either file
            older = dict(row)
            older["signedDate"] = row["signedDate"] - rng.randint(1, 10 ** 6)
            older.pop("storefront", None)
            self.rows.append((older, rng.choice([0, 1])))
        elif r < 0.06 and "signedDate" in row:
            # a tie on signedDate: the later file (then the later line) wins
            twin = dict(row)
            twin["storefront"] = "JPN" if row.get("storefront") != "JPN" else "DEU"
            self.rows[-1] = (row, 1)
            self.rows.append((twin, 0))
        elif r < 0.065:
            # an exact duplicate, signedDate missing on one copy
            twin = dict(row)
            twin.pop("signedDate", None)
            self.rows.append((twin, rng.choice([0, 1])))

    # ------------------------------------------------------------------ special rows
    def extras(self, n):
        rng = self.rng
        for i in range(max(3, n // 200)):
            otid = str(990000000000000 + i)
            t = rng.randint(FIRST, AS_OF)
            # sandbox rows of an otherwise unknown customer
            self.rows.append(({"transactionId": self.tid(), "originalTransactionId": otid,
                               "subscriptionGroupIdentifier": GROUP_A,
                               "productId": PRODUCTS[GROUP_A]["monthly"], "purchaseDate": t,
                               "expiresDate": add_months(t, 1), "environment": "Sandbox",
                               "signedDate": t + 5}, None))
            # a non-subscription purchase (no group, no dates): skipped, never rejected
            self.rows.append(({"transactionId": self.tid(), "originalTransactionId": otid,
                               "productId": "org.reference.reader.coins.100",
                               "type": "Consumable", "purchaseDate": t,
                               "nested": {"a": [1, 2, {"b": "é\u2603"}]}}, None))
        # a purchase exactly at the as-of instant: not known at T
        self.rows.append(({"transactionId": self.tid(), "originalTransactionId": "120000000000000",
                           "subscriptionGroupIdentifier": GROUP_A,
                           "productId": PRODUCTS[GROUP_A]["monthly"], "purchaseDate": AS_OF,
                           "expiresDate": add_months(AS_OF, 1), "signedDate": AS_OF + 1,
                           "storefront": "USA"}, None))


# Prices in milliunits per currency, the largest included (docs/rules.md §13.1).
PRICES = {"USD": [4990, 9990, 49990], "EUR": [4490, 8990, 999999], "JPY": [1200000, 600000],
          "KRW": [14900000, 7450000]}

# Units of USD per unit: undated, and a month's rate that wins over it; KRW has none (its rows
# are counted as unconverted).
RATES = """month,currency,rate
,EUR,1.0725
2026-05,EUR,1.0841
,JPY,0.006655
2026-07,JPY,0.00649
"""

MONEY = """money:
  currency: USD
  rates: rates.csv
  horizonMonths: 2
"""


def write_world(out_dir, n, seed, money=False):
    os.makedirs(out_dir, exist_ok=True)
    w = World(seed)
    for i in range(n):
        w.customer(i)
    w.extras(n)
    files = [[], []]
    for row, where in w.rows:
        files[w.rng.randint(0, 1) if where is None else where].append(row)
    for k, rows in enumerate(files):
        w.rng.shuffle(rows)
        buf = io.BytesIO()
        # a fixed mtime keeps the gzip bytes a function of the seed
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
            for j, row in enumerate(rows):
                items = list(row.items())
                w.rng.shuffle(items)  # field order is arbitrary
                line = json.dumps(dict(items), separators=(",", ":"), ensure_ascii=(j % 2 == 0))
                gz.write(line.encode("utf-8") + (b"\r\n" if j % 7 == 0 else b"\n"))
                if j % 50 == 0:
                    gz.write(b"\n")  # blank lines are skipped
        with open(os.path.join(out_dir, f"transactions-{k}.jsonl.gz"), "wb") as fh:
            fh.write(buf.getvalue())
    with open(os.path.join(out_dir, "offers.json"), "w", encoding="utf-8") as fh:
        json.dump({"offers": OFFERS}, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(out_dir, "pipeline.yaml"), "w", encoding="utf-8") as fh:
        fh.write(PIPELINE + (MONEY if money else ""))
    if money:
        with open(os.path.join(out_dir, "rates.csv"), "w", encoding="utf-8") as fh:
            fh.write(RATES)
    return len(w.rows)


PIPELINE = """\
# Made by Tests/Reference/make_world.py: a world for comparing winback with measure.py.
name: reference
transactions:
  format: appstore-ndjson
  paths: ["transactions-*.jsonl.gz"]
offers: offers.json
asOf: 2026-11-22
consecutiveGapDays: 60
output:
  directory: out
  formats: [csv]
reports:
  windowMonths: 12
experiment:
  name: ref-2026
  holdout: 20%
  start: 2026-03-01
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--customers", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--money", action="store_true", help="a money: block and its rates file")
    a = p.parse_args()
    rows = write_world(a.out_dir, a.customers, a.seed, a.money)
    print(f"make_world.py: {a.customers} customers, {rows} rows -> {a.out_dir}")


if __name__ == "__main__":
    main()
