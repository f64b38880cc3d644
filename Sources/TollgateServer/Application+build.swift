import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import TollgateIdentity
import TollgateStore
import TollgateToken

/// Everything a running Tollgate shares: the config, the token keys and the role policies.
public struct TollgateState: Sendable {
    public let config: TollgateConfig
    public let root: RootCredentials
    public let tokens: TokenService
    public let policies: PolicyStore
    /// Verifies app users' login tokens; nil without an `Authentication` section.
    public let identities: IdentityVerifier?
    public let clock: @Sendable () -> Date
    /// Revoked credentials (`tollgate serve` opens them in the data directory); nil: none, and
    /// no admin endpoint.
    public var revocations: RevocationStore?
    /// Where issued tokens are recorded (`tollgate serve` keeps it in the data directory, and
    /// runs it as a service); nil: only the log line.
    public var tokenAudit: TokenAuditLog?
    public let rateLimits: TokenRateLimits

    /// Verifies signatures with the root secret or a vended credential's, and refuses revoked ones.
    var authenticator: Authenticator { Authenticator(root: root, tokens: tokens, revocations: revocations) }

    public init(config: TollgateConfig, root: RootCredentials, policies: PolicyStore, clock: @escaping @Sendable () -> Date = { Date() }) throws {
        self.config = config
        self.root = root
        self.tokens = try TokenService(rootSecret: root.accessKeySecret, previousSecrets: config.previousAccessKeySecrets)
        self.policies = policies
        self.identities = config.authentication.map { IdentityVerifier(settings: $0, fetch: TokenController.fetch, post: TokenController.post, clock: clock) }
        self.clock = clock
        self.rateLimits = TokenRateLimits(config.rateLimits)
    }
}

/// The token listener's router (port 7080): token endpoint, `/healthz`, `/metrics`.
public func buildTokenRouter(state: TollgateState, metrics: PrometheusCollectorRegistry? = nil) -> Router<TollgateRequestContext> {
    let router = Router(context: TollgateRequestContext.self)
    router.add(middleware: TokenErrorMiddleware())
    TokenController(tokens: state.tokens, lifetime: state.config.tokenExpireTime, policies: state.policies,
                    authentication: state.config.authentication, identities: state.identities,
                    roleMaxSessionSeconds: state.config.roleMaxSessionSeconds,
                    sts: STSAPI(authenticator: state.authenticator, roles: Set(state.config.roles.keys)),
                    rateLimits: state.rateLimits, audit: state.tokenAudit, clock: state.clock)
        .addRoutes(to: router)
    if let revocations = state.revocations {
        AdminController(root: state.root, revocations: revocations, clock: state.clock).addRoutes(to: router)
    }
    router.get("/healthz") { _, _ in
        var json = JSONObjectWriter(capacity: 32)
        json.add("status", "ok")
        json.add("roles", Int64(state.policies.roleNames.count))
        return TokenJSON.response(.ok, json.finish())
    }
    if let metrics {
        router.get("/metrics") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer()))
            )
        }
    }
    return router
}

/// The token listener as a Hummingbird application (a swift-service-lifecycle `Service`).
public func buildTokenApplication(state: TollgateState, metrics: PrometheusCollectorRegistry?, logger: Logger) -> some ApplicationProtocol {
    Application(
        router: buildTokenRouter(state: state, metrics: metrics),
        server: .http1(configuration: .init(idleTimeout: idleTimeout(state.config))),
        configuration: .init(address: .hostname(state.config.listenAddress, port: state.config.port), serverName: "tollgate"),
        logger: logger
    )
}

/// Both listeners close a connection that has been idle this long: between requests, and
/// also while its request head or body stalls (Hummingbird's idle timer restarts only when a
/// whole head, a body part or a response end passes, so a head sent a byte at a time does
/// not keep it open). A response being written is never cut.
func idleTimeout(_ config: TollgateConfig) -> TimeAmount {
    .seconds(Int64(config.idleTimeoutSeconds))
}

/// The object gateway's responder (port 9000).
public func buildGatewayResponder(state: TollgateState, store: any ObjectStore) -> some HTTPResponder<TollgateRequestContext> {
    Gateway(
        store: store,
        authenticator: state.authenticator,
        policies: state.policies,
        baseDomain: state.config.gatewayBaseDomain,
        clock: state.clock
    )
}

/// The object gateway as a Hummingbird application.
public func buildGatewayApplication(state: TollgateState, store: any ObjectStore, logger: Logger) -> some ApplicationProtocol {
    Application(
        responder: buildGatewayResponder(state: state, store: store),
        server: .http1(configuration: .init(additionalChannelHandlers: [ExpectContinueHandler()], idleTimeout: idleTimeout(state.config))),
        configuration: .init(address: .hostname(state.config.gatewayAddress, port: state.config.gatewayPort), serverName: "tollgate"),
        logger: logger
    )
}

/// Opens the embedded store in the data directory (running crash recovery) and creates the
/// configured buckets. A full disk is logged when writes start failing and when they succeed
/// again, not on every refused request.
public func openStore(config: TollgateConfig, logger: Logger) async throws -> LocalObjectStore {
    let store = try LocalObjectStore(configuration: .init(
        directory: (config.dataDirectory as NSString).appendingPathComponent("store"),
        maxUploadsPerBucket: config.maxMultipartUploadsPerBucket,
        storageFullChanged: { full, detail in
            if full {
                logger.error("storage full: writes refused with 507 XMinioStorageFull until space is freed", metadata: ["store.error": "\(detail)"])
            } else {
                logger.notice("storage writable again")
            }
        }
    ))
    logger.info("object store opened", metadata: ["store.directory": "\(config.dataDirectory)/store", "store.recovery": "\(store.recovery)"])
    try await store.ensureBuckets(config.buckets)
    return store
}
