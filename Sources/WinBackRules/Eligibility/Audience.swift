import WinBackModel
import WinBackSupport

/// One subscriber's reconstruction and the offers they are eligible for, in rank order.
public struct CustomerResult: Sendable {
    /// Index into ``CustomerRows``.
    public var customer: Int32
    /// Whether the renewal info known at T carries Apple's `eligibleWinBackOfferIds`
    /// (docs/rules.md §4.5). Beside `customer`, it takes no room of its own.
    public var appleAnswered = false
    /// In the holdout of the run's experiment (docs/rules.md §9.1), whether or not it applies
    /// yet; false without an experiment. Beside `customer`, it takes no room of its own.
    public var heldOut = false
    public var timeline: CustomerTimeline
    /// Catalog indices, rank 1 first.
    public var eligible: [Int16]
    /// Bit j: Apple's list at T names `eligible[j]`; bits from the 65th eligible offer on are in
    /// ``appleListedPast64`` (empty, so no allocation, for anyone eligible for fewer).
    var appleListed: UInt64 = 0
    var appleListedPast64: [UInt64] = []

    init(customer: Int32, timeline: CustomerTimeline, eligible: [Int16]) {
        self.customer = customer
        self.timeline = timeline
        self.eligible = eligible
    }

    /// Records which eligible offers Apple's list names (docs/rules.md §4.5).
    mutating func markApple(_ listed: [String], book: OfferBook) {
        appleAnswered = true
        for (j, i) in eligible.enumerated() where listed.contains(book.offers[Int(i)].offer.offerId) {
            if j < 64 {
                appleListed |= 1 << UInt64(j)
            } else {
                let w = (j - 64) / 64
                while appleListedPast64.count <= w { appleListedPast64.append(0) }
                appleListedPast64[w] |= 1 << UInt64((j - 64) % 64)
            }
        }
    }

    /// Apple's word on the customer's offer of rank `rank` (from 1): the `apple_eligible` column.
    @inline(__always)
    public func apple(rank: Int) -> AppleEligible {
        guard appleAnswered else { return .silent }
        let j = rank - 1
        let bit: Bool
        if j < 64 {
            bit = appleListed & (1 << UInt64(j)) != 0
        } else {
            let w = (j - 64) / 64
            bit = w < appleListedPast64.count && appleListedPast64[w] & (1 << UInt64((j - 64) % 64)) != 0
        }
        return bit ? .yes : .no
    }
}

/// Where one offer's group customers drop out (docs/rules.md §4.3 eligibility funnel).
public struct FunnelRow: Sendable, Equatable, Codable {
    public var live = false
    public var customersInGroup = 0
    public var active = 0
    public var billingRetry = 0
    public var churned = 0
    public var otherProduct = 0
    public var territory = 0
    public var paidDuration = 0
    public var tooRecent = 0
    public var tooLongAgo = 0
    public var waitBetweenOffers = 0
    public var eligible = 0

    /// The count of the customers criterion `c` keeps out: of a state column (active, billing
    /// retry) or of a drop column; a criterion the funnel has no column for (``Criterion/FunnelPlace/none``)
    /// counts nothing.
    public subscript(c: Criterion) -> Int {
        @inline(__always) get {
            switch c {
            case .active: active
            case .billingRetry: billingRetry
            case .otherProduct: otherProduct
            case .territory: territory
            case .paidDuration: paidDuration
            case .tooRecent: tooRecent
            case .tooLongAgo: tooLongAgo
            case .waitBetweenOffers: waitBetweenOffers
            case .notSubscriber, .offerNotLive: 0
            }
        }
        @inline(__always) set {
            switch c {
            case .active: active = newValue
            case .billingRetry: billingRetry = newValue
            case .otherProduct: otherProduct = newValue
            case .territory: territory = newValue
            case .paidDuration: paidDuration = newValue
            case .tooRecent: tooRecent = newValue
            case .tooLongAgo: tooLongAgo = newValue
            case .waitBetweenOffers: waitBetweenOffers = newValue
            case .notSubscriber, .offerNotLive: break
            }
        }
    }

