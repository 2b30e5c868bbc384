import Foundation

/// A JSON document with its types kept exact (an integer is not a double, `1` is not `true`),
/// for configuration files, where every field is checked and every problem named.
/// Not for the hot path: transaction lines go through ``NDJSONScanner``.
public enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        if var a = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !a.isAtEnd { items.append(try a.decode(JSONValue.self)) }
            self = .array(items)
            return
        }
        if let o = try? decoder.container(keyedBy: AnyKey.self) {
            var d: [String: JSONValue] = [:]
            for k in o.allKeys { d[k.stringValue] = try o.decode(JSONValue.self, forKey: k) }
            self = .object(d)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) {
            self = .double(d)
        } else {
            self = .string(try c.decode(String.self))
        }
    }

    /// Parses a whole document. Invalid JSON throws a ``JSONSyntaxError`` saying where
    /// (docs/rules.md §10.7).
    public static func parse(_ data: Data) throws -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: data)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw JSONSyntaxError.locate(in: data) ?? JSONSyntaxError(line: nil, column: nil, detail: "not valid JSON")
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var int: Int64? {
        if case .int(let i) = self { return i }
        return nil
    }

    public var array: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var object: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// A short name of the JSON type, for messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int: return "an integer"
        case .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

extension JSONValue: Encodable {
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// A document made of the values `JSONSerialization` writes (strings, integers, doubles,
    /// booleans, `NSNull`, and arrays and string-keyed dictionaries of them); nil when it holds
    /// any other value.
    public init?(any value: Any) {
        switch value {
        case let s as String: self = .string(s)
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .int(Int64(i))
        case let i as Int64: self = .int(i)
        case let i as Int32: self = .int(Int64(i))
        case let d as Double: self = .double(d)
        case is NSNull: self = .null
        case let a as [Any]:
            var items: [JSONValue] = []
            items.reserveCapacity(a.count)
            for v in a {
                guard let item = JSONValue(any: v) else { return nil }
                items.append(item)
            }
            self = .array(items)
        case let o as [String: Any]:
            var d: [String: JSONValue] = [:]
            d.reserveCapacity(o.count)
            for (k, v) in o {
                guard let item = JSONValue(any: v) else { return nil }
                d[k] = item
            }
            self = .object(d)
        default: return nil
        }
    }

    /// The document indented and its keys sorted, through `JSONEncoder`: the bytes
    /// `JSONSerialization` writes with `[.prettyPrinted, .sortedKeys]` (the same indentation,
    /// escapes and numbers), for keys that order alike bytewise and without regard to case and
    /// digits (which is how `JSONSerialization` sorts them: `a9` before `a10`, `b` before `C`).
    /// Written once a run, the manifest costs a small part of what `JSONSerialization` spends
    /// bridging each value and looking up its conformances.
    public func prettySorted() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }
}

/// Where a JSON document stops being JSON: its line and column (from 1), when known.
public struct JSONSyntaxError: Error, CustomStringConvertible, Equatable {
    public var line: Int?
    public var column: Int?
    public var detail: String

    /// "at line L, column C: detail", or ": detail" when the place is not known: what follows
    /// "not valid JSON" in a message.
    public var description: String {
        guard let line, let column else { return ": " + detail }
        return " at line \(line), column \(column): \(detail)"
    }

    /// Asks JSONSerialization, which names the offset of the first bad character ("around
    /// character N"), and turns that offset into a line and column.
    static func locate(in data: Data) -> JSONSyntaxError? {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return nil
        } catch {
            let text = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            var detail = text.hasSuffix(".") ? String(text.dropLast()) : text
            var offset = data.count
            if let r = detail.range(of: " around character "), let at = Int(detail[r.upperBound...]) {
                offset = at
                detail = String(detail[..<r.lowerBound])
            } else if !detail.lowercased().contains("end of file") {
                return JSONSyntaxError(line: nil, column: nil, detail: detail)
            }
            var line = 1
            var column = 1
            for b in data.prefix(max(0, offset)) {
                if b == 0x0A {
                    line += 1
                    column = 1
                } else if b & 0xC0 != 0x80 {
                    column += 1
                }
            }
            return JSONSyntaxError(line: line, column: column, detail: detail.isEmpty ? "not valid JSON" : detail)
        }
    }
}

/// A key an object of a JSON document gives twice (docs/rules.md §6.3): JSON decoders keep one
/// of the two silently, so a catalog saying `"territories": []` above `"territories": ["USA"]`
/// would sell everywhere. Found by one pass over a document already known to be valid JSON.
public struct JSONDuplicateKey: Equatable, Sendable {
    /// Where the object is: keys and array indexes from the root (`["offers", 3]`).
    public var path: [PathComponent]
    public var key: String
    /// Where the second occurrence starts, from 1.
    public var line: Int
    public var column: Int

    public enum PathComponent: Equatable, Sendable {
        case key(String)
        case index(Int)
    }

    /// The first key given twice in one object of `data` (valid JSON), nil when there is none.
    /// Keys are compared as they decode (an escape spells its character).
    public static func first(in data: Data) -> JSONDuplicateKey? {
        let bytes = [UInt8](data)
        // One entry per open object or array: its kind, the keys seen, the current key or index,
        // and whether a key comes next. Parallel arrays, so a key set grows in place.
        var isObject: [Bool] = []
        var keys: [Set<[UInt8]>] = []
        var current: [[UInt8]] = []
        var index: [Int] = []
        var expectKey: [Bool] = []
        var line = 1
        var lineStart = 0
        var i = 0
        func path() -> [PathComponent] {
            (0..<max(0, isObject.count - 1)).map { k in
                isObject[k] ? .key(String(decoding: current[k], as: UTF8.self)) : .index(index[k])
            }
        }
        func push(object: Bool) {
            isObject.append(object)
            keys.append([])
            current.append([])
            index.append(0)
            expectKey.append(object)
        }
        while i < bytes.count {
            let b = bytes[i]
            let top = isObject.count - 1
            switch b {
            case UInt8(ascii: "\n"):
                line += 1
                lineStart = i + 1
            case UInt8(ascii: "{"): push(object: true)
            case UInt8(ascii: "["): push(object: false)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if top >= 0 {
                    isObject.removeLast()
                    keys.removeLast()
                    current.removeLast()
                    index.removeLast()
                    expectKey.removeLast()
                }
            case UInt8(ascii: ","):
                if top >= 0 {
                    if isObject[top] { expectKey[top] = true } else { index[top] += 1 }
                }
            case UInt8(ascii: ":"):
                if top >= 0 { expectKey[top] = false }
            case UInt8(ascii: "\""):
                let start = i
                i += 1
                while i < bytes.count, bytes[i] != UInt8(ascii: "\"") { i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1 }
                if top >= 0, isObject[top], expectKey[top] {
                    var key = Array(bytes[(start + 1)..<min(i, bytes.count)])
                    // An escaped key is the key it spells: "territorie\u0073" is "territories".
                    if key.contains(UInt8(ascii: "\\")),
                        let decoded = try? JSONDecoder().decode(String.self, from: Data([0x22] + key + [0x22]))
                    {
                        key = Array(decoded.utf8)
                    }
                    if !keys[top].insert(key).inserted {
                        let column = String(decoding: bytes[lineStart..<start], as: UTF8.self).count + 1
                        return JSONDuplicateKey(
                            path: path(), key: String(decoding: key, as: UTF8.self), line: line, column: column)
                    }
                    current[top] = key
                }
            default: break
            }
            i += 1
        }
        return nil
    }
}
