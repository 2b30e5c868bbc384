#!/usr/bin/env python3
"""Independent reference for winback's campaign measurements.

    measure.py PIPELINE.yaml OUT_DIR

Reads the pipeline file, the decoded App Store Server API NDJSON exports (gzip or not) and
the offer catalog, and writes

    OUT_DIR/winback-uplift.csv            docs/rules.md §9.2 (only when the pipeline has `experiment:`)
    OUT_DIR/retention-after-return.csv    docs/rules.md §9.3
    OUT_DIR/revenue-after-return.csv      docs/rules.md §13.2
    OUT_DIR/winback-revenue-uplift.csv    docs/rules.md §13.3 (only with `experiment:`)

The rules are implemented from the text of docs/rules.md §2.1, §2.4, §2.5, §3 (rules 1-9),
§4.3, §9 and §13. Python 3.11 standard library only.
Renewal info is not read: §9.2 evaluates eligibility "with no renewal info" and §9.3 only
looks at periods.
"""

import datetime as _dt
import glob
import gzip
import hashlib
import json
import math
import os
import re
import sys
from decimal import Decimal, ROUND_HALF_UP
from fractions import Fraction

DAY_MS = 86_400_000
EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()

# §3 rule 1 / §2.1: only rows of this type count ("absent = that").
AUTO_RENEWABLE = "Auto-Renewable Subscription"

# §9.3 leaves open whether a return whose horizon X is not yet observable (X >= T) may still
# count as retained. retention_km = retained / observable only makes sense when the retained
# returns are a subset of the observable ones, so this reference counts a return as retained
# at horizon k only when it is observable at k.
RETAINED_REQUIRES_OBSERVABLE = True


# ---------------------------------------------------------------------------------------
# Time: docs/rules.md §3 Notation (addMonths, wholeMonths, calendarMonths), all in UTC milliseconds.
# ---------------------------------------------------------------------------------------

def ms_of_date(year, month, day):
    """First instant (00:00:00.000 UTC) of a calendar day, in ms since the epoch."""
    return (_dt.date(year, month, day).toordinal() - EPOCH_ORDINAL) * DAY_MS


