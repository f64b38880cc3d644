import Foundation
import Hummingbird
import Logging
import Metrics
import TollgateIdentity

/// `RateLimits` in config.json: token-bucket limits on the token endpoint, per client address
/// and per subject. A per-minute figure of 0 turns that limit off.
///
/// ```json
/// "RateLimits": {"PerAddressPerMinute": 600, "PerAddressBurst": 600,
///                "PerSubjectPerMinute": 60, "PerSubjectBurst": 60, "MaxTrackedKeys": 65536}
/// ```
public struct RateLimitSettings: Sendable, Equatable {
    public static let keys = ["PerAddressPerMinute", "PerAddressBurst", "PerSubjectPerMinute", "PerSubjectBurst", "MaxTrackedKeys"]

    /// Requests a minute from one client address (0: unlimited). Mobile clients behind a
    /// carrier NAT share addresses, hence a generous default.
    public var perAddress = RateLimit(perMinute: 600)
    /// Requests a minute for one authenticated subject (0: unlimited).
    public var perSubject = RateLimit(perMinute: 60)
    /// Keys (addresses, subjects) each limiter tracks at most; idle ones are evicted first.
    public var maxTrackedKeys = 65_536

    public init() {}

    /// Reads the `RateLimits` member of config.json (nil: the defaults).
    static func parse(_ value: JSONValue?, file: String) throws(ConfigError) -> RateLimitSettings {
        var settings = RateLimitSettings()
        guard let value, value != .null else { return settings }
        guard case .object(let members) = value else { throw ConfigError(file: file, "RateLimits must be an object") }
        if let unknown = members.keys.filter({ !keys.contains($0) }).sorted().first {
            throw ConfigError(file: file, "RateLimits: unknown key \"\(unknown)\" (known: \(keys.joined(separator: ", ")))")
        }
        func count(_ key: String, _ defaultValue: Int, minimum: Int = 0) throws(ConfigError) -> Int {
            switch members[key] {
            case nil, .null?:
                return defaultValue
            case let given?:
                guard let number = given.integer(in: minimum...1_000_000_000_000) else {
                    throw ConfigError(file: file, "RateLimits.\(key) must be a whole number ≥ \(minimum)")
                }
                return number
            }
        }
        let addressRate = try count("PerAddressPerMinute", settings.perAddress.perMinute)
        settings.perAddress = RateLimit(perMinute: addressRate, burst: try count("PerAddressBurst", max(1, addressRate), minimum: 1))
        let subjectRate = try count("PerSubjectPerMinute", settings.perSubject.perMinute)
        settings.perSubject = RateLimit(perMinute: subjectRate, burst: try count("PerSubjectBurst", max(1, subjectRate), minimum: 1))
        settings.maxTrackedKeys = try count("MaxTrackedKeys", settings.maxTrackedKeys, minimum: 64)
        return settings
    }
}

/// The token endpoint's limits: `admit(address:)` before anything else is done for a request,
/// `admit(subject:)` once the caller's identity is known. A refusal is a 429 `Throttling`
/// answer with `Retry-After`, and one audit line.
public struct TokenRateLimits: Sendable {
    let perAddress: RateLimiter?
    let perSubject: RateLimiter?
    private let throttledByAddress = Counter(label: "tollgate_token_requests_throttled_total", dimensions: [("limit", "address")])
    private let throttledBySubject = Counter(label: "tollgate_token_requests_throttled_total", dimensions: [("limit", "subject")])

    public init(_ settings: RateLimitSettings) {
        perAddress = settings.perAddress.perMinute > 0 ? RateLimiter(limit: settings.perAddress, capacity: settings.maxTrackedKeys) : nil
        perSubject = settings.perSubject.perMinute > 0 ? RateLimiter(limit: settings.perSubject, capacity: settings.maxTrackedKeys) : nil
    }

    /// Counts one token request from `address`; throws the 429 answer when over the limit.
    public func admit(address: String, now: Date, logger: Logger) throws(TokenEndpointError) {
        guard let perAddress else { return }
        if case .limited(let retryAfter) = perAddress.check(key: address, now: now) {
            throttledByAddress.increment()
            throw Self.refusal(limit: "address", retryAfter: retryAfter, subject: nil, address: address, now: now, logger: logger)
        }
    }

    /// Counts one token request for `subject` (the authenticated app user); throws the 429
    /// answer when over the limit.
    public func admit(subject: String, address: String, now: Date, logger: Logger) throws(TokenEndpointError) {
        guard let perSubject else { return }
        if case .limited(let retryAfter) = perSubject.check(key: subject, now: now) {
            throttledBySubject.increment()
            throw Self.refusal(limit: "subject", retryAfter: retryAfter, subject: subject, address: address, now: now, logger: logger)
        }
    }

    /// The 429 answer, and its log line (one per address or subject and interval: `RefusalLog`).
    static func refusal(limit: String, retryAfter: Int, subject: String?, address: String, now: Date, logger: Logger) -> TokenEndpointError {
        RefusalLog.shared.log(
            logger, .warning, "token request refused", kind: "rate limit per \(limit)", key: subject ?? address, now: now,
            metadata: [
                "token.subject": .string(subject ?? "-"),
                "token.role": "-",
                "token.access_key_id": "-",
                "client.address": .string(address),
                "refusal.reason": .string("rate limit per \(limit) exceeded"),
                "refusal.retry_after": .stringConvertible(retryAfter),
            ]
        )
        var error = TokenEndpointError(
            .tooManyRequests, code: "Throttling",
            message: "Rate exceeded: too many token requests for this \(limit == "address" ? "client address" : "user"); retry after \(retryAfter) s"
        )
        error.headers[.retryAfter] = String(retryAfter)
        return error
    }
}