    /// Rows over disjoint customers add count by count.
    package mutating func add(_ o: FunnelRow) {
        customersInGroup += o.customersInGroup
        churned += o.churned
        eligible += o.eligible
        for c in Criterion.allCases where c.funnel != .none { self[c] += o[c] }
    }
}

/// Customer counts by state at the as-of instant.
public struct CustomerStates: Sendable, Equatable, Codable {
    public var customers = 0
    public var active = 0
    public var billingRetry = 0
    public var churned = 0
    public var notSubscriber = 0

    package init(customers: Int = 0, active: Int = 0, billingRetry: Int = 0, churned: Int = 0, notSubscriber: Int = 0) {
        self.customers = customers
        self.active = active
        self.billingRetry = billingRetry
        self.churned = churned
        self.notSubscriber = notSubscriber
    }

    /// Every count: counts over disjoint customers add field by field.
    static var counts: [WritableKeyPath<CustomerStates, Int>] {
        [\.customers, \.active, \.billingRetry, \.churned, \.notSubscriber]
    }

    package mutating func add(_ o: CustomerStates) {
        for k in CustomerStates.counts { self[keyPath: k] += o[keyPath: k] }
    }
}

/// Every customer reconstructed and evaluated against every offer at one instant.
public struct Audience: Sendable {
    public var asOf: Int64
    /// Subscribers (customers with a period), in output order.
    public var results: [CustomerResult]
    public var counts: CustomerStates
    /// Per catalog offer.
    public var funnel: [FunnelRow]
    /// The run's experiment (docs/rules.md §9); nil = none.
    public var experiment: Experiment?
    /// Every customer's latest win-back purchase of each offer, known at T.
    public var winBacks = LatestWinBacks()

    /// Whether the audiences leave `r` out: the experiment applies at T and holds `r` out.
    @inline(__always)
    public func isLeftOut(_ r: CustomerResult) -> Bool {
        r.heldOut && experiment?.applies(at: asOf) == true
    }

    /// Evaluates all customers at `t`, spread over `threads` threads (customers are split into
    /// contiguous shards; each shard's results land in its own slot, so no locks are taken).
    public static func evaluate(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, asOf t: Int64, gapDays: Int64,
        experiment: Experiment? = nil, threads: Int
    ) -> Audience {
        evaluate(
            customers, book: book, renewals: renewals, asOf: t, gapDays: gapDays, experiment: experiment,
            threads: threads, piece: {}, visit: { _, _, _, _, _, _ in },
            ended: { _ in }
        ).audience
    }

