import Foundation
import Hummingbird
import Logging
import Metrics
import TollgateToken

/// The token endpoint: `GET`/`POST` on `/`, `/sts/getkey` and `/sts/getsts` answer the JSON the
/// OSS mobile SDKs parse. Anonymous callers get the default role with no subject.
struct TokenController: Sendable {
    static let paths: [RouterPath] = ["/", "/sts/getkey", "/sts/getsts"]

    let tokens: TokenService
    let lifetime: Int
    let policies: PolicyStore
    let clock: @Sendable () -> Date
    var rateLimits: TokenRateLimits? = nil
    let issuedCounter = Counter(label: "tollgate_tokens_issued_total", dimensions: [("role", TollgateConfig.defaultRole)])

    func addRoutes(to router: Router<TollgateRequestContext>) {
        for path in Self.paths {
            router.get(path, use: issue)
            router.post(path, use: issue)
        }
    }

    @Sendable func issue(_ request: Request, context: TollgateRequestContext) async throws -> Response {
        // First, before any work: a flood from one address costs a lookup, not a signature.
        // Once a request has a subject, `rateLimits.admit(subject:address:now:logger:)` too.
        try rateLimits?.admit(address: context.clientAddress, now: clock(), logger: context.logger)
        let role = TollgateConfig.defaultRole
        guard policies.policy(forRole: role) != nil else {
            throw TokenEndpointError(.serviceUnavailable, code: "PolicyUnavailable", message: "The role policy is not loaded")
        }
        let issued = try tokens.issue(subject: nil, role: role, duration: Int64(lifetime), now: clock())
        let expiration = Timestamp.iso8601(issued.claims.expiresAt)
        context.logger.info(
            "token issued",
            metadata: [
                "token.subject": .string(issued.claims.subject ?? "-"),
                "token.role": .string(issued.claims.role),
                "token.access_key_id": .string(issued.accessKeyId),
                "token.expiration": .string(expiration),
                "client.address": .string(context.clientAddress),
            ]
        )
        issuedCounter.increment()
        return TokenJSON.response(.ok, TokenJSON.credentials(issued, expiration: expiration))
    }
}
