import Foundation
import TollgateCache
import JWTKit
import Synchronization

/// Verifies app users' login tokens against the configured providers: the token's `iss`
/// (read before verification, only to choose the provider) picks the provider, whose cached
/// key set and settings then decide.
public struct IdentityVerifier: Sendable {
    let providers: [(settings: ProviderSettings, keys: JWKSCache)]
    let verified = VerifiedTokens()

    let webhook: Webhook?

    /// `keySetsFrom`: the verifier this one replaces (a config reload); the key set cache of each
    /// provider whose settings did not change is kept, so a reload fetches nothing again.
    public init(settings: AuthenticationSettings, fetch: @escaping JWKSCache.Fetch, post: Webhook.Post? = nil,
                clock: @escaping @Sendable () -> Date = { Date() }, keySetsFrom previous: IdentityVerifier? = nil) {
        providers = settings.providers.map { provider in
            let kept = previous?.providers.first { $0.settings == provider }?.keys
            return (provider, kept ?? JWKSCache(provider: provider, fetch: fetch, clock: clock))
        }
        if let settings = settings.webhook, let post {
            webhook = Webhook(settings: settings, post: post)
        } else {
            webhook = nil
        }
    }

    /// The key set cache of the provider with `issuer` (for tests and metrics).
    public func cache(issuer: String) -> JWKSCache? {
        providers.first { $0.settings.issuer == issuer }?.keys
    }

    public func verify(_ token: String, now: Date) async throws(IdentityError) -> VerifiedIdentity {
        if let identity = verified.lookup(token, now: now) { return identity }
        let identity = try await verifyAfresh(token, now: now)
        if identity.issuer != "webhook" { verified.insert(token, identity) }  // the webhook keeps its own, shorter cache
        return identity
    }

    /// A provider's JWT (its `iss` names a provider) goes to the provider; any other token to the
    /// webhook, when there is one.
    func verifyAfresh(_ token: String, now: Date) async throws(IdentityError) -> VerifiedIdentity {
        let issuer = try? Self.unverifiedIssuer(token)
        guard let (provider, cache) = providers.first(where: { $0.settings.issuer == issuer }) else {
            if let webhook { return try await webhook.verify(token, now: now) }
            _ = try JWTVerifier.header(of: token)
            throw .invalidToken(issuer == nil ? "the payload is malformed" : "the issuer is not one this server trusts")
        }
        let header = try JWTVerifier.header(of: token)
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

/// Login tokens that verified, until they expire: an app presents the same ID token for every
/// refresh until it expires, and checking a signature costs more than the rest of issuing. The
/// expiry (and nothing else) is checked again on each use; a key the provider withdraws stops
/// new tokens at once and cached ones at their expiry. Bounded (`BoundedCache`), and only
/// tokens of ordinary size are kept.
final class VerifiedTokens: Sendable {
    static let capacity = 4096
    static let maxTokenLength = 4096
    private let entries = BoundedCache<String, VerifiedIdentity>(capacity: capacity)

    func lookup(_ token: String, now: Date) -> VerifiedIdentity? {
        guard let identity = entries.value(for: token) else { return nil }
        return now < identity.expiresAt ? identity : nil
    }

    func insert(_ token: String, _ identity: VerifiedIdentity) {
        guard token.utf8.count <= Self.maxTokenLength else { return }
        entries.insert(identity, for: token)
    }
}
