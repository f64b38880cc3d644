// A small JSON parser that records the line and column of every value and object key.
//
// Foundation's JSONSerialization/JSONDecoder report no source positions, and no library the
// project depends on does either, so policy diagnostics (`file:line:column: message`) need this.
// It follows RFC 8259 strictly (no comments, no trailing commas) and limits nesting depth.

/// A JSON value with the position of its first character.
struct JSONValue {
    indirect enum Node {
        case object([JSONMember])
        case array([JSONValue])
        case string(String)
        /// The number's source text, validated against the JSON grammar.
        case number(String)
        case bool(Bool)
        case null
    }

    var node: Node
    var position: SourcePosition

    var kindName: String {
        switch node {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        }
    }
}

struct JSONMember {
    var key: String
    var keyPosition: SourcePosition
    var value: JSONValue
}

struct JSONSyntaxError: Error {
    var offset: Int
    var message: String
}

/// Maps byte offsets in the parsed text back to positions in the original source text
/// (placeholder substitution may have changed lengths).
struct SourceMap {
    private let original: [UInt8]
    private let lineStarts: [Int]
    /// For each byte offset of the parsed text, the offset in `original`; nil when identical.
    private let origin: [Int]?

    init(original: [UInt8], origin: [Int]?) {
        self.original = original
        var starts = [0]
        for (i, b) in original.enumerated() where b == UInt8(ascii: "\n") { starts.append(i + 1) }
        self.lineStarts = starts
        self.origin = origin
    }

    func position(ofParsedOffset offset: Int) -> SourcePosition {
        let o: Int
        if let origin { o = offset < origin.count ? origin[offset] : original.count } else { o = offset }
        return position(ofOriginalOffset: o)
    }

    func position(ofOriginalOffset offset: Int) -> SourcePosition {
        let o = min(max(offset, 0), original.count)
        var lo = 0, hi = lineStarts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if lineStarts[mid] <= o { lo = mid } else { hi = mid - 1 }
        }
        var column = 1
        var i = lineStarts[lo]
        while i < o {
            if original[i] & 0xC0 != 0x80 { column += 1 }
            i += 1
        }
        // An offset inside a multi-byte scalar counts as that scalar.
        if o < original.count, original[o] & 0xC0 == 0x80 { column -= 1 }
        return SourcePosition(line: lo + 1, column: column)
    }
}

/// Syntax checking for other JSON files (config.json), so their errors name a line and column
/// as policy diagnostics do.
public enum JSONSyntax {
    /// The first syntax error in `bytes` (strict RFC 8259, duplicate keys refused), or nil.
    public static func firstError(in bytes: [UInt8]) -> (position: SourcePosition, message: String)? {
        let map = SourceMap(original: bytes, origin: nil)
        do {
            _ = try JSONParser.parse(bytes: bytes, map: map)
            return nil
        } catch {
            return (map.position(ofParsedOffset: error.offset), error.message)
        }
    }
}

struct JSONParser {
    private let bytes: [UInt8]
    private let map: SourceMap
    private var i = 0
    private var depth = 0
    static let maxDepth = 64

    init(bytes: [UInt8], map: SourceMap) {
        self.bytes = bytes
        self.map = map
    }

