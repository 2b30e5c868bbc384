import CWinBackShims

/// A row as a run keeps it between reading and the evaluation: 56 bytes, what tells one row
/// from another (its instants and ids) in the row, and the columns that many rows share
/// (``RowTerms``: group, product, offer, storefront, price, flags…) and the appAccountToken
/// (one a customer) once each in a ``RowColumns`` table, the row holding their indexes.
///
/// Deduplication, grouping and sorting a customer's rows read only this row; the evaluation
/// and the reports read a customer's rows as ``Transaction``s, made again from the row and
/// its columns (``RowColumns/transaction(_:)``) while the customer is counted.
public struct CompactRow: Sendable, Equatable {
    public var purchaseDate: Int64
    public var expiresDate: Int64
    public var revocationDate: Int64
    public var signedDate: Int64
    public var transactionId: TransactionKey
    public var originalTransactionId: TransactionKey
    /// The row's terms: an index into its table's ``RowColumns/terms``.
    public var terms: Int32
    /// The row's appAccountToken: an index into its table's ``RowColumns/tokens``; -1 without one.
    public var token: Int32

    @inline(__always)
    package init(
        purchaseDate: Int64, expiresDate: Int64, revocationDate: Int64, signedDate: Int64,
        transactionId: TransactionKey, originalTransactionId: TransactionKey, terms: Int32, token: Int32
    ) {
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.signedDate = signedDate
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.terms = terms
        self.token = token
    }

    /// Rewrites its string ids through `strings` (its terms and token are already the run's).
    @inline(__always)
    package mutating func remap(strings: Span<Int32>) {
        transactionId.remap(strings)
        originalTransactionId.remap(strings)
    }
}

/// The columns of a row that many rows share, kept once in a ``RowColumns`` table: 40 bytes a
/// distinct combination instead of 44 a row.
public struct RowTerms: ColumnValue, Hashable {
    public var subscriptionGroupId: Int32
    public var productId: Int32
    public var offerIdentifier: Int32
    public var offerDiscountType: Int32
    public var storefront: Int32
    public var currency: Int32
    @usableFromInline var offerTypeValue: Int32
    /// ``Transaction/packed`` but the token's kind: revocationPercentage and revocationType,
    /// ownership and the flags.
    @usableFromInline var packed: UInt32
    public var price: Int64

    @usableFromInline
    init(
        subscriptionGroupId: Int32, productId: Int32, offerIdentifier: Int32, offerDiscountType: Int32,
        storefront: Int32, currency: Int32, offerTypeValue: Int32, packed: UInt32, price: Int64
    ) {
        self.subscriptionGroupId = subscriptionGroupId
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.storefront = storefront
        self.currency = currency
        self.offerTypeValue = offerTypeValue
        self.packed = packed
        self.price = price
    }

    /// Where ``Transaction/packed`` keeps what the terms keep (all but the token's kind).
    @inlinable static var mask: UInt32 { 1 << Transaction.tokenKindShift - 1 }

    /// `environment == Production` (or absent).
    @inlinable
    public var production: Bool {
        packed >> Transaction.flagsShift & UInt32(Transaction.productionFlag) != 0
    }

    @inlinable
    public var ownership: Ownership {
        Ownership(rawValue: UInt8(packed >> Transaction.ownershipShift & 3))!
    }

    /// The terms' fields folded into one word, for ``ColumnTable``.
    @inline(__always)
    public var columnHash: UInt64 {
        var h = UInt64(UInt32(bitPattern: subscriptionGroupId)) | UInt64(UInt32(bitPattern: productId)) << 32
        @inline(__always) func mix(_ v: UInt64) { h = (h ^ v) &* 0x9E37_79B9_7F4A_7C15 }
        mix(UInt64(UInt32(bitPattern: offerIdentifier)) | UInt64(UInt32(bitPattern: offerDiscountType)) << 32)
        mix(UInt64(UInt32(bitPattern: storefront)) | UInt64(UInt32(bitPattern: currency)) << 32)
        mix(UInt64(UInt32(bitPattern: offerTypeValue)) | UInt64(packed) << 32)
        mix(UInt64(bitPattern: price))
        return h
    }

