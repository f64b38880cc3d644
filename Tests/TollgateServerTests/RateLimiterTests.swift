import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
@testable import TollgateConfig
@testable import TollgateServer
@testable import TollgateTokenService

// MARK: The token bucket, with `now` passed in

struct BucketCase: Sendable, CustomTestStringConvertible {
    let name: String
    let limit: RateLimit
    /// Request times in seconds, all for one key.
    let times: [Double]
    let expected: [RateLimitDecision]
    var testDescription: String { name }
}

private let bucketCases: [BucketCase] = [
    .init(name: "burst then refusal", limit: RateLimit(perMinute: 60, burst: 3), times: [0, 0, 0, 0],
          expected: [.allowed, .allowed, .allowed, .limited(retryAfter: 1)]),
    .init(name: "one token back per second at 60/min", limit: RateLimit(perMinute: 60, burst: 1), times: [0, 0.5, 1.0, 1.5, 2.0],
          expected: [.allowed, .limited(retryAfter: 1), .allowed, .limited(retryAfter: 1), .allowed]),
    .init(name: "Retry-After rounds up to the next token at 15/min", limit: RateLimit(perMinute: 15, burst: 1), times: [0, 0, 2, 3.5, 4],
          expected: [.allowed, .limited(retryAfter: 4), .limited(retryAfter: 2), .limited(retryAfter: 1), .allowed]),
    .init(name: "refill stops at the burst", limit: RateLimit(perMinute: 60, burst: 2), times: [0, 0, 1000, 1000, 1000],
          expected: [.allowed, .allowed, .allowed, .allowed, .limited(retryAfter: 1)]),
    .init(name: "a clock that goes back adds nothing", limit: RateLimit(perMinute: 60, burst: 1), times: [100, 50, 100.5, 101],
          expected: [.allowed, .limited(retryAfter: 1), .limited(retryAfter: 1), .allowed]),
    .init(name: "burst defaults to the per-minute figure", limit: RateLimit(perMinute: 30), times: Array(repeating: 0, count: 31) + [2],
          expected: Array(repeating: .allowed, count: 30) + [.limited(retryAfter: 2), .allowed]),
]

@Test(arguments: bucketCases)
func tokenBucket(_ c: BucketCase) {
    var table = RateLimitTable(limit: c.limit, generationCapacity: 16)
    let decisions = c.times.map { table.check(key: "k", now: $0) }
    #expect(decisions == c.expected)
}

@Test func keysHaveTheirOwnBuckets() {
    var table = RateLimitTable(limit: RateLimit(perMinute: 60, burst: 1), generationCapacity: 16)
    #expect(table.check(key: "10.0.0.1", now: 0) == .allowed)
    #expect(table.check(key: "10.0.0.1", now: 0) != .allowed)
    #expect(table.check(key: "10.0.0.2", now: 0) == .allowed, "another address is not affected")
}

@Test func aFloodOfDistinctKeysStaysBoundedAndKeepsActiveKeysThrottled() {
    var table = RateLimitTable(limit: RateLimit(perMinute: 1, burst: 1), generationCapacity: 100)
    #expect(table.check(key: "abuser", now: 0) == .allowed)
    for i in 0..<100_000 {
        let now = Double(i) / 10_000
        _ = table.check(key: "flood-\(i)", now: now)
        if i % 50 == 0 {
            #expect(table.count <= 200)
            // The abuser keeps asking: it is carried into each new generation and stays throttled.
            #expect(table.check(key: "abuser", now: now) != .allowed)
        }
    }
    #expect(table.count <= 200)
}

@Test func theShardedLimiterIsBoundedToItsCapacity() {
    let limiter = RateLimiter(limit: RateLimit(perMinute: 10), capacity: 1024)
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    for i in 0..<20_000 { _ = limiter.check(key: "198.51.\(i / 256).\(i % 256)", now: now) }
    #expect(limiter.trackedKeys <= 1024)
    #expect(limiter.trackedKeys > 0)
}

// MARK: Config

