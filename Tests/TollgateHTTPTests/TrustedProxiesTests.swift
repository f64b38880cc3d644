import Testing
@testable import TollgateHTTP

@Test("ranges match IPv4, IPv6 and v4-mapped addresses at every prefix edge", arguments: [
    ("10.0.0.0/8", "10.255.1.2", true), ("10.0.0.0/8", "11.0.0.1", false),
    ("0.0.0.0/0", "203.0.113.7", true), ("0.0.0.0/0", "2001:db8::1", false),
    ("192.0.2.7/32", "192.0.2.7", true), ("192.0.2.7/32", "192.0.2.6", false), ("192.0.2.7", "192.0.2.7", true),
    ("192.0.2.128/25", "192.0.2.200", true), ("192.0.2.128/25", "192.0.2.127", false),
    ("127.0.0.1", "::ffff:127.0.0.1", true), ("::ffff:10.0.0.0/104", "10.9.9.9", true),
    ("::/0", "2001:db8::1", true), ("::/0", "198.51.100.1", true),
    ("2001:db8::/32", "2001:db8:ffff::1", true), ("2001:db8::/32", "2001:db9::1", false),
    ("2001:db8::1/128", "2001:db8::1", true), ("2001:db8::1/128", "2001:db8::2", false), ("::1", "::1", true),
    ("fd00::/8", "fcff::1", false), ("fc00::/7", "fdff::1", true),
])
func rangeMatching(range: String, address: String, expected: Bool) throws {
    let proxies = try TrustedProxies([range])
    #expect(proxies.trusts(try #require(IPAddress(address))) == expected)
}

@Test("invalid entries are refused", arguments: [
    "", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0/8", "host.example", "10.0.0.0/8/8", "2001:db8::/+3", "1.2.3.4 ",
])
func invalidEntries(entry: String) {
    #expect(throws: TrustedProxies.InvalidEntry.self) { try TrustedProxies([entry]) }
}

private let proxies = try! TrustedProxies(["127.0.0.1", "10.0.0.0/8", "fd00::/8"])

/// Peer, Forwarded, X-Forwarded-For, X-Forwarded-Proto → client address (nil: the peer), https.
private let clientCases: [(String, [String], [String], [String], String?, Bool?)] = [
    // Untrusted peer: every header is ignored.
    ("198.51.100.9", [], ["203.0.113.7"], ["https"], nil, nil),
    // Trusted peer, one client.
    ("127.0.0.1", [], ["203.0.113.7"], [], "203.0.113.7", nil),
    ("127.0.0.1", [], ["203.0.113.7"], ["https"], "203.0.113.7", true),
    ("127.0.0.1", [], ["203.0.113.7"], ["http"], "203.0.113.7", false),
    // A client that sends its own X-Forwarded-For cannot choose its address: the proxy appends.
    ("127.0.0.1", [], ["1.1.1.1, 203.0.113.7"], [], "203.0.113.7", nil),
    ("127.0.0.1", [], ["1.1.1.1", "203.0.113.7, 10.1.1.1"], [], "203.0.113.7", nil),
    // All trusted: the left-most.
    ("127.0.0.1", [], ["10.2.2.2, 10.1.1.1"], [], "10.2.2.2", nil),
    // Ports, brackets, IPv6, v4-mapped peers; normalised text.
    ("127.0.0.1", [], ["203.0.113.7:5123"], [], "203.0.113.7", nil),
    ("127.0.0.1", [], ["[2001:DB8::0:1]:443"], [], "2001:db8::1", nil),
    ("127.0.0.1", [], ["2001:db8::1"], [], "2001:db8::1", nil),
    ("127.0.0.1", [], ["::ffff:203.0.113.7"], [], "203.0.113.7", nil),
    ("::ffff:127.0.0.1", [], ["203.0.113.7"], [], "203.0.113.7", nil),
    ("fd12::1", [], ["203.0.113.7"], [], "203.0.113.7", nil),
    // Only X-Forwarded-Proto.
    ("127.0.0.1", [], [], ["https"], nil, true),
    ("198.51.100.9", [], [], ["https"], nil, nil),
    // RFC 7239 Forwarded, which wins over X-Forwarded-For.
    ("127.0.0.1", ["for=203.0.113.7;proto=https"], ["1.1.1.1"], ["http"], "203.0.113.7", true),
    ("127.0.0.1", [#"for="[2001:db8::17]:4711";proto=http, for=10.0.0.5"#], [], [], "2001:db8::17", false),
    ("127.0.0.1", ["For=198.51.100.1, for=203.0.113.7;by=10.0.0.1;host=example.com"], [], [], "203.0.113.7", nil),
    ("127.0.0.1", [#"for="203.0.113.7:80""#], [], [], "203.0.113.7", nil),
    // Malformed or unhelpful headers: the peer.
    ("127.0.0.1", [], ["garbage"], ["https"], nil, nil),
    ("127.0.0.1", [], ["203.0.113.7, "], [], nil, nil),
    ("127.0.0.1", [], ["203.0.113.7:99999999"], [], nil, nil),
    ("127.0.0.1", [], ["2001:db8::1:443"], [], "2001:db8::1:443", nil),
    ("127.0.0.1", [], ["[203.0.113.7]"], [], nil, nil),
    ("127.0.0.1", ["for=unknown"], [], [], nil, nil),
    ("127.0.0.1", ["for=_hidden;proto=https"], [], [], nil, nil),
    ("127.0.0.1", ["proto=https"], [], [], nil, nil),
    ("127.0.0.1", ["for=203.0.113.7;for=1.1.1.1"], [], [], nil, nil),
    ("127.0.0.1", [#"for="203.0.113.7"#], [], [], nil, nil),
    ("127.0.0.1", ["for"], [], [], nil, nil),
]

@Test("the client is the right-most untrusted address, only behind a trusted peer", arguments: clientCases)
func clients(peer: String, forwarded: [String], forwardedFor: [String], proto: [String], address: String?, https: Bool?) {
    let client = proxies.client(peer: peer, forwarded: forwarded, forwardedFor: forwardedFor, forwardedProto: proto)
    #expect(client.address == address)
    #expect(client.https == https)
}

@Test func oversizedChainsAreIgnored() {
    let long = Array(repeating: "203.0.113.7", count: TrustedProxies.maximumHops + 1).joined(separator: ",")
    let client = proxies.client(peer: "127.0.0.1", forwarded: [], forwardedFor: [long], forwardedProto: [])
    #expect(client.address == nil)
    #expect(client.ignored == "malformed X-Forwarded-For")
    let padded = String(repeating: " ", count: TrustedProxies.maximumHeaderLength) + "203.0.113.7"
    #expect(proxies.client(peer: "127.0.0.1", forwarded: [padded], forwardedFor: [], forwardedProto: []).address == nil)
    let fits = Array(repeating: "203.0.113.7", count: TrustedProxies.maximumHops).joined(separator: ",")
    #expect(proxies.client(peer: "127.0.0.1", forwarded: [], forwardedFor: [fits], forwardedProto: []).address == "203.0.113.7")
}

@Test func noTrustedProxiesMeansThePeerAlways() {
    let client = TrustedProxies.none.client(peer: "127.0.0.1", forwarded: ["for=203.0.113.7"], forwardedFor: ["203.0.113.7"], forwardedProto: ["https"])
    #expect(client == TrustedProxies.Client(address: nil, https: nil, ignored: nil))
    #expect(proxies.client(peer: nil, forwarded: [], forwardedFor: ["203.0.113.7"], forwardedProto: []).address == nil)
}
