import Testing

@testable import WinBack
@testable import WinBackModel
@testable import WinBackRead
@testable import WinBackRules
@testable import WinBackSupport
@testable import WinBackTesting
@testable import WinBackWrite

@Suite("Identifier patterns (docs/rules.md §2.1)")
struct IdentifierTests {
    func uuid(_ s: String) -> Bool { Identifier.isUUID(Array(s.utf8).span.bytes) }
    func id(_ s: String) -> Bool { Identifier.isValid(s) }

    @Test func uuidsOfEitherCaseAreAccepted() {
        #expect(uuid("3986ab64-8bd8-42eb-af46-e68402505cff"))
        #expect(uuid("3986AB64-8BD8-42EB-AF46-E68402505CFF"))
        #expect(uuid("00000000-0000-0000-0000-000000000000"))
    }

    /// Every position, with every byte that is not allowed there.
    @Test func anyWrongByteAnywhereIsRejected() {
        let good = Array("3986ab64-8bd8-42eb-af46-e68402505cff".utf8)
        let dashes: Set = [8, 13, 18, 23]
        for i in good.indices {
            for c in 0...255 {
                let byte = UInt8(c)
                let allowed =
                    dashes.contains(i)
                    ? byte == 45 : (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
                var s = good
                s[i] = byte
                #expect(Identifier.isUUID(s.span.bytes) == allowed, "byte \(c) at \(i)")
            }
        }
        #expect(!uuid("3986ab64-8bd8-42eb-af46-e68402505cf"))
        #expect(!uuid("3986ab64-8bd8-42eb-af46-e68402505cfff"))
        #expect(!uuid("3986ab648-bd8-42eb-af46-e68402505cff"))
        #expect(!uuid(""))
    }

    @Test func identifiersFollowTheirPattern() {
        for s in ["a", "Z9", "1000000000000001", "com.example.pass_monthly:v-2", String(repeating: "x", count: 128)] {
            #expect(id(s), "\(s)")
        }
        for s in ["", ".a", "-a", "_a", ":a", "a b", "a/b", "é", "a\u{0}", String(repeating: "x", count: 129)] {
            #expect(!id(s), "\(s)")
        }
        // Every ASCII byte after a valid first one.
        for c in 0..<128 {
            let byte = UInt8(c)
            let allowed =
                (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
                || [46, 95, 58, 45].contains(byte)
            #expect(Identifier.isValid([97, byte].span.bytes) == allowed, "byte \(c)")
        }
    }

    /// Every byte value at every position of ids long enough to be checked eight bytes at a
    /// time, with allowed neighbours on both sides.
    @Test func everyByteAtEveryPositionOfALongId() {
        let good = Array("a1B2.c_d:e-f9Z0yx".utf8)  // 17 bytes: one byte, two words
        let goodIsValid = Identifier.isValid(good.span.bytes)
        #expect(goodIsValid)
        for i in 1..<good.count {
            for c in 0...255 {
                let byte = UInt8(c)
                let allowed =
                    (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
                    || [46, 95, 58, 45].contains(byte)
                var s = good
                s[i] = byte
                #expect(Identifier.isValid(s.span.bytes) == allowed, "byte \(c) at \(i)")
            }
        }
    }
}