    /// Rewrites its string ids through `map`.
    @inline(__always)
    package mutating func remap(_ map: Span<Int32>) {
        subscriptionGroupId = map[Int(subscriptionGroupId)]
        productId = map[Int(productId)]
        if offerIdentifier >= 0 { offerIdentifier = map[Int(offerIdentifier)] }
        if offerDiscountType >= 0 { offerDiscountType = map[Int(offerDiscountType)] }
        if storefront >= 0 { storefront = map[Int(storefront)] }
        if currency >= 0 { currency = map[Int(currency)] }
        if offerTypeValue < 0 { offerTypeValue = -(map[Int(-offerTypeValue - 1)] + 1) }
    }
}

/// A value a ``ColumnTable`` keeps: equal values have equal ``columnHash``es.
public protocol ColumnValue: Equatable, Sendable {
    /// The value folded into a word whose high bits spread (no seeded hashing).
    var columnHash: UInt64 { get }
}

extension AppAccountToken: ColumnValue {
    @inline(__always)
    public var columnHash: UInt64 {
        (high ^ (low ^ UInt64(kind.rawValue)) &* 0x9E37_79B9_7F4A_7C15) &* 0xBF58_476D_1CE4_E5B9
    }
}

/// Distinct values, each numbered in order of first appearance, found again by an open-addressing
/// index of their numbers, each slot holding 32 bits of its value's hash beside the number: a
/// probe passing another value's slot reads that value only when the bits agree (most of a file's
/// tokens are new to it, and each slot passed had cost a read of a token elsewhere in memory).
public struct ColumnTable<Value: ColumnValue>: Sendable {
    public private(set) var values: [Value] = []
    /// The low 32 bits of a value's hash, then its number; all ones: empty. Half used at most.
    /// None until the first value (a run reads thousands of files of a few rows each, each with
    /// tables of its own).
    private var slots: [UInt64] = []
    /// Whether ``freeze()`` was called.
    private var frozen = false
    /// Whether values were listed without an index (``list(_:)``): none is interned then.
    private var listed = false

    private static var empty: UInt64 { UInt64.max }

    package init() {}

    /// A frozen table of `values` (a part file section's, all distinct): read only.
    init(frozen values: [Value]) {
        self.values = values
        frozen = true
    }

    @inline(__always)
    private static func home(_ h: UInt64, _ n: Int) -> Int { Int(truncatingIfNeeded: h >> 24) & (n - 1) }

    /// A slot's hash bits, in its high half.
    @inline(__always)
    private static func tag(_ h: UInt64) -> UInt64 { h << 32 }

    /// Whether slot `s` holds a value whose hash bits are those of hash `h` (an empty slot's are
    /// all ones: ask ``empty`` first).
    @inline(__always)
    private static func agrees(_ s: UInt64, _ h: UInt64) -> Bool { s & 0xFFFF_FFFF_0000_0000 == tag(h) }

    public var count: Int { values.count }

    @inlinable @inline(__always)
    public subscript(i: Int32) -> Value { values[Int(i)] }

    /// A hint to fetch the slot `v` is looked for in first, before it is interned: a table
    /// larger than the caches then waits on memory once for a batch of values known ahead.
    @inline(__always)
    func prefetch(_ v: Value) {
        guard !slots.isEmpty else { return }
        let i = ColumnTable.home(v.columnHash, slots.count)
        slots.withUnsafeBufferPointer { winback_prefetch($0.baseAddress! + i) }
    }

    /// A hint to fetch the value of the first slot `v` is looked for in whose hash bits are
    /// `v`'s, once that slot is in the caches (``prefetch(_:)`` some values before): a value
    /// found in a table larger than the caches is then not waited on either.
    @inline(__always)
    func prefetchValue(_ v: Value) {
        guard !slots.isEmpty else { return }
        let h = v.columnHash
        let s = slots[ColumnTable.home(h, slots.count)]
        guard s != ColumnTable.empty && ColumnTable.agrees(s, h) else { return }
        values.withUnsafeBufferPointer { winback_prefetch($0.baseAddress! + Int(UInt32(truncatingIfNeeded: s))) }
    }