def date_of_ms(ms):
    """The UTC calendar date containing the instant ms."""
    return _dt.date.fromordinal(ms // DAY_MS + EPOCH_ORDINAL)


def days_in_month(year, month):
    if month == 12:
        return 31
    return (_dt.date(year, month + 1, 1) - _dt.date(year, month, 1)).days


def add_months(t, k):
    """addMonths(t, k): same time of day, day of month clamped to the target month's length."""
    day_index, time_of_day = divmod(t, DAY_MS)
    d = _dt.date.fromordinal(day_index + EPOCH_ORDINAL)
    index = d.year * 12 + (d.month - 1) + k
    year, month0 = divmod(index, 12)
    month = month0 + 1
    day = min(d.day, days_in_month(year, month))
    return (_dt.date(year, month, day).toordinal() - EPOCH_ORDINAL) * DAY_MS + time_of_day


def whole_months(a, b):
    """wholeMonths(a, b): the largest k >= 0 with addMonths(a, k) <= b; 0 when b < a."""
    if b < a:
        return 0
    da, db = date_of_ms(a), date_of_ms(b)
    k = (db.year - da.year) * 12 + (db.month - da.month) + 1  # an upper bound
    while k > 0 and add_months(a, k) > b:
        k -= 1
    return k


def calendar_months(a, b):
    """calendarMonths(a, b) for a <= b, as a double (Python float)."""
    k = whole_months(a, b)
    ak = add_months(a, k)
    ak1 = add_months(a, k + 1)
    return k + (b - ak) / (ak1 - ak)


def month_start(year, month):
    """T_M: the first instant of month (year, month); month may run past 12 or below 1."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return ms_of_date(year, month, 1)


# ---------------------------------------------------------------------------------------
# Rounding: §4.3 rates (4 places, half up, exact) and §9.2 lift (doubles, half away from 0).
# ---------------------------------------------------------------------------------------

def rate_cell(numerator, denominator):
    """§4.3: a rate with 4 decimals rounded half up, exact; empty when the denominator is 0."""
    if denominator == 0:
        return ""
    x = Fraction(numerator, denominator)
    scaled = x * 10000
    q = math.floor(scaled + Fraction(1, 2))  # rates are never negative: half up
    sign = "-" if q < 0 else ""
    q = abs(q)
    return f"{sign}{q // 10000}.{q % 10000:04d}"


FOUR_PLACES = Decimal("0.0001")


def decimal4(value):
    """§9.2: 4 decimals, rounded half away from zero (of the double's exact value), -0.0000 as 0.0000."""
    q = Decimal(value).quantize(FOUR_PLACES, rounding=ROUND_HALF_UP)
    if q == 0:
        return "0.0000"
    return format(q, "f")


def round_int_half_away(value):
    """§9.2 incremental_returns: to an integer, half away from zero, -0 as 0."""
    q = int(Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return str(q) if q != 0 else "0"


# ---------------------------------------------------------------------------------------
# Pipeline file: a tiny parser for the subset of YAML that §2.5 / §9.1 pipeline files use.
# ---------------------------------------------------------------------------------------

def _strip_comment(line):
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def _scalar(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("null", "~", ""):
        return None
    return text


def _flow_list(text):
    inner = text.strip()[1:-1]
    items, cur, quote = [], [], None
    for ch in inner:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch == ",":
            items.append(_scalar("".join(cur)))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        items.append(_scalar("".join(cur)))
    return items


def parse_yaml(text):
    """Nested mappings by indentation, flow lists [a, b], block lists (- a), scalars."""
    lines = []
    for raw in text.splitlines():
        line = _strip_comment(raw)
        if line.strip():
            lines.append((len(line) - len(line.lstrip(" ")), line.strip()))

    def parse_block(i, indent):
        if i < len(lines) and lines[i][1].startswith("- "):
            items = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                items.append(_scalar(lines[i][1][2:]))
                i += 1
            return items, i
        mapping = {}
        while i < len(lines) and lines[i][0] == indent:
            key, _, rest = lines[i][1].partition(":")
            key, rest = key.strip(), rest.strip()
            i += 1
            if rest == "":
                if i < len(lines) and lines[i][0] > indent:
                    value, i = parse_block(i, lines[i][0])
                elif i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                    value, i = parse_block(i, indent)
                else:
                    value = None
            elif rest.startswith("["):
                value = _flow_list(rest)
            else:
                value = _scalar(rest)
            mapping[key] = value
        return mapping, i

    result, _ = parse_block(0, lines[0][0] if lines else 0)
    return result


def parse_as_of(text):
    """asOf: a date (its 00:00 UTC) or a UTC timestamp YYYY-MM-DDTHH:MM:SS[.sss]Z."""
    text = str(text).strip()
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text)
    if m:
        return ms_of_date(int(m[1]), int(m[2]), int(m[3]))
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?Z?", text)
    if m:
        frac = int((m[7] or "0").ljust(3, "0"))
        return (ms_of_date(int(m[1]), int(m[2]), int(m[3]))
                + ((int(m[4]) * 60 + int(m[5])) * 60 + int(m[6])) * 1000 + frac)
    raise SystemExit(f"asOf not supported by the reference: {text!r}")


def parse_holdout_basis_points(text):
    """§9.1: "10%", "2.5%" or a fraction 0.1; returns round(holdout x 10 000)."""
    text = str(text).strip()
    if text.endswith("%"):
        fraction = Decimal(text[:-1]) / 100
    else:
        fraction = Decimal(text)
    return int((fraction * 10000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


# ---------------------------------------------------------------------------------------
# Transactions: §2.1 reading and validation, §3 rule 1 deduplication.
# ---------------------------------------------------------------------------------------

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
STOREFRONT_RE = re.compile(r"[A-Z]{3}")
UUID_RE = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class Row:
    __slots__ = ("transaction_id", "original_transaction_id", "group", "product_id",
                 "purchase", "expires", "environment", "ownership", "offer_type",
                 "offer_id", "discount_type", "revocation", "is_upgraded", "storefront",
                 "signed_date", "file_rank", "line_no", "price", "currency", "revocation_type",
                 "revocation_percentage")


class Rejected(Exception):
    pass


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX


def _opt_int(obj, key):
    v = obj.get(key)
    if v is None:
        return None
    if not _is_int(v):
        raise Rejected(f"{key} is not an integer")
    return v


def _opt_str(obj, key):
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise Rejected(f"{key} is not a string")
    return v


def _opt_id(obj, key):
    v = _opt_str(obj, key)
    if v is not None and not ID_RE.fullmatch(v):
        raise Rejected(f"{key} fails its pattern")
    return v


def parse_line(text):
    """One non-blank NDJSON line -> Row, None (a non-subscription row, skipped) or Rejected.

    Order as in §2.1: invalid JSON -> rejected; another type -> skipped; then required
    fields, types, identifier patterns and expiresDate >= purchaseDate."""
    try:
        obj = json.loads(text)  # a key given twice: the last wins
    except (ValueError, RecursionError):
        raise Rejected("invalid JSON")
    if not isinstance(obj, dict):
        raise Rejected("not an object")
    typ = obj.get("type")
    if typ is not None and typ != AUTO_RENEWABLE:
        return None
    r = Row()
    r.transaction_id = _opt_id(obj, "transactionId")
    r.original_transaction_id = _opt_id(obj, "originalTransactionId")
    r.group = _opt_id(obj, "subscriptionGroupIdentifier")
    r.product_id = _opt_id(obj, "productId")
    r.purchase = _opt_int(obj, "purchaseDate")
    r.expires = _opt_int(obj, "expiresDate")
    for name in ("transaction_id", "original_transaction_id", "group", "product_id",
                 "purchase", "expires"):
        if getattr(r, name) is None:
            raise Rejected(f"missing {name}")
    if r.expires < r.purchase:
        raise Rejected("expiresDate before purchaseDate")
    r.environment = _opt_str(obj, "environment") or "Production"
    r.ownership = _opt_str(obj, "inAppOwnershipType") or "PURCHASED"
    r.offer_type = _opt_int(obj, "offerType")
    r.offer_id = _opt_id(obj, "offerIdentifier")
    r.discount_type = _opt_str(obj, "offerDiscountType")
    r.revocation = _opt_int(obj, "revocationDate")
    _opt_int(obj, "revocationReason")
    up = obj.get("isUpgraded")
    if up is not None and not isinstance(up, bool):
        raise Rejected("isUpgraded is not a boolean")
    r.is_upgraded = up is True
    r.storefront = _opt_str(obj, "storefront")
    if r.storefront is not None and not STOREFRONT_RE.fullmatch(r.storefront):
        raise Rejected("storefront fails its pattern")
    token = _opt_str(obj, "appAccountToken")
    if token is not None and not UUID_RE.fullmatch(token):
        raise Rejected("appAccountToken is not a UUID")
    r.signed_date = _opt_int(obj, "signedDate")
    # §13.1: amounts. A price is a non-negative integer, a currency three capital letters, a
    # percentage 0-100000; revocationType any string.
    r.price = _opt_int(obj, "price")
    if r.price is not None and r.price < 0:
        raise Rejected("negative price")
    r.currency = _opt_str(obj, "currency")
    if r.currency is not None and not CURRENCY_RE.fullmatch(r.currency):
        raise Rejected("currency fails its pattern")
    r.revocation_type = _opt_str(obj, "revocationType")
    r.revocation_percentage = _opt_int(obj, "revocationPercentage")
    if r.revocation_percentage is not None and not 0 <= r.revocation_percentage <= 100000:
        raise Rejected("revocationPercentage out of range")
    return r


CURRENCY_RE = re.compile(r"[A-Z]{3}")


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")  # reads multi-member gzip too
    return open(path, "rb")


def read_transactions(paths, environment):
    """§3 rule 1: dedupe by transactionId within a customer (newest signedDate; missing =
    oldest; tie: later file in sorted path order, then later line); then keep the pipeline's
    environment."""
    newest = {}
    rejected = 0
    for file_rank, path in enumerate(paths):
        with open_text(path) as fh:
            for line_no, raw in enumerate(fh, start=1):
                text = raw.decode("utf-8", errors="replace").strip()
                if not text:
                    continue
                try:
                    row = parse_line(text)
                except Rejected:
                    rejected += 1
                    continue
                if row is None:
                    continue
                row.file_rank, row.line_no = file_rank, line_no
                key = (row.group, row.original_transaction_id, row.transaction_id)
                old = newest.get(key)
                if old is None or _version_key(row) >= _version_key(old):
                    newest[key] = row
    rows = [r for r in newest.values() if r.environment == environment]
    return rows, rejected


def _version_key(row):
    signed = -1 if row.signed_date is None else 0
    return (signed, row.signed_date if row.signed_date is not None else 0,
            row.file_rank, row.line_no)


# ---------------------------------------------------------------------------------------
# Offer catalog: §2.4 (only what eligibility needs).
# ---------------------------------------------------------------------------------------

class Offer:
    def __init__(self, index, obj):
        self.index = index
        self.offer_id = obj["offerId"]
        self.group = obj["subscriptionGroupId"]
        self.product_id = obj["productId"]
        self.paid_duration = obj["customerEligibilityPaidSubscriptionDurationInMonths"]
        since = obj["customerEligibilityTimeSinceLastSubscribedInMonths"]
        self.since_min, self.since_max = since["minimum"], since["maximum"]
        self.wait = obj.get("customerEligibilityWaitBetweenOffersInMonths")
        self.start_date = obj.get("startDate")  # absent = live since always
        self.end_date = obj.get("endDate")      # null = open
        self.high = (obj.get("priority") or "NORMAL") == "HIGH"
        self.territories = set(obj.get("territories") or [])

    def live_on(self, date_text):
        """§3 rule 8: startDate <= date(T) <= endDate (YYYY-MM-DD compares as text)."""
        if self.start_date is not None and date_text < self.start_date:
            return False
        if self.end_date is not None and date_text > self.end_date:
            return False
        return True


def read_offers(path):
    with open(path, "rb") as fh:
        catalog = json.load(fh)
    return [Offer(i, o) for i, o in enumerate(catalog["offers"])]


# ---------------------------------------------------------------------------------------
# A customer's timeline at T: §3 rules 3-7.
# ---------------------------------------------------------------------------------------

class Period:
    __slots__ = ("start", "end", "paid", "row")

    def __init__(self, start, end, paid, row):
        self.start, self.end, self.paid, self.row = start, end, paid, row


def tid_key(row):
    return row.transaction_id.encode("utf-8")  # ids compare bytewise


def rows_known_at(rows, T):
    """§3 rule 1: only rows with purchaseDate < T exist at T (rows come sorted by
    (purchaseDate, transactionId), so this is a prefix)."""
    out = []
    for r in rows:
        if r.purchase >= T:
            break
        out.append(r)
    return out


def periods_at(rows, T):
    """§3 rule 3 on the customer's PURCHASED rows (sorted by (purchaseDate, transactionId))."""
    periods = []
    for r in rows_known_at(rows, T):
        # rule 1: a revocationDate >= T is not yet known; revoked unless isUpgraded is true
        revoked = r.revocation is not None and r.revocation < T and not r.is_upgraded
        end = min(r.expires, r.revocation) if revoked else r.expires
        paid = not (r.discount_type == "FREE_TRIAL" or revoked)
        if end <= r.purchase:  # drop empty periods
            continue
        periods.append(Period(r.purchase, end, paid, r))
    # already in (purchaseDate, transactionId) order; cut overlaps (upgrades) ...
    for i in range(len(periods) - 1):
        nxt = periods[i + 1].start
        if periods[i].end > nxt:
            periods[i].end = nxt
    # ... and drop the periods that became empty
    return [p for p in periods if p.end > p.start]


class Timeline:
    """What §3 rules 4-7 derive at T (no renewal info: never billing_retry)."""
    __slots__ = ("active", "last_end", "months_since", "paid_months", "product_id",
                 "storefront", "winback_ends")


def timeline_at(rows, T, gap_days):
    periods = periods_at(rows, T)
    if not periods:
        return None  # rule 2: not a customer at T
    tl = Timeline()
    # rule 4
    tl.active = any(p.start <= T < p.end for p in periods)
    tl.last_end = max(p.end for p in periods)
    tl.months_since = whole_months(tl.last_end, T)
    # rule 5: the most recent consecutive run
    gap_ms = gap_days * DAY_MS
    last_run, reach = [], None
    for p in periods:
        if reach is not None and p.start - reach > gap_ms:
            last_run = []
        last_run.append(p)
        reach = p.end if reach is None else max(reach, p.end)
    total = 0.0
    for p in last_run:
        if p.paid:
            total += calendar_months(p.start, p.end)
    tl.paid_months = math.floor(total + 1e-6)
    # rule 6
    last = periods[-1].row
    tl.product_id, tl.storefront = last.product_id, last.storefront
    # rule 7: latest expiresDate of PURCHASED rows known at T with offerType 4, per offer id
    ends = {}
    for r in rows_known_at(rows, T):
        if r.offer_type == 4 and r.offer_id is not None:
            if r.offer_id not in ends or r.expires > ends[r.offer_id]:
                ends[r.offer_id] = r.expires
    tl.winback_ends = ends
    return tl


def eligible(tl, group, offer, T, date_text):
    """§3 rule 8 for one offer (no renewal info, so churned = not active)."""
    if tl.active:
        return False
    if offer.group != group or offer.product_id != tl.product_id:
        return False
    if not offer.live_on(date_text):
        return False
    if offer.territories and tl.storefront not in offer.territories:
        return False
    if tl.paid_months < offer.paid_duration:
        return False
    if not (offer.since_min <= tl.months_since <= offer.since_max):
        return False
    if offer.wait is not None and offer.offer_id in tl.winback_ends:
        if whole_months(tl.winback_ends[offer.offer_id], T) < offer.wait:
            return False
    return True


def best_offer(rows, group, offers, T, gap_days):
    """§3 rules 8-9: the customer's rank-1 offer at T, or None when eligible for none."""
    tl = timeline_at(rows, T, gap_days)
    if tl is None:
        return None
    date_text = date_of_ms(T).isoformat()
    ranked = [o for o in offers if eligible(tl, group, o, T, date_text)]
    if not ranked:
        return None
    ranked.sort(key=lambda o: (0 if o.high else 1, o.index))  # HIGH first, then catalog order
    return ranked[0]


def winback_redemption_starts(rows, T, gap_days):
    """§4.3 episodes over the customer's rows known at T; the purchaseDates of the first rows
    of the episodes with offerType 4 (win-back redemptions, any offer)."""
    gap_ms = gap_days * DAY_MS
    starts = []
    prev = None
    for r in rows_known_at(rows, T):
        new_episode = (prev is None
                       or (r.offer_type, r.offer_id) != (prev.offer_type, prev.offer_id)
                       or r.purchase - prev.expires > gap_ms)
        if new_episode and r.offer_type == 4:
            starts.append(r.purchase)
        prev = r
    return starts


# ---------------------------------------------------------------------------------------
# §9.1 assignment and §9.2 intervals.
# ---------------------------------------------------------------------------------------

def bucket(name, group, original_transaction_id):
    digest = hashlib.sha256(f"{name}\n{group}\n{original_transaction_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 10000


Z = 1.959963984540054


def wilson(x, n):
    a = n + Z * Z
    c = (x + Z * Z / 2) / a
    h = Z * math.sqrt(x * (n - x) / n + Z * Z / 4) / a
    return c - h, c + h


def lift_cells(n1, x1, n0, x0):
    """lift, lift_low, lift_high, incremental_returns (§9.2); all empty unless n1, n0 > 0."""
    if n1 == 0 or n0 == 0:
        return ["", "", "", ""]
    p1, p0 = x1 / n1, x0 / n0
    d = p1 - p0
    l1, u1 = wilson(x1, n1)
    l0, u0 = wilson(x0, n0)
    low = d - math.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p0 - l0) ** 2)
    return [decimal4(d), decimal4(low), decimal4(high), round_int_half_away(d * n1)]


# ---------------------------------------------------------------------------------------
# Reports.
# ---------------------------------------------------------------------------------------

def csv_cell(value):
    s = str(value)
    if any(ch in s for ch in ',"\r\n'):
        s = '"' + s.replace('"', '""') + '"'
    return s


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as fh:
        for record in [header] + rows:
            fh.write(",".join(csv_cell(v) for v in record) + "\n")


def window_months(T, window):
    """§4.3: the `window` calendar months preceding the month containing T, oldest first."""
    d = date_of_ms(T)
    out = []
    for back in range(window, 0, -1):
        index = d.year * 12 + (d.month - 1) - back
        out.append((index // 12, index % 12 + 1))
    return out


UPLIFT_HEADER = ["month", "offer_id", "treatment_customers", "treatment_returned",
                 "treatment_redeemed", "holdout_customers", "holdout_returned",
                 "holdout_redeemed", "treatment_return_rate", "holdout_return_rate", "lift",
                 "lift_low", "lift_high", "incremental_returns"]


def uplift_report(customers, offers, T, cfg):
    """§9.2 winback-uplift.csv."""
    start_ms = ms_of_date(*map(int, cfg["start"].split("-")))
    cohort = [(y, m) for (y, m) in window_months(T, cfg["window"])
              if month_start(y, m) >= start_ms]
    threshold = cfg["holdout_bp"]
    gap = cfg["gap_days"]
    # counts[(month, offer index)] = [n1, x1, r1, n0, x0, r0]
    counts = {}
    for (group, otid), rows in customers.items():
        held_out = bucket(cfg["name"], group, otid) < threshold
        redemptions = None  # computed on demand, at T
        for (y, m) in cohort:
            t_m, t_next = month_start(y, m), month_start(y, m + 1)
            offer = best_offer(rows, group, offers, t_m, gap)
            if offer is None:
                continue
            # returned: a PURCHASED row known at T purchased in M
            returned = any(t_m <= r.purchase < t_next and r.purchase < T for r in rows)
            if redemptions is None:
                redemptions = winback_redemption_starts(rows, T, gap)
            redeemed = any(t_m <= p < t_next for p in redemptions)
            c = counts.setdefault(((y, m), offer.index), [0, 0, 0, 0, 0, 0])
            base = 3 if held_out else 0
            c[base] += 1
            c[base + 1] += int(returned)
            c[base + 2] += int(redeemed)

    def line(month_label, offer_label, c):
        n1, x1, r1, n0, x0, r0 = c
        return ([month_label, offer_label, n1, x1, r1, n0, x0, r0,
                 rate_cell(x1, n1), rate_cell(x0, n0)] + lift_cells(n1, x1, n0, x0))

    def add(a, b):
        return [p + q for p, q in zip(a, b)]

    out = []
    per_offer_total = [[0] * 6 for _ in offers]
    for (y, m) in cohort:
        month_total = [0] * 6
        for o in offers:
            c = counts.get(((y, m), o.index), [0] * 6)
            out.append(line(f"{y:04d}-{m:02d}", o.offer_id, c))
            month_total = add(month_total, c)
            per_offer_total[o.index] = add(per_offer_total[o.index], c)
        out.append(line(f"{y:04d}-{m:02d}", "*", month_total))
    grand = [0] * 6
    for o in offers:
        out.append(line("*", o.offer_id, per_offer_total[o.index]))
        grand = add(grand, per_offer_total[o.index])
    out.append(line("*", "*", grand))
    return out


HORIZONS = (1, 3, 6, 12)
KIND_ORDER = {"win_back": 0, "promotional": 1, "offer_code": 2, "introductory": 3}


def return_kind(row):
    """§9.3: kind and offer_id of a return, from its period's row."""
    t = row.offer_type
    if t is None:
        return "none", ""
    kind = {4: "win_back", 2: "promotional", 3: "offer_code", 1: "introductory"}.get(t, f"unknown:{t}")
    if kind == "introductory":
        return kind, ""
    return kind, row.offer_id or ""


def kind_sort_key(key):
    kind, offer_id = key
    if kind in KIND_ORDER:
        group = (KIND_ORDER[kind], b"")
    elif kind == "none":
        group = (5, b"")
    else:
        group = (4, kind.encode("utf-8"))  # unknown:N, bytewise
    return group + (offer_id.encode("utf-8"),)


def returns_in_window(customers, T, retention_months):
    """Every return (§9.3: a period starting a whole month or more after the access so far
    ended) that starts in the last `retention_months` months: (rows, periods, period)."""
    d = date_of_ms(T)
    since = month_start(d.year, d.month - retention_months)
    for rows in customers.values():
        periods = periods_at(rows, T)
        reach = None
        for p in periods:
            is_return = reach is not None and whole_months(reach, p.start) >= 1
            reach = p.end if reach is None else max(reach, p.end)
            if is_return and p.start >= since:
                yield rows, periods, p


def retention_report(customers, T, retention_months):
    """§9.3 retention-after-return.csv."""
    tallies = {}  # (kind, offer_id) -> [returns, obs1, ret1, obs3, ret3, ...]
    for _, periods, p in returns_in_window(customers, T, retention_months):
        t = tallies.setdefault(return_kind(p.row), [0] * (1 + 2 * len(HORIZONS)))
        t[0] += 1
        for i, k in enumerate(HORIZONS):
            x = add_months(p.start, k)
            observable = x < T
            retained = any(q.start <= x < q.end for q in periods)
            if RETAINED_REQUIRES_OBSERVABLE:
                retained = retained and observable
            t[1 + 2 * i] += int(observable)
            t[2 + 2 * i] += int(retained)

    def line(kind, offer_id, t):
        cells = [kind, offer_id, t[0]]
        for i in range(len(HORIZONS)):
            obs, ret = t[1 + 2 * i], t[2 + 2 * i]
            cells += [obs, ret, rate_cell(ret, obs)]
        return cells

    out = []
    total = [0] * (1 + 2 * len(HORIZONS))
    for key in sorted(tallies, key=kind_sort_key):
        out.append(line(key[0], key[1], tallies[key]))
        total = [a + b for a, b in zip(total, tallies[key])]
    out.append(line("*", "", total))
    return out


def retention_header():
    cols = ["kind", "offer_id", "returns"]
    for k in HORIZONS:
        cols += [f"observable_{k}m", f"retained_{k}m", f"retention_{k}m"]
    return cols


# ---------------------------------------------------------------------------------------
# Money: §13.
# ---------------------------------------------------------------------------------------

class Money:
    """§13.1: one reporting currency through a rates file, or (rates None) amounts per currency."""

    def __init__(self, currency=None, rates_path=None, horizon=3):
        self.currency = currency
        self.horizon = horizon
        self.undated, self.monthly = {}, {}
        if rates_path is not None:
            with open(rates_path, encoding="utf-8", newline="") as fh:
                lines = [l.rstrip("\r\n") for l in fh]
            while lines and lines[-1] == "":
                lines.pop()
            dated = lines[0] == "month,currency,rate"
            for line in lines[1:]:
                cells = line.split(",")
                month = cells[0] if dated else ""
                code, rate = cells[-2], Fraction(Decimal(cells[-1]))
                if month:
                    self.monthly[(month, code)] = rate
                else:
                    self.undated[code] = rate

    @property
    def converts(self):
        return self.currency is not None

    def rate(self, row):
        if row.currency == self.currency:
            return Fraction(1)
        d = date_of_ms(row.purchase)
        month = f"{d.year:04d}-{d.month:02d}"
        if (month, row.currency) in self.monthly:
            return self.monthly[(month, row.currency)]
        return self.undated.get(row.currency)

    def amounts(self, row, T):
        """(gross, net) in milliunits, converted half to even; None without an amount or a rate."""
        if row.price is None or row.currency is None:
            return None
        net = row.price - refunded(row, T)
        if not self.converts:
            return row.price, net
        rate = self.rate(row)
        if rate is None:
            return None
        return round(row.price * rate), round(net * rate)  # round(Fraction): half to even


def refunded(row, T):
    """§13.1: what went back of a row revoked before T (not upgraded)."""
    if row.revocation is None or row.revocation >= T or row.is_upgraded:
        return 0
    if row.revocation_type == "FAMILY_REVOKE":
        return 0
    if row.revocation_type == "REFUND_PRORATED" and row.revocation_percentage is not None:
        return row.price * row.revocation_percentage // 100000
    return row.price


def units(milli):
    """Milliunits (an integer) in units with three decimals."""
    sign = "-" if milli < 0 else ""
    m = abs(milli)
    return f"{sign}{m // 1000}.{m % 1000:03d}"


def units_half_away(value):
    """A Fraction (or float) of milliunits in units, three decimals, half away from zero."""
    v = Fraction(value)
    q = math.floor(abs(v) + Fraction(1, 2))
    return units(-q if v < 0 and q > 0 else q)


def revenue_after_return(customers, T, retention_months, money):
    """§13.2 revenue-after-return.csv."""
    n = len(HORIZONS)
    tallies = {}  # (kind, offer_id, currency) -> [returns, obs.., gross.., net..]
    for rows, _, p in returns_in_window(customers, T, retention_months):
        if money.converts:
            currency = money.currency
        else:
            if p.row.price is None or p.row.currency is None:
                continue  # a return whose first row has no amount counts nowhere
            currency = p.row.currency
        kind, offer_id = return_kind(p.row)
        t = tallies.setdefault((kind, offer_id, currency), [0] * (1 + 3 * n))
        t[0] += 1
        for i, k in enumerate(HORIZONS):
            x = add_months(p.start, k)
            if not x < T:
                continue
            t[1 + i] += 1
            for r in rows:
                if not (r.purchase < T and p.start <= r.purchase < x):
                    continue
                if not money.converts and r.price is not None and r.currency is not None \
                        and r.currency != currency:
                    continue
                a = money.amounts(r, T)
                if a is None:
                    continue
                t[1 + n + i] += a[0]
                t[1 + 2 * n + i] += a[1]

    def line(kind, offer_id, currency, t):
        cells = [kind, offer_id, currency, t[0]]
        for i in range(n):
            obs, gross, net = t[1 + i], t[1 + n + i], t[1 + 2 * n + i]
            cells += [obs, units(gross), units(gross - net), units(net),
                      units_half_away(Fraction(net, obs)) if obs else ""]
        return cells

    def order(key):
        return kind_sort_key((key[0], key[1])) + (key[2].encode("utf-8"),)

    out = []
    totals = {}
    if money.converts:
        totals[money.currency] = [0] * (1 + 3 * n)
    for key in sorted(tallies, key=order):
        out.append(line(key[0], key[1], key[2], tallies[key]))
        tot = totals.setdefault(key[2], [0] * (1 + 3 * n))
        totals[key[2]] = [a + b for a, b in zip(tot, tallies[key])]
    for currency in sorted(totals, key=lambda c: c.encode("utf-8")):
        out.append(line("*", "", currency, totals[currency]))
    return out


def revenue_header():
    cols = ["kind", "offer_id", "currency", "returns"]
    for k in HORIZONS:
        cols += [f"observable_{k}m", f"gross_{k}m", f"refunded_{k}m", f"net_{k}m", f"net_per_return_{k}m"]
    return cols


REVENUE_UPLIFT_HEADER = ["month", "offer_id", "horizon_months", "currency", "treatment_customers",
                         "holdout_customers", "treatment_revenue_per_customer",
                         "holdout_revenue_per_customer", "revenue_lift", "revenue_lift_low",
                         "revenue_lift_high", "incremental_revenue"]


def report_currency(customers, T, money):
    """§13.3: the reporting currency, else the one currency of the priced PURCHASED rows known
    at T ("" when none); None when there are several."""
    if money.converts:
        return money.currency
    found = {r.currency for rows in customers.values() for r in rows
             if r.purchase < T and r.price is not None and r.currency is not None}
    if len(found) > 1:
        return None
    return next(iter(found), "")


def revenue_uplift(customers, offers, T, cfg, money):
    """§13.3 winback-revenue-uplift.csv: rows of [header] (None: header only)."""
    currency = report_currency(customers, T, money)
    if currency is None:
        return []
    start_ms = ms_of_date(*map(int, cfg["start"].split("-")))
    cohort = [(y, m) for (y, m) in window_months(T, cfg["window"])
              if month_start(y, m) >= start_ms]
    threshold = cfg["holdout_bp"]
    gap = cfg["gap_days"]
    H = money.horizon
    # arms[(month, offer, held_out)] = [n, counted, sum x, sum x^2]
    arms = {}
    for (group, otid), rows in customers.items():
        held_out = bucket(cfg["name"], group, otid) < threshold
        for (y, m) in cohort:
            t_m = month_start(y, m)
            offer = best_offer(rows, group, offers, t_m, gap)
            if offer is None:
                continue
            a = arms.setdefault(((y, m), offer.index, held_out), [0, 0, 0, 0])
            a[0] += 1
            end = add_months(t_m, H)
            if end <= T:
                x = 0
                for r in rows:
                    if r.purchase < T and t_m <= r.purchase < end:
                        amounts = money.amounts(r, T)
                        if amounts is not None:
                            x += amounts[1]
                a[1] += 1
                a[2] += x
                a[3] += x * x

    def add(a, b):
        return [p + q for p, q in zip(a, b)]

    def line(month_label, offer_label, t, h, star):
        # t, h: [n, counted, sum, squares] of treatment and holdout
        n1, n0 = (t[1], h[1]) if star else (t[0], h[0])
        counted = star or (t[1] == t[0] and h[1] == h[0])
        cells = [month_label, offer_label, H, currency, n1, n0]
        if not counted:
            return cells + [""] * 6
        m1 = Fraction(t[2], t[1]) if t[1] else None
        m0 = Fraction(h[2], h[1]) if h[1] else None
        cells += [units_half_away(m1) if m1 is not None else "",
                  units_half_away(m0) if m0 is not None else ""]
        if m1 is None or m0 is None:
            return cells + [""] * 4
        lift = m1 - m0
        cells.append(units_half_away(lift))
        if t[1] >= 2 and h[1] >= 2:
            v1 = (Fraction(t[3]) - Fraction(t[2]) ** 2 / t[1]) / (t[1] - 1)
            v0 = (Fraction(h[3]) - Fraction(h[2]) ** 2 / h[1]) / (h[1] - 1)
            half = Z * math.sqrt(float(v1 / t[1] + v0 / h[1]))
            cells += [units_half_away(float(lift) - half), units_half_away(float(lift) + half)]
        else:
            cells += ["", ""]
        cells.append(units_half_away(lift * t[1]))
        return cells

    zero = [0, 0, 0, 0]
    out = []
    per_offer = [([0] * 4, [0] * 4) for _ in offers]
    for (y, m) in cohort:
        label = f"{y:04d}-{m:02d}"
        mt, mh = [0] * 4, [0] * 4
        passed = add_months(month_start(y, m), H) <= T
        for o in offers:
            t = arms.get(((y, m), o.index, False), zero)
            h = arms.get(((y, m), o.index, True), zero)
            out.append(line(label, o.offer_id, t, h, False))
            mt, mh = add(mt, t), add(mh, h)
            if passed:
                pt, ph = per_offer[o.index]
                per_offer[o.index] = (add(pt, t), add(ph, h))
        out.append(line(label, "*", mt, mh, False))
    gt, gh = [0] * 4, [0] * 4
    for o in offers:
        pt, ph = per_offer[o.index]
        out.append(line("*", o.offer_id, pt, ph, True))
        gt, gh = add(gt, pt), add(gh, ph)
    out.append(line("*", "*", gt, gh, True))
    return out


# ---------------------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------------------

def resolve_paths(base, patterns):
    """§2.5: globs relative to the pipeline's folder; a file matched twice is read once;
    sorted path order = absolute normalised paths compared bytewise."""
    found = set()
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
        for p in glob.glob(full):
            found.add(os.path.normpath(os.path.abspath(p)))
    return sorted(found, key=lambda p: p.encode("utf-8"))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    pipeline_path, out_dir = argv[1], argv[2]
    with open(pipeline_path, encoding="utf-8") as fh:
        cfg = parse_yaml(fh.read())
    base = os.path.dirname(os.path.abspath(pipeline_path))

    tx = cfg["transactions"]
    paths = tx.get("paths") if isinstance(tx, dict) else tx
    if isinstance(paths, str):
        paths = [paths]
    files = resolve_paths(base, paths)
    offers_path = cfg["offers"]
    if not os.path.isabs(offers_path):
        offers_path = os.path.join(base, offers_path)
    T = parse_as_of(cfg.get("asOf") or "today")
    gap_days = int(cfg.get("consecutiveGapDays") or 60)
    reports = cfg.get("reports") or {}
    window = int(reports.get("windowMonths") or 12)
    retention_months = int(reports.get("retentionMonths") or 24)
    environment = cfg.get("environment") or "Production"

    offers = read_offers(offers_path)
    rows, rejected = read_transactions(files, environment)

    # §3 rule 2: customers are (group, originalTransactionId); family-shared rows ignored.
    customers = {}
    for r in rows:
        if r.ownership != "PURCHASED":
            continue
        customers.setdefault((r.group, r.original_transaction_id), []).append(r)
    for cust_rows in customers.values():
        cust_rows.sort(key=lambda r: (r.purchase, tid_key(r)))  # §3 rule 3, §4.3 order

    os.makedirs(out_dir, exist_ok=True)
    experiment = cfg.get("experiment")
    if isinstance(experiment, dict):
        ecfg = {"name": str(experiment["name"]),
                "holdout_bp": parse_holdout_basis_points(experiment["holdout"]),
                "start": str(experiment["start"]), "window": window, "gap_days": gap_days}
        write_csv(os.path.join(out_dir, "winback-uplift.csv"), UPLIFT_HEADER,
                  uplift_report(customers, offers, T, ecfg))
    write_csv(os.path.join(out_dir, "retention-after-return.csv"), retention_header(),
              retention_report(customers, T, retention_months))
    mcfg = cfg.get("money")
    if isinstance(mcfg, dict):
        rates_path = mcfg["rates"]
        if not os.path.isabs(rates_path):
            rates_path = os.path.join(base, rates_path)
        money = Money(str(mcfg["currency"]), rates_path, int(mcfg.get("horizonMonths") or 3))
    else:
        money = Money()
    write_csv(os.path.join(out_dir, "revenue-after-return.csv"), revenue_header(),
              revenue_after_return(customers, T, retention_months, money))
    if isinstance(experiment, dict):
        write_csv(os.path.join(out_dir, "winback-revenue-uplift.csv"), REVENUE_UPLIFT_HEADER,
                  revenue_uplift(customers, offers, T, ecfg, money))
    print(f"measure.py: {len(files)} files, {len(rows)} rows kept, {rejected} rejected, "
          f"{len(customers)} customer keys -> {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