@Test func rateLimitConfigKeys() throws {
    func load(_ member: String) throws -> TollgateConfig {
        let json = #"{"AccessKeySecret": "0123456789abcdef0123456789abcdef", "PolicyFile": "p.txt""# + member + "}"
        return try TollgateConfig.parse(Data(json.utf8), path: "/x/config.json")
    }
    let defaults = try load("")
    #expect(defaults.rateLimits == RateLimitSettings())
    #expect(defaults.rateLimits.perAddress == RateLimit(perMinute: 600, burst: 600))
    #expect(defaults.rateLimits.perSubject == RateLimit(perMinute: 60, burst: 60))
    #expect(defaults.unknownKeys.isEmpty)

    let set = try load(#", "RateLimits": {"PerAddressPerMinute": 120, "PerSubjectPerMinute": 30, "PerSubjectBurst": 5, "MaxTrackedKeys": 1000}"#)
    #expect(set.rateLimits.perAddress == RateLimit(perMinute: 120, burst: 120))
    #expect(set.rateLimits.perSubject == RateLimit(perMinute: 30, burst: 5))
    #expect(set.rateLimits.maxTrackedKeys == 1000)
    #expect(set.unknownKeys.isEmpty)

    for bad in [#"[]"#, #"{"PerAddressPerMinute": -1}"#, #"{"PerAddressPerMinute": "10"}"#, #"{"PerAddressBurst": 0}"#,
                #"{"PerMinute": 10}"#, #"{"MaxTrackedKeys": 1}"#] {
        #expect(throws: ConfigError.self, "\(bad)") { try load(#", "RateLimits": "# + bad) }
    }
}

// MARK: The token endpoint

@Test func overTheLimitTheEndpointAnswers429ThrottlingWithRetryAfter() async throws {
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    let fixture = try Fixture(now: { now })
    defer { fixture.remove() }
    var config = fixture.config
    config.rateLimits.perAddress = RateLimit(perMinute: 6, burst: 2)
    let files = ConfigFiles(config: config, policies: fixture.state.snapshot.policies, contents: [:])
    let state = TollgateState(try ConfigSnapshot(files, root: fixture.state.snapshot.root, clock: { now }), clock: { now })
    let log = CapturedLog()
    let app = Application(router: buildTokenRouter(state: state), logger: log.logger())
    try await app.test(.router) { client in
        for _ in 0..<2 {
            try await client.execute(uri: "/", method: .get) { #expect($0.status == .ok) }
        }
        try await client.execute(uri: "/sts/getkey", method: .post) { response in
            #expect(response.status == .tooManyRequests)
            #expect(response.headers[.retryAfter] == "10")
            let body = String(buffer: response.body)
            #expect(body.hasPrefix(#"{"StatusCode":429,"ErrorCode":"Throttling","ErrorMessage":""#), "\(body)")
        }
        // Other routes are not limited.
        try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
    }
    let refusals = log.all.filter { $0.contains("token request refused") }
    #expect(refusals.count == 1)
    #expect(refusals.first?.contains("refusal.reason=rate limit per address exceeded") == true)
    #expect(refusals.first?.contains("client.address=") == true)
}

@Test func theSubjectLimitIsSeparateFromTheAddressLimit() throws {
    var settings = RateLimitSettings()
    settings.perSubject = RateLimit(perMinute: 60, burst: 1)
    let limits = TokenRateLimits(settings)
    let log = CapturedLog()
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    try limits.admit(subject: "alice", address: "10.0.0.1", now: now, logger: log.logger())
    #expect(throws: TokenEndpointError.self) { try limits.admit(subject: "alice", address: "10.0.0.2", now: now, logger: log.logger()) }
    try limits.admit(subject: "bob", address: "10.0.0.1", now: now, logger: log.logger())
    try limits.admit(address: "10.0.0.1", now: now, logger: log.logger())
    #expect(log.all.count == 1)
    #expect(log.text.contains("token.subject=alice"))
}

@Test func zeroTurnsALimitOff() throws {
    var settings = RateLimitSettings()
    settings.perAddress = RateLimit(perMinute: 0)
    let limits = TokenRateLimits(settings)
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    for _ in 0..<10_000 { try limits.admit(address: "10.0.0.1", now: now, logger: CapturedLog().logger()) }
}