    /// The number of `v`: the next one if new.
    @inline(__always)
    package mutating func intern(_ v: Value) -> Int32 {
        precondition(!frozen && !listed, "a frozen or listed table interns no value")
        if slots.isEmpty { slots = Array(repeating: ColumnTable.empty, count: 16) }
        let mask = slots.count - 1
        let h = v.columnHash
        var i = ColumnTable.home(h, slots.count)
        while true {
            let s = slots[i]
            if s == ColumnTable.empty { break }
            if ColumnTable.agrees(s, h) {
                let k = Int32(truncatingIfNeeded: s)
                if values[Int(k)] == v { return k }
            }
            i = (i + 1) & mask
        }
        precondition(values.count < Int(Int32.max), "fewer than two billion distinct values")
        let n = Int32(values.count)
        slots[i] = ColumnTable.tag(h) | UInt64(UInt32(n))
        values.append(v)
        if values.count * 2 > slots.count { grow() }
        return n
    }

    /// Appends `v` without looking for it (a table of values that repeat too rarely to be
    /// worth an index): its number is the next one, even if an equal value has one. A listed
    /// table interns nothing afterwards.
    @inline(__always)
    mutating func list(_ v: Value) -> Int32 {
        precondition(!frozen && slots.isEmpty, "values listed only in a table without an index")
        precondition(values.count < Int(Int32.max), "fewer than two billion values")
        listed = true
        values.append(v)
        return Int32(values.count - 1)
    }

    private mutating func grow() {
        let n = slots.count * 2
        slots = Array(repeating: ColumnTable.empty, count: n)
        for (k, v) in values.enumerated() {
            let h = v.columnHash
            var i = ColumnTable.home(h, n)
            while slots[i] != ColumnTable.empty { i = (i + 1) & (n - 1) }
            slots[i] = ColumnTable.tag(h) | UInt64(UInt32(k))
        }
    }

    /// Drops the index: the values are only read from now on (and may be rewritten in place).
    mutating func freeze() {
        slots = []
        frozen = true
    }

    /// Rewrites every value through `body` (a frozen table: equal values stay in their places).
    mutating func rewrite(_ body: (inout Value) -> Void) {
        precondition(frozen, "values rewritten in place in a frozen table")
        for i in values.indices { body(&values[i]) }
    }
}

/// The shared columns of a set of rows (a file's while it is read, a run's after): their
/// terms and tokens, each numbered in a ``ColumnTable`` of its own, with ids of one string table.
public struct RowColumns: Sendable {
    public private(set) var terms = ColumnTable<RowTerms>()
    public private(set) var tokens = ColumnTable<AppAccountToken>()

    public init() {}

    /// Columns holding `terms` and `tokens` (distinct each), only read: a part file section's.
    package init(terms: [RowTerms], tokens: [AppAccountToken]) {
        self.terms = ColumnTable(frozen: terms)
        self.tokens = ColumnTable(frozen: tokens)
    }

    /// The number of `terms` here: the next one if new.
    @inline(__always)
    package mutating func enter(terms v: RowTerms) -> Int32 { terms.intern(v) }

    /// The number of token `v` here: the next one if new.
    @inline(__always)
    package mutating func enter(token v: AppAccountToken) -> Int32 { tokens.intern(v) }

    /// `t` as a compact row, its terms and token entered in the tables.
    @inline(__always)
    public mutating func compact(_ t: Transaction) -> CompactRow {
        var r = compactTerms(t)
        let token = t.appAccountToken
        if !token.isNone { r.token = tokens.intern(token) }
        return r
    }

    /// `t` as a compact row without its token (-1), its terms entered in the table: the
    /// token is listed apart (``list(token:)``) or entered later (``intern(tokens:of:)``).
    @inline(__always)
    package mutating func compactTerms(_ t: Transaction) -> CompactRow {
        let terms = terms.intern(t.terms)
        return CompactRow(
            purchaseDate: t.purchaseDate, expiresDate: t.expiresDate, revocationDate: t.revocationDate,
            signedDate: t.signedDate, transactionId: t.transactionId, originalTransactionId: t.originalTransactionId,
            terms: terms, token: -1)
    }