    /// Parses one JSON document; throws with the position of the first syntax error.
    static func parse(bytes: [UInt8], map: SourceMap) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, map: map)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.i < bytes.count {
            throw JSONSyntaxError(offset: parser.i, message: "unexpected \(parser.describe(parser.i)) after the JSON document")
        }
        return value
    }

    private func pos(_ offset: Int) -> SourcePosition { map.position(ofParsedOffset: offset) }

    private func describe(_ offset: Int) -> String {
        guard offset < bytes.count else { return "end of file" }
        let b = bytes[offset]
        if b >= 0x21 && b < 0x7F { return "character '\(Character(Unicode.Scalar(b)))'" }
        if b == 0x20 { return "space" }
        if b < 0x20 { return "control character" }
        return "character"
    }

    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard i < bytes.count else { throw JSONSyntaxError(offset: i, message: "expected a value, found end of file") }
        let start = i
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return JSONValue(node: .string(try parseString()), position: pos(start))
        case UInt8(ascii: "t"): try literal("true"); return JSONValue(node: .bool(true), position: pos(start))
        case UInt8(ascii: "f"): try literal("false"); return JSONValue(node: .bool(false), position: pos(start))
        case UInt8(ascii: "n"): try literal("null"); return JSONValue(node: .null, position: pos(start))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw JSONSyntaxError(offset: i, message: "expected a value, found \(describe(i))")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for (k, b) in w.enumerated() {
            guard i + k < bytes.count, bytes[i + k] == b else {
                throw JSONSyntaxError(offset: i, message: "invalid literal; expected '\(word)'")
            }
        }
        i += w.count
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > Self.maxDepth { throw JSONSyntaxError(offset: i, message: "nesting deeper than \(Self.maxDepth) levels") }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        try enter()
        defer { depth -= 1 }
        i += 1
        var members: [JSONMember] = []
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "}") {
            i += 1
            return JSONValue(node: .object(members), position: pos(start))
        }
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                throw JSONSyntaxError(offset: i, message: "expected a string key, found \(describe(i))")
            }
            let keyStart = i
            let key = try parseString()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                throw JSONSyntaxError(offset: i, message: "expected ':' after key \"\(key)\", found \(describe(i))")
            }
            i += 1
            skipWhitespace()
            let value = try parseValue()
            if members.contains(where: { $0.key == key }) {
                throw JSONSyntaxError(offset: keyStart, message: "duplicate key \"\(key)\"")
            }
            members.append(JSONMember(key: key, keyPosition: pos(keyStart), value: value))
            skipWhitespace()
            guard i < bytes.count else { throw JSONSyntaxError(offset: i, message: "expected ',' or '}', found end of file") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; break }
            throw JSONSyntaxError(offset: i, message: "expected ',' or '}', found \(describe(i))")
        }
        return JSONValue(node: .object(members), position: pos(start))
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        try enter()
        defer { depth -= 1 }
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "]") {
            i += 1
            return JSONValue(node: .array(elements), position: pos(start))
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard i < bytes.count else { throw JSONSyntaxError(offset: i, message: "expected ',' or ']', found end of file") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; break }
            throw JSONSyntaxError(offset: i, message: "expected ',' or ']', found \(describe(i))")
        }
        return JSONValue(node: .array(elements), position: pos(start))
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard i < bytes.count else { throw JSONSyntaxError(offset: i, message: "unterminated \\u escape") }
            let b = bytes[i]
            let d: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw JSONSyntaxError(offset: i, message: "invalid hex digit in \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        let open = i
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw JSONSyntaxError(offset: open, message: "unterminated string") }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { i += 1; break }
            if b < 0x20 {
                throw JSONSyntaxError(offset: i, message: b == 0x0A ? "unterminated string (newline inside a string)" : "control character inside a string must be escaped")
            }
            if b != UInt8(ascii: "\\") { out.append(b); i += 1; continue }
            let escapeStart = i
            i += 1
            guard i < bytes.count else { throw JSONSyntaxError(offset: open, message: "unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw JSONSyntaxError(offset: escapeStart, message: "unpaired UTF-16 surrogate in \\u escape")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw JSONSyntaxError(offset: escapeStart, message: "unpaired UTF-16 surrogate in \\u escape")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw JSONSyntaxError(offset: escapeStart, message: "unpaired UTF-16 surrogate in \\u escape")
                }
                out.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
            default:
                throw JSONSyntaxError(offset: escapeStart, message: "invalid escape sequence in string")
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        func digit(_ k: Int) -> Bool { k < bytes.count && bytes[k] >= UInt8(ascii: "0") && bytes[k] <= UInt8(ascii: "9") }
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard digit(i) else { throw JSONSyntaxError(offset: i, message: "invalid number") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if digit(i) { throw JSONSyntaxError(offset: start, message: "invalid number (leading zero)") }
        } else {
            while digit(i) { i += 1 }
        }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digit(i) else { throw JSONSyntaxError(offset: i, message: "invalid number (digit expected after '.')") }
            while digit(i) { i += 1 }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard digit(i) else { throw JSONSyntaxError(offset: i, message: "invalid number (digit expected in exponent)") }
            while digit(i) { i += 1 }
        }
        return JSONValue(node: .number(String(decoding: bytes[start..<i], as: UTF8.self)), position: pos(start))
    }
}
