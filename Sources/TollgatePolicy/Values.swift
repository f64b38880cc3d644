import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address (IPv4-mapped IPv6 addresses are folded to IPv4).
struct IPAddress: Sendable, Hashable {
    var bytes: [UInt8]

    init?(_ text: String) {
        if text.contains(":") {
            var a = in6_addr()
            guard inet_pton(AF_INET6, text, &a) == 1 else { return nil }
            let b = withUnsafeBytes(of: &a) { Array($0) }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
                bytes = Array(b[12..<16])
            } else {
                bytes = b
            }
        } else {
            var a = in_addr()
            guard inet_pton(AF_INET, text, &a) == 1 else { return nil }
            bytes = withUnsafeBytes(of: &a) { Array($0) }
        }
    }
}

/// A CIDR block such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a /32 or /128.
struct CIDRBlock: Sendable, Hashable {
    var network: [UInt8]
    var prefix: Int

    init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let bits = address.bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let p = Int(parts[1]), p >= 0, p <= bits, parts[1].allSatisfy(\.isASCII) else { return nil }
            // IPv4-mapped IPv6 CIDR: the prefix counts the 96 mapping bits.
            if text.contains(":") && address.bytes.count == 4 {
                guard p >= 96 else { return nil }
                prefix = p - 96
            } else {
                prefix = p
            }
        }
        self.network = address.bytes
        self.prefix = prefix
    }

    func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == network.count else { return false }
        var remaining = prefix
        var i = 0
        while remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if (address.bytes[i] ^ network[i]) & mask != 0 { return false }
            remaining -= 8
            i += 1
        }
        return true
    }
}

enum ValueParsing {
    /// A JSON-style number (integer or decimal), nil otherwise.
    static func number(_ s: String) -> Double? {
        guard !s.isEmpty, s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x2B || $0 == 0x65 || $0 == 0x45 }) else { return nil }
        guard let d = Double(s), d.isFinite else { return nil }
        return d
    }

    static func bool(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "true": true
        case "false": false
        default: nil
        }
    }

    /// Seconds since the epoch from epoch seconds (`1700000000`) or ISO 8601
    /// (`2026-01-02`, `2026-01-02T03:04:05Z`, with fractional seconds or a `±hh:mm` offset).
    static func date(_ s: String) -> Double? {
        let b = Array(s.utf8)
        if !b.isEmpty && b.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) || (b.first == 0x2D && b.count > 1 && b.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })) {
            guard b.count <= 12 else { return nil }
            return Double(s)
        }
        return iso8601(b)
    }

    private static func digits(_ b: [UInt8], _ at: Int, _ n: Int) -> Int? {
        guard at + n <= b.count else { return nil }
        var v = 0
        for k in at..<(at + n) {
            let c = b[k]
            guard c >= 0x30 && c <= 0x39 else { return nil }
            v = v * 10 + Int(c - 0x30)
        }
        return v
    }

    private static func iso8601(_ b: [UInt8]) -> Double? {
        guard let y = digits(b, 0, 4), b.count >= 10, b[4] == 0x2D, let mo = digits(b, 5, 2), b[7] == 0x2D,
              let d = digits(b, 8, 2), (1...12).contains(mo), d >= 1, d <= daysIn(mo, y) else { return nil }
        var h = 0, mi = 0, sec = 0.0, offset = 0
        var i = 10
        if i < b.count {
            guard b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: "t") || b[i] == 0x20,
                  let hh = digits(b, i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3A, let mm = digits(b, i + 4, 2) else { return nil }
            h = hh
            mi = mm
            i += 6
            if i < b.count && b[i] == 0x3A {
                guard let ss = digits(b, i + 1, 2) else { return nil }
                sec = Double(ss)
                i += 3
                if i < b.count && b[i] == 0x2E {
                    var k = i + 1
                    var frac = 0.0, scale = 0.1
                    while k < b.count && b[k] >= 0x30 && b[k] <= 0x39 {
                        frac += Double(b[k] - 0x30) * scale
                        scale /= 10
                        k += 1
                    }
                    guard k > i + 1 else { return nil }
                    sec += frac
                    i = k
                }
            }
            guard h < 24, mi < 60, sec < 61 else { return nil }
            guard i < b.count else { return nil } // a time needs a zone
            if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
                i += 1
            } else if b[i] == 0x2B || b[i] == 0x2D {
                let east = b[i] == 0x2B
                guard let oh = digits(b, i + 1, 2), oh < 24 else { return nil }
                var om = 0
                if i + 3 < b.count && b[i + 3] == 0x3A {
                    guard let m = digits(b, i + 4, 2) else { return nil }
                    om = m
                    i += 6
                } else if let m = digits(b, i + 3, 2) {
                    om = m
                    i += 5
                } else {
                    i += 3
                }
                guard om < 60 else { return nil }
                // Local time east of UTC is ahead of it: subtract the offset.
                offset = (oh * 3600 + om * 60) * (east ? -1 : 1)
            } else {
                return nil
            }
            guard i == b.count else { return nil }
        }
        let days = daysFromCivil(y, mo, d)
        return Double(days * 86400 + h * 3600 + mi * 60 + offset) + sec
    }

    private static func daysIn(_ m: Int, _ y: Int) -> Int {
        switch m {
        case 2: (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's algorithm).
    private static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
