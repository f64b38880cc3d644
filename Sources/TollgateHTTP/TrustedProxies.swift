#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address as 16 bytes: IPv4 as its v4-mapped IPv6 form (`::ffff:a.b.c.d`), so
/// one comparison covers both families and a v4-mapped peer matches an IPv4 range.
package struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    /// `192.0.2.1`, `2001:db8::1` or `::ffff:192.0.2.1`; nil for anything else.
    init?(_ text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        let string = String(text)
        var v4 = in_addr()
        if inet_pton(AF_INET, string, &v4) == 1 {
            bytes = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] + withUnsafeBytes(of: v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, string, &v6) == 1 else { return nil }
        bytes = withUnsafeBytes(of: v6) { Array($0) }
    }

    var isV4: Bool { bytes[..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) }

    /// Dotted quad for IPv4 (and v4-mapped IPv6), the shortest IPv6 form otherwise: one text per
    /// address, so rate limits and logs never count one client twice.
    package var description: String {
        if isV4 { return bytes[12...].map { String($0) }.joined(separator: ".") }
        var v6 = in6_addr()
        withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count)) != nil else { return "-" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// `TrustedProxies` in config.json: the addresses and ranges of the reverse proxies in front of
/// Tollgate. Only a request whose TCP peer is one of them may name the client with
/// `Forwarded` (RFC 7239 `for=`/`proto=`) or `X-Forwarded-For` and `X-Forwarded-Proto`. Pure.
public struct TrustedProxies: Sendable {
    /// An address and prefix length (in the 128-bit space; an IPv4 `/n` is `/96+n`).
    struct Range: Sendable {
        let network: IPAddress
        let prefix: Int

        /// `a.b.c.d`, `a.b.c.d/n` (0-32), `v6`, `v6/n` (0-128).
        init?(_ text: String) {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = IPAddress(parts[0]) else { return nil }
            let width = address.isV4 && !parts[0].contains(":") ? 32 : 128
            var prefix = width
            if parts.count == 2 {
                guard parts[1].utf8.count <= 3, parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                      let length = Int(parts[1]), length <= width else { return nil }
                prefix = length
            }
            self.network = address
            self.prefix = prefix + (128 - width)
        }

        func contains(_ address: IPAddress) -> Bool {
            var remaining = prefix
            for (a, b) in zip(network.bytes, address.bytes) where remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if a & mask != b & mask { return false }
                remaining -= 8
            }
            return true
        }
    }

    /// Longer `Forwarded`/`X-Forwarded-For` values, or more hops, are ignored as malformed.
    public static let maximumHeaderLength = 2048
    public static let maximumHops = 32

    let ranges: [Range]

    public static let none = TrustedProxies(ranges: [])

    private init(ranges: [Range]) { self.ranges = ranges }

    /// Parses the entries; throws the first one that is not an address or CIDR range.
    public init(_ entries: [String]) throws(InvalidEntry) {
        var ranges: [Range] = []
        for entry in entries {
            guard let range = Range(entry) else { throw InvalidEntry(entry: entry) }
            ranges.append(range)
        }
        self.ranges = ranges
    }

    public struct InvalidEntry: Error {
        public let entry: String
    }

    public var isEmpty: Bool { ranges.isEmpty }

    func trusts(_ address: IPAddress) -> Bool { ranges.contains { $0.contains(address) } }

    /// Who the client is and whether it reached the first proxy over HTTPS.
    public struct Client: Equatable, Sendable {
        /// Normalised address text; nil: the peer (the headers were not honoured).
        public let address: String?
        /// What the trusted proxy says about the client's protocol; nil: it says nothing.
        public let https: Bool?
        /// Why forwarding headers from a trusted peer were ignored, for a debug log line.
        public let ignored: String?

        static let peer = Client(address: nil, https: nil, ignored: nil)
    }

    /// The client behind `peer`: when `peer` is trusted, the right-most address of the chain
    /// (the forwarded addresses, then the peer) that is not itself a trusted proxy, or the
    /// left-most when all are. `Forwarded` takes precedence over `X-Forwarded-For`; a malformed
    /// or oversized header is ignored and the peer is the client. `proto` comes from the chosen
    /// `Forwarded` element, or from the right-most `X-Forwarded-Proto` value (set by the
    /// nearest proxy).
    public func client(peer: String?, forwarded: [String], forwardedFor: [String], forwardedProto: [String]) -> Client {
        guard !ranges.isEmpty, let peer = peer.flatMap({ IPAddress($0) }), trusts(peer) else { return .peer }
        var hops: [(address: IPAddress, proto: Substring?)] = []
        if !forwarded.isEmpty {
            guard let parsed = Self.parseForwarded(forwarded) else { return Client(address: nil, https: nil, ignored: "malformed Forwarded") }
            hops = parsed
        } else if !forwardedFor.isEmpty {
            guard let parsed = Self.parseForwardedFor(forwardedFor) else {
                return Client(address: nil, https: nil, ignored: "malformed X-Forwarded-For")
            }
            let proto = Self.listItems(forwardedProto)?.last
            hops = parsed.map { ($0, proto) }
        } else if let proto = Self.listItems(forwardedProto)?.last {
            return Client(address: nil, https: proto.lowercased() == "https", ignored: nil)
        }
        guard let client = hops.last(where: { !trusts($0.address) }) ?? hops.first else { return .peer }
        return Client(address: client.address.description, https: client.proto.map { $0.lowercased() == "https" }, ignored: nil)
    }

    /// The comma-separated items of a header's lines, in order; nil when oversized.
    static func listItems(_ lines: [String]) -> [Substring]? {
        guard lines.reduce(0, { $0 + $1.utf8.count }) <= maximumHeaderLength else { return nil }
        let items = lines.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingSpaces }
        guard items.count <= maximumHops else { return nil }
        return items
    }

    /// `X-Forwarded-For: client, proxy1, proxy2`: each an address, optionally `[v6]`, with a port.
    static func parseForwardedFor(_ lines: [String]) -> [IPAddress]? {
        guard let items = listItems(lines) else { return nil }
        var addresses: [IPAddress] = []
        for item in items {
            guard let address = node(item) else { return nil }
            addresses.append(address)
        }
        return addresses
    }

    /// RFC 7239 `Forwarded: for=192.0.2.60;proto=https, for="[2001:db8::1]:4711"`: every
    /// element must have a `for=` that is an address (`unknown` and obfuscated names are not).
    static func parseForwarded(_ lines: [String]) -> [(address: IPAddress, proto: Substring?)]? {
        guard let elements = listItems(lines) else { return nil }
        var hops: [(address: IPAddress, proto: Substring?)] = []
        for element in elements {
            var address: IPAddress?
            var proto: Substring?
            for pair in element.split(separator: ";", omittingEmptySubsequences: false) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { return nil }
                var value = parts[1].trimmingSpaces
                if value.hasPrefix("\"") {
                    guard value.count >= 2, value.hasSuffix("\"") else { return nil }
                    value = value.dropFirst().dropLast()
                    guard !value.contains("\\"), !value.contains("\"") else { return nil }
                }
                switch parts[0].trimmingSpaces.lowercased() {
                case "for":
                    guard address == nil, let parsed = node(value) else { return nil }
                    address = parsed
                case "proto":
                    guard proto == nil, !value.isEmpty else { return nil }
                    proto = value
                default:
                    continue
                }
            }
            guard let address else { return nil }
            hops.append((address, proto))
        }
        return hops
    }

    /// An address, `[v6]`, `[v6]:port` or `v4:port`.
    static func node(_ text: Substring) -> IPAddress? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || Self.isPort(rest) else { return nil }
            let inner = text[text.index(after: text.startIndex)..<close]
            guard inner.contains(":") else { return nil }
            return IPAddress(inner)
        }
        if let colon = text.firstIndex(of: ":"), text.lastIndex(of: ":") == colon {
            guard Self.isPort(text[colon...]) else { return nil }
            guard let address = IPAddress(text[..<colon]), address.isV4 else { return nil }
            return address
        }
        return IPAddress(text)
    }

    /// `:1234`
    private static func isPort(_ text: Substring) -> Bool {
        let digits = text.dropFirst()
        return text.first == ":" && (1...5).contains(digits.utf8.count) && digits.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }
}

package extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
