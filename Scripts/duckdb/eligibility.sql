-- winback's eligibility (docs/rules.md §3) as a data team would write it in DuckDB SQL: every
-- customer's best win-back offer at the as-of instant, from the gzipped exports, the renewal
-- info and the offer catalog. Scripts/duckdb/compare.py fills in the four settings below,
-- runs it, checks its answer against winback's segments/best-offer.csv, and times both.
--
--   ${TRANSACTIONS}  a glob of the NDJSON exports      ${RENEWALS}  the renewal-info files
--   ${OFFERS}        the offer catalog                 ${AS_OF}     T, in ms since the epoch
--   ${GAP_DAYS}      consecutiveGapDays                 ${OUT}       where the CSV goes

-- addMonths(t, k): the same time of day k calendar months later, the day clamped to the
-- month's length (DuckDB's month arithmetic clamps); wholeMonths and calendarMonths from it.
CREATE MACRO add_months(t, k) AS epoch_ms(epoch_ms(t) + to_months(CAST(k AS INTEGER)));
CREATE MACRO month_index(t) AS year(epoch_ms(t)) * 12 + month(epoch_ms(t));
CREATE MACRO whole_months(a, b) AS CASE
    WHEN b < a THEN 0
    ELSE month_index(b) - month_index(a) - CASE WHEN add_months(a, month_index(b) - month_index(a)) > b THEN 1 ELSE 0 END
END;
CREATE MACRO calendar_months(a, b) AS whole_months(a, b)
    + (b - add_months(a, whole_months(a, b)))
    / (add_months(a, whole_months(a, b) + 1) - add_months(a, whole_months(a, b)))::DOUBLE;

-- §3 rule 1: one row per transactionId within a customer (the newest signedDate; then the later file), kept
-- when an auto-renewable subscription of Production that exists at T.
CREATE TEMP TABLE tx AS
SELECT *
FROM read_json('${TRANSACTIONS}', format = 'newline_delimited', filename = true, columns = {
        transactionId: 'VARCHAR', originalTransactionId: 'VARCHAR', productId: 'VARCHAR',
        subscriptionGroupIdentifier: 'VARCHAR', purchaseDate: 'BIGINT', expiresDate: 'BIGINT',
        signedDate: 'BIGINT', revocationDate: 'BIGINT', isUpgraded: 'BOOLEAN', type: 'VARCHAR',
        inAppOwnershipType: 'VARCHAR', environment: 'VARCHAR', storefront: 'VARCHAR',
        offerDiscountType: 'VARCHAR', offerType: 'INTEGER', offerIdentifier: 'VARCHAR'})
QUALIFY row_number() OVER (
    PARTITION BY subscriptionGroupIdentifier, originalTransactionId, transactionId ORDER BY signedDate DESC NULLS LAST, filename DESC) = 1;

CREATE TEMP TABLE known AS
SELECT subscriptionGroupIdentifier AS grp, originalTransactionId AS otid, transactionId AS tid,
    productId, storefront, purchaseDate AS start, expiresDate, offerType, offerIdentifier,
    revocationDate, offerDiscountType,
    revocationDate IS NOT NULL AND revocationDate < ${AS_OF} AND NOT coalesce(isUpgraded, false) AS revoked
FROM tx
WHERE type = 'Auto-Renewable Subscription' AND environment = 'Production'
    AND inAppOwnershipType = 'PURCHASED' AND purchaseDate < ${AS_OF};

-- §3 rule 3: periods, an overlap cut at the next period's start, empty ones dropped.
CREATE TEMP TABLE periods AS
WITH raw AS (
    SELECT grp, otid, tid, productId, storefront, start,
        CASE WHEN revoked THEN least(expiresDate, revocationDate) ELSE expiresDate END AS "end",
        NOT (coalesce(offerDiscountType, '') = 'FREE_TRIAL' OR revoked) AS paid
    FROM known
), kept AS (
    SELECT * FROM raw WHERE "end" > start
), cut AS (
    SELECT grp, otid, tid, productId, storefront, start, paid,
        least("end", coalesce(lead(start) OVER w, "end")) AS "end"
    FROM kept WINDOW w AS (PARTITION BY grp, otid ORDER BY start, tid)
)
SELECT * FROM cut WHERE "end" > start;

