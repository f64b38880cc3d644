/// Writes one flat JSON object, members in the order they are added, straight into UTF-8
/// bytes: the token's claims, the token endpoint's answers, the token audit file and the CLI's
/// JSON output. Hand-written because the token endpoint's field order is part of its
/// contract (`JSONEncoder` promises none) and because minting is on its hot path.
///
/// Member names are `StaticString`s, written as they are: names in our source need no escaping,
/// and copying them costs a fraction of checking them. A name that comes from input goes
/// through `add(member:_:)`, which escapes it like a value.
public struct JSONObjectWriter {
    private var bytes: [UInt8] = []

    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// A string member (escaped per RFC 8259).
    public mutating func add(_ name: StaticString, _ value: String) {
        member(name)
        appendQuoted(value)
    }

    /// A string member whose name comes from input (a claim's name), escaped like the value.
    public mutating func add(member name: String, _ value: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        appendQuoted(value)
    }

    /// A string member, or `null`.
    public mutating func add(_ name: StaticString, _ value: String?) {
        if let value { add(name, value) } else { add(name, raw: "null") }
    }

    public mutating func add(_ name: StaticString, _ value: Int64) {
        member(name)
        Self.appendDecimal(value, to: &bytes)
    }

    public mutating func add(_ name: StaticString, _ value: Bool) {
        add(name, raw: value ? "true" : "false")
    }

    /// A member whose value is already JSON text (a number, a nested object).
    public mutating func add(_ name: StaticString, raw value: String) {
        member(name)
        bytes.append(contentsOf: value.utf8)
    }

    public consuming func finish() -> String {
        String(decoding: finishBytes(), as: UTF8.self)
    }

    public consuming func finishBytes() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func member(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// The comma before every member but the first.
    private mutating func separate() {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
    }

    /// Whether `utf8` holds a byte that JSON strings must escape: a control character, `"` or
    /// `\`. Checks eight bytes at a time (the token and its secret are read on every issue).
    static func needsEscaping(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        /// A high bit set in every byte of `word` that is zero (exact as a yes/no answer).
        func zeroBytes(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highs }
        var index = 0
        if let base = utf8.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= utf8.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // Bytes below 0x20, then bytes equal to `"` (0x22) or `\` (0x5c).
                let control = (word &- ones &* 0x20) & ~word & highs
                if control | zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5c)) != 0 { return true }
                index += 8
            }
        }
        while index < utf8.count {
            let byte = utf8[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
            index += 1
        }
        return false
    }

    private mutating func appendQuoted(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Fast path: nothing to escape (every token field, almost every message).
            if !Self.needsEscaping(utf8) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                              hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends the decimal digits of `value` (with a leading `-` when negative).
    public static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes, room for the 19 digits of Int64.min
        withUnsafeMutableBytes(of: &digits) { buffer in
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: buffer[start...])
        }
    }
}
