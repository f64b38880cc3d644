#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Percent-encoding as the signature specifications define it: RFC 3986 unreserved characters
/// (`A–Z a–z 0–9 - _ . ~`) stay, every other byte of the UTF-8 form becomes `%XX` (upper-case hex).
public enum PercentEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    @inline(__always)
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

    /// Encodes `string`'s UTF-8 form; `/` is kept when `keepSlash` (AWS `UriEncode(…, false)`
    /// for paths).
    public static func encode(_ string: some StringProtocol, keepSlash: Bool = false) -> String {
        string.utf8.withContiguousStorageIfAvailable { encode($0, keepSlash: keepSlash) }
            ?? Array(string.utf8).withUnsafeBufferPointer { encode($0, keepSlash: keepSlash) }
    }

    /// The same over contiguous bytes, written straight into the result (at most three bytes
    /// for one; all ASCII). A listing with `encoding-type=url` runs every key through this:
    /// iterating a generic byte sequence cost it a quarter of the server's CPU.
    static func encode(_ bytes: UnsafeBufferPointer<UInt8>, keepSlash: Bool) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 3) { out in
            var written = 0
            for c in bytes {
                if isUnreserved(c) || (keepSlash && c == UInt8(ascii: "/")) {
                    out[written] = c
                    written += 1
                } else {
                    out[written] = UInt8(ascii: "%")
                    out[written + 1] = hexDigits[Int(c >> 4)]
                    out[written + 2] = hexDigits[Int(c & 0x0f)]
                    written += 3
                }
            }
            return written
        }
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
        string.utf8.withContiguousStorageIfAvailable { decodeBytes($0, plusIsSpace: plusIsSpace) }
            ?? Array(string.utf8).withUnsafeBufferPointer { decodeBytes($0, plusIsSpace: plusIsSpace) }
    }

    /// The same over contiguous bytes, written straight into the result (never longer than the input).
    static func decodeBytes(_ raw: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: raw.count) { out, written in
            written = decode(raw, plusIsSpace: plusIsSpace, into: out)
        }
    }

    /// The same, to a String (invalid UTF-8 replaced, U+FFFD), with no array in between.
    static func decodeString(_ raw: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> String {
        String(unsafeUninitializedCapacity: raw.count) { decode(raw, plusIsSpace: plusIsSpace, into: $0) }
    }

    /// Decodes `raw` into `out`, which holds at least `raw.count` bytes; returns how many it wrote.
    private static func decode(_ raw: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var i = 0
        var n = 0
        while i < raw.count {
            let c = raw[i]
            if c == UInt8(ascii: "%"), i + 2 < raw.count, let high = hexValue(raw[i + 1]), let low = hexValue(raw[i + 2]) {
                out[n] = high << 4 | low
                i += 3
            } else {
                out[n] = plusIsSpace && c == UInt8(ascii: "+") ? UInt8(ascii: " ") : c
                i += 1
            }
            n += 1
        }
        return n
    }

    /// Decodes to a String; invalid UTF-8 is replaced (U+FFFD).
    public static func decode(_ string: some StringProtocol, plusIsSpace: Bool = false) -> String {
        if !needsDecoding(string.utf8, plusIsSpace: plusIsSpace) { return String(string) }
        return string.utf8.withContiguousStorageIfAvailable { decodeString($0, plusIsSpace: plusIsSpace) }
            ?? String(decoding: decodeBytes(string, plusIsSpace: plusIsSpace), as: UTF8.self)
    }

    /// The canonical form SigV4 signs for an encoded component: decoded once, then encoded
    /// (`UriEncode`), appended to `out`. With `keepLiteralSlash` (S3 paths) a `/` as sent stays a
    /// separator, while an encoded `%2F` stays `%2F`. A component already in canonical form, as
    /// signers send them, is copied in one piece.
    static func appendCanonical(_ raw: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool, keepLiteralSlash: Bool, to out: inout [UInt8]) {
        if isCanonical(raw, keepLiteralSlash: keepLiteralSlash) {
            out.append(contentsOf: raw)
            return
        }
        out.reserveCapacity(out.count + raw.count * 3)
        var i = 0
        while i < raw.count {
            let c = raw[i]
            if c == UInt8(ascii: "%"), i + 2 < raw.count, let high = hexValue(raw[i + 1]), let low = hexValue(raw[i + 2]) {
                appendEncoded(high << 4 | low, to: &out, keepSlash: false)
                i += 3
                continue
            }
            if keepLiteralSlash && c == UInt8(ascii: "/") {
                out.append(c)
            } else {
                appendEncoded(plusIsSpace && c == UInt8(ascii: "+") ? UInt8(ascii: " ") : c, to: &out, keepSlash: false)
            }
            i += 1
        }
    }

    /// True when `raw` is its own canonical form: unreserved bytes (and literal slashes, when
    /// kept), and `%XX` escapes in upper-case hex of bytes that must stay escaped.
    private static func isCanonical(_ raw: UnsafeBufferPointer<UInt8>, keepLiteralSlash: Bool) -> Bool {
        var i = 0
        while i < raw.count {
            let c = raw[i]
            if isUnreserved(c) || (keepLiteralSlash && c == UInt8(ascii: "/")) {
                i += 1
                continue
            }
            guard c == UInt8(ascii: "%"), i + 2 < raw.count,
                  let high = upperHexValue(raw[i + 1]), let low = upperHexValue(raw[i + 2]), !isUnreserved(high << 4 | low)
            else { return false }
            i += 3
        }
        return true
    }

    static func needsDecoding(_ utf8: some Collection<UInt8>, plusIsSpace: Bool) -> Bool {
        utf8.withContiguousStorageIfAvailable { needsDecoding($0, plusIsSpace: plusIsSpace) }
            ?? utf8.contains { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }
    }

    static func needsDecoding(_ bytes: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
        if memchr(base, Int32(UInt8(ascii: "%")), bytes.count) != nil { return true }
        return plusIsSpace && memchr(base, Int32(UInt8(ascii: "+")), bytes.count) != nil
    }

    @inline(__always)
    private static func upperHexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    @inline(__always)
    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