    /// Evaluates all customers at `t`, and hands every subscriber, with their rows, to `visit`
    /// with the state of the piece of work they are in (made by `piece`), the renewal
    /// info known at T, their periods at T (docs/rules.md §3 rule 3, runs numbered) and their
    /// result: one pass over the customers for the evaluation and what counts them (the
    /// reports, ``Reports/evaluate(_:book:renewals:asOf:experiment:settings:threads:)``).
    /// `ended` takes each piece's state once its customers are all visited (a state that sums
    /// can then be handed to the next piece on the same thread); returns the states as `ended`
    /// left them, in customer order.
    ///
    /// With `releasingRows`, each piece's rows are handed back to the system once the piece is
    /// done (``TransactionRows/releasePages(of:)``), and the rows are gone when this returns
    /// (``TransactionRows/release()``): nothing after the evaluation may read them.
    package static func evaluate<Piece>(
        _ customers: CustomerRows, book: OfferBook, renewals: RenewalIndex?, asOf t: Int64, gapDays: Int64,
        experiment: Experiment?, threads: Int, releasingRows: Bool = false, piece: @escaping @Sendable () -> Piece,
        visit:
            @escaping @Sendable (
                inout Piece, _ customer: Int, _ rows: [Transaction], RenewalInfo?, _ periods: [Period], CustomerResult
            ) -> Void,
        ended: @escaping @Sendable (inout Piece) -> Void
    ) -> (audience: Audience, pieces: [Piece]) {
        let assignment = experiment?.assignment
        // Pieces small enough that the last one taken leaves the other threads idle only
        // briefly: with eight a thread, one thread ran alone for most of a piece at the end.
        let pieces = chunks(customers.count, pieces: max(1, threads) * 32)
        let slots = ResultSlots<(CustomerStates, [FunnelRow], Piece, LatestWinBacks)>(count: pieces.count)
        let day = MonthMath.dayNumber(t)
        let live = book.offers.map { $0.offer.isLive(onDay: day) }
        // Each piece's results in place in one array for all (subscribers are nearly every
        // customer), never copied from arrays of their own.
        let all = parallelFill(pieces: pieces, threads: threads) { (p, emit: (consuming CustomerResult) -> Void) in
            var periods: [Period] = []
            var rows: [Transaction] = []
            var key: [UInt8] = []
            var counts = CustomerStates()
            var funnel = [FunnelRow](repeating: FunnelRow(), count: book.offers.count)
            var state = piece()
            var winBacks = LatestWinBacks()
            let ahead = 2
            for k in pieces[p] {
                if k + ahead < pieces[p].upperBound {
                    renewals?.prefetch(originalTransactionId: customers.originalTransactionIds[k + ahead])
                }
                let group = customers.groups[k]
                let renewal = renewals?.known(at: t, originalTransactionId: customers.originalTransactionIds[k])
                customers.rows(of: k, into: &rows)
                winBacks.add(customer: k, rows: rows, asOf: t)
                guard
                    let tl = CustomerTimeline.build(
                        rows: rows, asOf: t, gapDays: gapDays, renewal: renewal, periods: &periods)
                else {
                    counts.notSubscriber += 1
                    continue
                }
                counts.customers += 1
                switch tl.state {
                case .active: counts.active += 1
                case .billingRetry: counts.billingRetry += 1
                case .churned: counts.churned += 1
                }
                var eligible: [Int16] = []
                book.evaluate(group: group, tl, asOf: t) { _, i, failed in
                    funnel[i].count(tl.state, failed)
                    if failed.isEmpty { eligible.append(Int16(i)) }
                }
                var result = CustomerResult(customer: Int32(k), timeline: tl, eligible: eligible)
                if let listed = renewal?.eligibleWinBackOfferIds { result.markApple(listed, book: book) }
                if let assignment {
                    result.heldOut = assignment.isHeldOut(customer: k, of: customers, scratch: &key)
                }
                visit(&state, k, rows, renewal, periods, result)
                emit(result)
            }
            ended(&state)
            if releasingRows, let first = pieces[p].first {
                customers.rows.releasePages(of: customers.starts[first]..<customers.starts[pieces[p].upperBound])
            }
            slots[p] = (counts, funnel, state, winBacks)
        }
        if releasingRows {
            customers.rows.release()
        }
        var counts = CustomerStates()
        var funnel = live.map { FunnelRow(live: $0) }
        var states: [Piece] = []
        var winBacks = LatestWinBacks()
        for (c, f, s, w) in slots.takeAll() {
            counts.add(c)
            for i in funnel.indices { funnel[i].add(f[i]) }
            states.append(s)
            winBacks.entries += w.entries
        }
        var audience = Audience(asOf: t, results: all, counts: counts, funnel: funnel, experiment: experiment)
        audience.winBacks = winBacks
        return (audience, states)
    }

    /// The segment rows `requirement` leaves out (docs/rules.md §4.5): per catalog offer, then
    /// of the best-offer list (judged on the rank-1 offer).
    public func droppedByApple(_ requirement: AppleRequirement, offers: Int) -> (perOffer: [Int], best: Int) {
        var perOffer = [Int](repeating: 0, count: offers)
        var best = 0
        guard requirement != .off else { return (perOffer, best) }
        for r in results {
            for (j, i) in r.eligible.enumerated() where !requirement.keeps(r.apple(rank: j + 1)) {
                perOffer[Int(i)] += 1
                if j == 0 { best += 1 }
            }
        }
        return (perOffer, best)
    }

