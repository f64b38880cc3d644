/// Percent-encoding as the signature specifications define it: RFC 3986 unreserved characters
/// (`A–Z a–z 0–9 - _ . ~`) stay, every other byte of the UTF-8 form becomes `%XX` (upper-case hex).
public enum PercentEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    static func isUnreserved(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Encodes `bytes`; `/` is kept when `keepSlash` (AWS `UriEncode(…, false)` for paths).
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes, keepSlash: Bool = false) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount)
        for c in bytes { appendEncoded(c, to: &out, keepSlash: keepSlash) }
        return String(decoding: out, as: UTF8.self)
    }

    public static func encode(_ string: some StringProtocol, keepSlash: Bool = false) -> String {
        encode(string.utf8, keepSlash: keepSlash)
    }

    @inline(__always)
    static func appendEncoded(_ c: UInt8, to out: inout [UInt8], keepSlash: Bool) {
        if isUnreserved(c) || (keepSlash && c == UInt8(ascii: "/")) {
            out.append(c)
        } else {
            out.append(UInt8(ascii: "%"))
            out.append(hexDigits[Int(c >> 4)])
            out.append(hexDigits[Int(c & 0x0f)])
        }
    }

    /// Decodes `%XX` escapes to bytes. A `%` not followed by two hex digits is kept literally
    /// (as S3 and OSS do). `+` becomes a space only with `plusIsSpace` (query strings, which
    /// HTTP libraries such as Python's requests form-encode); in paths it is a literal plus.
    public static func decodeBytes(_ string: some StringProtocol, plusIsSpace: Bool = false) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(string.utf8.count)
        forEachDecoded(string.utf8, plusIsSpace: plusIsSpace) { out.append($0) }
        return out
    }

    /// Decodes to a String; invalid UTF-8 is replaced (U+FFFD).
    public static func decode(_ string: some StringProtocol, plusIsSpace: Bool = false) -> String {
        if !needsDecoding(string.utf8, plusIsSpace: plusIsSpace) { return String(string) }
        return String(decoding: decodeBytes(string, plusIsSpace: plusIsSpace), as: UTF8.self)
    }

    /// The canonical form SigV4 signs for an encoded component: decoded once, then encoded
    /// (`UriEncode`), appended to `out` in one pass.
    static func appendCanonical(_ utf8: some Collection<UInt8>, plusIsSpace: Bool, keepSlash: Bool = false, to out: inout [UInt8]) {
        forEachDecoded(utf8, plusIsSpace: plusIsSpace) { appendEncoded($0, to: &out, keepSlash: keepSlash) }
    }

    static func needsDecoding(_ utf8: some Collection<UInt8>, plusIsSpace: Bool) -> Bool {
        func scan(_ bytes: some Collection<UInt8>) -> Bool {
            bytes.contains { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }
        }
        return utf8.withContiguousStorageIfAvailable { scan($0) } ?? scan(utf8)
    }

    /// Calls `body` with each decoded byte; over the bytes' contiguous storage when there is one
    /// (native strings), which is many times faster than stepping String indices.
    @inline(__always)
    static func forEachDecoded<C: Collection<UInt8>>(_ utf8: C, plusIsSpace: Bool, _ body: (UInt8) -> Void) {
        let done: Void? = utf8.withContiguousStorageIfAvailable { buffer in
            forEachDecodedBytes(buffer, plusIsSpace: plusIsSpace, body)
        }
        if done == nil { forEachDecodedBytes(utf8, plusIsSpace: plusIsSpace, body) }
    }

    @inline(__always)
    private static func forEachDecodedBytes<C: Collection<UInt8>>(_ utf8: C, plusIsSpace: Bool, _ body: (UInt8) -> Void) {
        var i = utf8.startIndex
        while i != utf8.endIndex {
            let c = utf8[i]
            if c == UInt8(ascii: "%") {
                let first = utf8.index(after: i)
                if first != utf8.endIndex, let high = hexValue(utf8[first]) {
                    let second = utf8.index(after: first)
                    if second != utf8.endIndex, let low = hexValue(utf8[second]) {
                        body(high << 4 | low)
                        i = utf8.index(after: second)
                        continue
                    }
                }
                body(c)
            } else if plusIsSpace && c == UInt8(ascii: "+") {
                body(UInt8(ascii: " "))
            } else {
                body(c)
            }
            i = utf8.index(after: i)
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
