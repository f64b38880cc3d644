import Foundation
import TollgateDates
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address as 128 bits (IPv4-mapped IPv6 addresses are folded to IPv4).
struct IPAddress: Sendable, Hashable {
    var high: UInt64
    var low: UInt64
    var isIPv4: Bool

    init?(_ text: String) {
        if let v4 = Self.parseIPv4(text) {
            high = 0
            low = UInt64(v4)
            isIPv4 = true
            return
        }
        guard text.utf8.contains(UInt8(ascii: ":")) else { return nil }
        var a = in6_addr()
        guard inet_pton(AF_INET6, text, &a) == 1 else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        withUnsafeBytes(of: &a) { b in
            for i in 0..<8 { h = h << 8 | UInt64(b[i]) }
            for i in 8..<16 { l = l << 8 | UInt64(b[i]) }
        }
        if h == 0 && l >> 32 == 0xFFFF {
            high = 0
            low = l & 0xFFFF_FFFF
            isIPv4 = true
        } else {
            high = h
            low = l
            isIPv4 = false
        }
    }

    /// Strict dotted quad, no allocation: four decimal parts 0...255, no leading zeros.
    static func parseIPv4(_ text: String) -> UInt32? {
        var value: UInt32 = 0, part: UInt32 = 0, digits = 0, dots = 0
        var leadingZero = false
        for b in text.utf8 {
            if b >= 0x30 && b <= 0x39 {
                if digits == 1 && leadingZero { return nil }
                if digits == 0 { leadingZero = b == 0x30 }
                part = part * 10 + UInt32(b - 0x30)
                digits += 1
                if digits > 3 || part > 255 { return nil }
            } else if b == UInt8(ascii: ".") {
                guard digits > 0, dots < 3 else { return nil }
                value = value << 8 | part
                part = 0
                digits = 0
                dots += 1
            } else {
                return nil
            }
        }
        guard digits > 0, dots == 3 else { return nil }
        return value << 8 | part
    }
}

/// A CIDR block such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a /32 or /128.
struct CIDRBlock: Sendable, Hashable {
    var network: IPAddress
    var prefix: Int

    init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let bits = address.isIPv4 ? 32 : 128
        var prefix = bits
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let p = Int(parts[1]) else { return nil }
            if address.isIPv4 && parts[0].contains(":") {
                // IPv4-mapped IPv6 CIDR: the prefix counts the 96 mapping bits.
                guard p >= 96, p <= 128 else { return nil }
                prefix = p - 96
            } else {
                guard p <= bits else { return nil }
                prefix = p
            }
        }
        self.network = address
        self.prefix = prefix
    }

    func contains(_ address: IPAddress) -> Bool {
        guard address.isIPv4 == network.isIPv4 else { return false }
        if network.isIPv4 {
            guard prefix > 0 else { return true }
            let mask = UInt64(UInt32.max << UInt32(32 - prefix))
            return (address.low ^ network.low) & mask == 0
        }
        let highMask: UInt64 = prefix >= 64 ? .max : (prefix == 0 ? 0 : .max << UInt64(64 - prefix))
        let lowMask: UInt64 = prefix <= 64 ? 0 : (prefix == 128 ? .max : .max << UInt64(128 - prefix))
        return (address.high ^ network.high) & highMask == 0 && (address.low ^ network.low) & lowMask == 0
    }
}

enum ValueParsing {
    /// A JSON-style number (integer or decimal), nil otherwise.
    static func number(_ s: String) -> Double? {
        guard !s.isEmpty, s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x2B || $0 == 0x65 || $0 == 0x45 }) else { return nil }
        guard let d = Double(s), d.isFinite else { return nil }
        return d
    }

    /// `true`/`false`, any case, without allocating.
    static func bool(_ s: String) -> Bool? {
        func equalsIgnoringCase(_ word: String) -> Bool {
            s.utf8.count == word.utf8.count && zip(s.utf8, word.utf8).allSatisfy { $0 | 0x20 == $1 }
        }
        if equalsIgnoringCase("true") { return true }
        if equalsIgnoringCase("false") { return false }
        return nil
    }

    /// Seconds since the epoch from epoch seconds (`1700000000`) or ISO 8601
    /// (`2026-01-02`, `2026-01-02T03:04:05Z`, with fractional seconds or a `±hh:mm` offset).
    static func date(_ s: String) -> Double? {
        // Epoch seconds: an optional '-' and up to 12 digits.
        var digits = 0, other = false, first = true
        for c in s.utf8 {
            if c >= 0x30 && c <= 0x39 { digits += 1 } else if !(first && c == 0x2D) { other = true; break }
            first = false
        }
        if !other && digits > 0 {
            guard digits <= 12 else { return nil }
            return Double(s)
        }
        return WireDate.parseISO8601(s)
    }
}