    /// The segment rows the experiment leaves out (docs/rules.md §9.1) among those
    /// `requirement` keeps: per catalog offer, then of the best-offer list (the rows of
    /// holdout.csv). All zero unless the experiment applies at T.
    public func heldOut(_ requirement: AppleRequirement, offers: Int) -> (perOffer: [Int], best: Int) {
        var perOffer = [Int](repeating: 0, count: offers)
        var best = 0
        for r in results where isLeftOut(r) {
            for (j, i) in r.eligible.enumerated() where requirement.keeps(r.apple(rank: j + 1)) {
                perOffer[Int(i)] += 1
                if j == 0 { best += 1 }
            }
        }
        return (perOffer, best)
    }

    /// Customers eligible per catalog offer.
    public var eligibleCounts: [Int] { funnel.map(\.eligible) }

    /// One line for the run's log: customers by state, and how many are eligible for some offer.
    package var summaryLine: String {
        let s = counts
        let eligible = results.reduce(0) { $0 + ($1.eligible.isEmpty ? 0 : 1) }
        return "\(s.customers) customers: \(s.active) active, \(s.billingRetry) in billing retry, "
            + "\(s.churned) churned; \(eligible) eligible"
    }
}

extension FunnelRow {
    @inline(__always)
    mutating func count(_ state: SubscriptionState, _ failed: Reasons) {
        customersInGroup += 1
        switch state {
        case .active:
            active += 1
            return
        case .billingRetry:
            billingRetry += 1
            return
        case .churned: churned += 1
        }
        if failed.isEmpty {
            eligible += 1
            return
        }
        // Each drop criterion that failed, by its bit.
        var bits = failed.rawValue
        while bits != 0 {
            if let c = Criterion(rawValue: bits.trailingZeroBitCount), c.funnel == .drop { self[c] += 1 }
            bits &= bits - 1
        }
    }
}

/// Each customer's latest win-back purchase (offerType 4, docs/rules.md §3 rule 7) of each
/// offer, known at T, found while the evaluation has their rows at hand: what the exit reasons
/// ask of a customer's rows (§10.5, `redeemed`) once the rows are gone.
public struct LatestWinBacks: Sendable {
    struct Entry: Sendable, Equatable {
        var customer: Int32
        /// The row's offerIdentifier (a string id).
        var offer: Int32
        var purchase: Int64
    }

    /// By customer, ascending; a customer's offers in the order their rows first name them.
    var entries: [Entry] = []

    public init() {}

    /// Customer k's latest win-back purchaseDate of `offer` (a string id) known at T, or nil.
    public func latest(customer k: Int, offer: Int32) -> Int64? {
        var lo = 0
        var hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if Int(entries[mid].customer) < k { lo = mid + 1 } else { hi = mid }
        }
        while lo < entries.count && Int(entries[lo].customer) == k {
            if entries[lo].offer == offer { return entries[lo].purchase }
            lo += 1
        }
        return nil
    }

    /// Adds customer k (after every customer before it), whose rows are `rows`.
    @inline(__always)
    mutating func add(customer k: Int, rows: some Collection<Transaction>, asOf t: Int64) {
        let first = entries.count
        for r in rows where r.offerType == OfferType.winBack.rawValue && r.isKnownPurchase(at: t) {
            if let i = entries[first...].firstIndex(where: { $0.offer == r.offerIdentifier }) {
                entries[i].purchase = max(entries[i].purchase, r.purchaseDate)
            } else {
                entries.append(Entry(customer: Int32(k), offer: r.offerIdentifier, purchase: r.purchaseDate))
            }
        }
    }
}
