import Foundation
import JWTKit

/// A provider's key set, fetched and kept fresh.
///
/// - Fetched on first use, and again every `refreshInterval`.
/// - Fetched again when a token names a `kid` the set does not have (the provider rotated its
///   keys), but at most once per `unknownKeyCooldown`: a flood of tokens with made-up kids costs
///   the provider one request per cooldown, not one per token.
/// - When a fetch fails, the last good set keeps serving; only with no set at all is the caller
///   refused (`IDPCommunicationError`).
/// - Concurrent callers share one fetch in flight.
public actor JWKSCache {
    public typealias Fetch = @Sendable (_ url: String) async throws -> [UInt8]

    let provider: ProviderSettings
    let fetch: Fetch
    let refreshInterval: TimeInterval
    let unknownKeyCooldown: TimeInterval
    let clock: @Sendable () -> Date

    private var keys: JWKS?
    private var fetchedAt: Date?
    private var lastAttempt: Date?
    private var inFlight: Task<JWKS, any Error>?
    private var jwksURL: String?
    /// Fetches made so far (for tests and metrics).
    public private(set) var fetchCount = 0

    /// The largest JWKS or discovery document read.
    public static let maxDocumentBytes = 1 << 20

    public init(provider: ProviderSettings, fetch: @escaping Fetch, refreshInterval: TimeInterval = 3600,
                unknownKeyCooldown: TimeInterval = 30, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.provider = provider
        self.fetch = fetch
        self.refreshInterval = refreshInterval
        self.unknownKeyCooldown = unknownKeyCooldown
        self.clock = clock
        self.jwksURL = provider.jwksURL
    }

    /// The key set to verify a token whose header names `kid`.
    public func keys(for kid: String?) async throws(IdentityError) -> JWKS {
        let now = clock()
        let stale = fetchedAt.map { now.timeIntervalSince($0) >= refreshInterval } ?? true
        let unknown = kid.map { kid in !(keys?.keys.contains { $0.keyIdentifier?.string == kid } ?? false) } ?? false
        let mayFetch = lastAttempt.map { now.timeIntervalSince($0) >= unknownKeyCooldown } ?? true
        if keys == nil || (stale && mayFetch) || (unknown && mayFetch) {
            do {
                try await refresh()
            } catch {
                guard let keys else { throw error }
                return keys
            }
        }
        guard let keys else { throw .communication("no key set") }
        return keys
    }

    private func refresh() async throws(IdentityError) {
        lastAttempt = clock()
        let task: Task<JWKS, any Error>
        if let inFlight {
            task = inFlight
        } else {
            task = Task { try await self.download() }
            inFlight = task
        }
        defer { inFlight = nil }
        do {
            keys = try await task.value
            fetchedAt = clock()
        } catch let error as IdentityError {
            throw error
        } catch {
            throw .communication("\(error)")
        }
    }

    private func download() async throws -> JWKS {
        fetchCount += 1
        if jwksURL == nil, let discovery = provider.discoveryURL {
            let document = try await fetch(discovery)
            guard let object = try? JSONSerialization.jsonObject(with: Data(document)) as? [String: Any],
                  let uri = object["jwks_uri"] as? String
            else { throw IdentityError.communication("the discovery document has no jwks_uri") }
            if let issuer = object["issuer"] as? String, issuer != provider.issuer {
                throw IdentityError.communication("the discovery document names the issuer \(issuer), not \(provider.issuer)")
            }
            jwksURL = uri
        }
        guard let url = jwksURL else { throw IdentityError.communication("no JWKSURL or DiscoveryURL") }
        let body = try await fetch(url)
        guard let jwks = try? JSONDecoder().decode(JWKS.self, from: Data(body)) else {
            throw IdentityError.communication("the JWKS at \(url) is not a JSON Web Key Set")
        }
        return jwks
    }
}
