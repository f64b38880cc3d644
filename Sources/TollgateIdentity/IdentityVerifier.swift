import Foundation
import JWTKit

/// Verifies app users' login tokens against the configured providers: the token's `iss`
/// (read before verification, only to choose the provider) picks the provider, whose cached
/// key set and settings then decide.
public struct IdentityVerifier: Sendable {
    let providers: [(settings: ProviderSettings, keys: JWKSCache)]

    public init(settings: AuthenticationSettings, fetch: @escaping JWKSCache.Fetch,
                clock: @escaping @Sendable () -> Date = { Date() }) {
        providers = settings.providers.map { ($0, JWKSCache(provider: $0, fetch: fetch, clock: clock)) }
    }

    /// The key set cache of the provider with `issuer` (for tests and metrics).
    public func cache(issuer: String) -> JWKSCache? {
        providers.first { $0.settings.issuer == issuer }?.keys
    }

    public func verify(_ token: String, now: Date) async throws(IdentityError) -> VerifiedIdentity {
        let header = try JWTVerifier.header(of: token)
        let issuer = try Self.unverifiedIssuer(token)
        guard let (provider, cache) = providers.first(where: { $0.settings.issuer == issuer }) else {
            throw .invalidToken("the issuer is not one this server trusts")
        }
        let isHMAC = JWTAlgorithmName(rawValue: header.algorithm)?.isHMAC ?? false
        let keys = isHMAC ? nil : try await cache.keys(for: header.keyID)
        return try await JWTVerifier.verify(token, provider: provider, keys: keys, now: now)
    }

    /// The `iss` of a token's payload, unverified.
    static func unverifiedIssuer(_ token: String) throws(IdentityError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = JWTVerifier.base64URLDecode(parts[1]),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { throw .invalidToken("the payload is malformed") }
        guard let issuer = object["iss"] as? String else { throw .invalidToken("the token has no issuer") }
        return issuer
    }
}