    /// The number of token `v`, listed without looking for it (a file's tokens: nearly every one
    /// is new to its file, and the run's table finds those that repeat when the file is merged,
    /// ``merge(_:strings:)``). Tokens listed, none is interned in these columns until
    /// ``internListedTokens()``.
    @inline(__always)
    package mutating func list(token v: AppAccountToken) -> Int32 { tokens.list(v) }

    /// Keeps each listed token once, in a table that interns from now on; returns where each
    /// listed token is now (a file with more tokens than are worth listing: those of a
    /// customer's rows repeat).
    package mutating func internListedTokens() -> [Int32] {
        let listed = tokens.values
        tokens = ColumnTable()
        return enter(tokens: listed)
    }

    /// Enters `pending` (tokens of rows, each row's ``CompactRow/token`` its index there) and
    /// rewrites those rows' tokens to their numbers here: a batch whose slots are fetched
    /// ahead, so that a table of a file's customers, larger than the caches, is waited on
    /// once for several rows.
    package mutating func intern(tokens pending: [AppAccountToken], of rows: UnsafeMutableBufferPointer<CompactRow>) {
        let ahead = 8
        var next = 0
        for i in rows.indices where rows[i].token >= 0 {
            let p = Int(rows[i].token)
            while next < pending.count && next <= p + ahead {
                tokens.prefetch(pending[next])
                next += 1
            }
            rows[i].token = tokens.intern(pending[p])
        }
    }

    /// Row `r` (of these columns) as a transaction.
    @inlinable @inline(__always)
    public func transaction(_ r: CompactRow) -> Transaction {
        let c = terms[r.terms]
        var t = Transaction(
            transactionId: r.transactionId, originalTransactionId: r.originalTransactionId,
            subscriptionGroupId: c.subscriptionGroupId, productId: c.productId, purchaseDate: r.purchaseDate,
            expiresDate: r.expiresDate)
        t.revocationDate = r.revocationDate
        t.signedDate = r.signedDate
        t.terms = c
        if r.token >= 0 { t.appAccountToken = tokens[r.token] }
        return t
    }

    /// Row `r`'s subscription group (of these columns' string ids).
    @inlinable @inline(__always)
    public func group(_ r: CompactRow) -> Int32 { terms[r.terms].subscriptionGroupId }

    /// Enters `other`'s terms and tokens, their string ids rewritten through `strings`; returns
    /// where each of `other`'s terms and tokens is here.
    package mutating func merge(_ other: RowColumns, strings: Span<Int32>) -> (terms: [Int32], tokens: [Int32]) {
        var termsMap: [Int32] = []
        termsMap.reserveCapacity(other.terms.count)
        for var c in other.terms.values {
            c.remap(strings)
            termsMap.append(terms.intern(c))
        }
        let incoming = other.tokens.values.map { token in
            var token = token
            token.remap(strings)
            return token
        }
        return (termsMap, enter(tokens: incoming))
    }

    /// The numbers of `incoming` here, each entered if new: their slots fetched a few ahead, so
    /// that a table larger than the caches is waited on once for several tokens.
    package mutating func enter(tokens incoming: [AppAccountToken]) -> [Int32] {
        var numbers: [Int32] = []
        numbers.reserveCapacity(incoming.count)
        // Each token's slot fetched sixteen ahead, then its value eight ahead (most of a file's
        // tokens are found: its customers had rows in the files merged before).
        for (i, token) in incoming.enumerated() {
            if i + 16 < incoming.count { tokens.prefetch(incoming[i + 16]) }
            if i + 8 < incoming.count { tokens.prefetchValue(incoming[i + 8]) }
            numbers.append(tokens.intern(token))
        }
        return numbers
    }

    /// Rewrites every string id through `map` (the run's ids renumbered) and drops the indexes:
    /// no value is entered afterwards.
    package mutating func renumber(_ map: [Int32]) {
        terms.freeze()
        tokens.freeze()
        terms.rewrite { $0.remap(map.span) }
        tokens.rewrite { $0.remap(map.span) }
    }
}
