import Foundation
import Hummingbird
import Logging
import Metrics
import TollgateConfig
import TollgateIdentity

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
