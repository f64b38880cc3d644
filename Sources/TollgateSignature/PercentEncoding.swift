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
        for c in bytes {
            if isUnreserved(c) || (keepSlash && c == UInt8(ascii: "/")) {
                out.append(c)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(c >> 4)])
                out.append(hexDigits[Int(c & 0x0f)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func encode(_ string: some StringProtocol, keepSlash: Bool = false) -> String {
        encode(string.utf8, keepSlash: keepSlash)
    }

    /// Decodes `%XX` escapes to bytes. A `%` not followed by two hex digits is kept literally
    /// (as S3 and OSS do). `+` becomes a space only with `plusIsSpace` (query strings, which
    /// HTTP libraries such as Python's requests form-encode); in paths it is a literal plus.
    public static func decodeBytes(_ string: some StringProtocol, plusIsSpace: Bool = false) -> [UInt8] {
        let utf8 = Array(string.utf8)
        var out = [UInt8]()
        out.reserveCapacity(utf8.count)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "%"), i + 2 < utf8.count,
               let high = hexValue(utf8[i + 1]), let low = hexValue(utf8[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else if plusIsSpace && utf8[i] == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
                i += 1
            } else {
                out.append(utf8[i])
                i += 1
            }
        }
        return out
    }

    /// Decodes to a String; invalid UTF-8 is replaced (U+FFFD).
    public static func decode(_ string: some StringProtocol, plusIsSpace: Bool = false) -> String {
        String(decoding: decodeBytes(string, plusIsSpace: plusIsSpace), as: UTF8.self)
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
