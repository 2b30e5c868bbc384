// A stand-in for swift-crypto's SHA256 so the fuzz targets build with swiftc alone; the
// hash is not what is being fuzzed (the test suite checks it against sha256sum).
public struct SHA256 {
    private var sum: UInt64 = 0
    public init() {}
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        for b in bufferPointer { sum = sum &* 31 &+ UInt64(b) }
    }
    public mutating func update<D: Sequence>(data: D) where D.Element == UInt8 {
        for b in data { sum = sum &* 31 &+ UInt64(b) }
    }
    public func finalize() -> [UInt8] { withUnsafeBytes(of: sum) { Array($0) } }
}