-- §3 rules 4-6: state, the most recent consecutive run and its paid months, the product.
CREATE TEMP TABLE runs AS
SELECT *, sum(CASE WHEN start - reach > ${GAP_DAYS} * 86400000::BIGINT THEN 1 ELSE 0 END) OVER w AS run
FROM (
    SELECT *, max("end") OVER (PARTITION BY grp, otid ORDER BY start, tid
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM periods
)
WINDOW w AS (PARTITION BY grp, otid ORDER BY start, tid);

CREATE TEMP TABLE renewal AS
SELECT originalTransactionId AS otid, arg_max(isInBillingRetryPeriod, signedDate) AS retrying,
    arg_max(gracePeriodExpiresDate, signedDate) AS grace, max(signedDate) AS signed
FROM read_json('${RENEWALS}', format = 'newline_delimited', columns = {
        originalTransactionId: 'VARCHAR', isInBillingRetryPeriod: 'BOOLEAN',
        gracePeriodExpiresDate: 'BIGINT', signedDate: 'BIGINT'})
WHERE signedDate <= ${AS_OF}
GROUP BY originalTransactionId;

CREATE TEMP TABLE customers AS
WITH c AS (
    SELECT grp, otid,
        bool_or(start <= ${AS_OF} AND ${AS_OF} < "end") AS active,
        max("end") AS last_end,
        max(run) AS last_run,
        arg_max(productId, (start, tid)) AS product,
        arg_max(storefront, (start, tid)) AS territory
    FROM runs GROUP BY grp, otid
)
SELECT c.*, whole_months(c.last_end, ${AS_OF}) AS months_since,
    floor(coalesce((SELECT sum(calendar_months(r.start, r."end")) FROM runs r
        WHERE r.grp = c.grp AND r.otid = c.otid AND r.run = c.last_run AND r.paid), 0) + 1e-6)::INTEGER AS paid_months,
    coalesce(n.grace > ${AS_OF}
        OR (n.retrying AND n.signed >= c.last_end AND ${AS_OF} < c.last_end + 60 * 86400000::BIGINT), false) AS billing_retry
FROM c LEFT JOIN renewal n ON n.otid = c.otid;

-- §3 rule 7: when each win-back offer last ended, per customer.
CREATE TEMP TABLE redeemed AS
SELECT grp, otid, offerIdentifier AS offer, max(expiresDate) AS ended
FROM known WHERE offerType = 4 AND offerIdentifier IS NOT NULL
GROUP BY ALL;

CREATE TEMP TABLE offers AS
SELECT o.offerId AS offer, o.subscriptionGroupId AS grp, o.productId AS product,
    o.customerEligibilityPaidSubscriptionDurationInMonths AS paid,
    o.customerEligibilityTimeSinceLastSubscribedInMonths.minimum AS since_min,
    o.customerEligibilityTimeSinceLastSubscribedInMonths.maximum AS since_max,
    o.customerEligibilityWaitBetweenOffersInMonths AS wait,
    CAST(o.startDate AS DATE) AS start_date, CAST(o.endDate AS DATE) AS end_date,
    coalesce(o.priority, 'NORMAL') = 'HIGH' AS high, coalesce(o.territories, []) AS territories, i AS position
FROM (SELECT unnest(offers) AS o, generate_subscripts(offers, 1) AS i
    FROM read_json('${OFFERS}', maximum_object_size = 67108864));

-- §3 rules 8-9: every eligible offer, ranked HIGH first and then in catalog order; rank 1 is
-- the customer's best offer.
COPY (
    SELECT c.grp AS subscription_group_id, c.otid AS original_transaction_id, c.paid_months,
        c.months_since AS months_since_last_subscribed, o.offer AS offer_id
    FROM customers c
    JOIN offers o ON o.grp = c.grp AND o.product = c.product
    LEFT JOIN redeemed r ON r.grp = c.grp AND r.otid = c.otid AND r.offer = o.offer
    WHERE NOT c.active AND NOT c.billing_retry
        AND (o.start_date IS NULL OR o.start_date <= epoch_ms(${AS_OF})::DATE)
        AND (o.end_date IS NULL OR epoch_ms(${AS_OF})::DATE <= o.end_date)
        AND (len(o.territories) = 0 OR list_contains(o.territories, c.territory))
        AND c.paid_months >= o.paid
        AND c.months_since BETWEEN o.since_min AND o.since_max
        AND (o.wait IS NULL OR r.ended IS NULL OR whole_months(r.ended, ${AS_OF}) >= o.wait)
    QUALIFY row_number() OVER (PARTITION BY c.grp, c.otid ORDER BY o.high DESC, o.position) = 1
    ORDER BY subscription_group_id, original_transaction_id
) TO '${OUT}' (HEADER, DELIMITER ',');
