import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import TollgateStore
import TollgateToken

/// Everything a running Tollgate shares: the config, the token keys and the role policies.
public struct TollgateState: Sendable {
    public let config: TollgateConfig
    public let root: RootCredentials
    public let tokens: TokenService
    public let policies: PolicyStore
    public let clock: @Sendable () -> Date
    /// Revoked credentials (`tollgate serve` opens them in the data directory); nil: none, and
    /// no admin endpoint.
    public var revocations: RevocationStore?
    public let rateLimits: TokenRateLimits

    public init(config: TollgateConfig, root: RootCredentials, policies: PolicyStore, clock: @escaping @Sendable () -> Date = { Date() }) throws {
        self.config = config
        self.root = root
        self.tokens = try TokenService(rootSecret: root.accessKeySecret, previousSecrets: config.previousAccessKeySecrets)
        self.policies = policies
        self.clock = clock
        self.rateLimits = TokenRateLimits(config.rateLimits)
    }
}

/// The token listener's router (port 7080): token endpoint, `/healthz`, `/metrics`.
public func buildTokenRouter(state: TollgateState, metrics: PrometheusCollectorRegistry? = nil) -> Router<TollgateRequestContext> {
    let router = Router(context: TollgateRequestContext.self)
    router.add(middleware: TokenErrorMiddleware())
    TokenController(tokens: state.tokens, lifetime: state.config.tokenExpireTime, policies: state.policies, clock: state.clock,
                    rateLimits: state.rateLimits)
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
        configuration: .init(address: .hostname(state.config.listenAddress, port: state.config.port), serverName: "tollgate"),
        logger: logger
    )
}

/// The object gateway's responder (port 9000).
public func buildGatewayResponder(state: TollgateState, store: any ObjectStore) -> some HTTPResponder<TollgateRequestContext> {
    Gateway(
        store: store,
        authenticator: Authenticator(root: state.root, tokens: state.tokens, revocations: state.revocations),
        policies: state.policies,
        baseDomain: state.config.gatewayBaseDomain,
        clock: state.clock
    )
}

/// The object gateway as a Hummingbird application.
public func buildGatewayApplication(state: TollgateState, store: any ObjectStore, logger: Logger) -> some ApplicationProtocol {
    Application(
        responder: buildGatewayResponder(state: state, store: store),
        server: .http1(configuration: .init(additionalChannelHandlers: [ExpectContinueHandler()])),
        configuration: .init(address: .hostname(state.config.gatewayAddress, port: state.config.gatewayPort), serverName: "tollgate"),
        logger: logger
    )
}

/// Opens the embedded store in the data directory (running crash recovery) and creates the
/// configured buckets.
public func openStore(config: TollgateConfig, logger: Logger) async throws -> LocalObjectStore {
    let store = try LocalObjectStore(directory: (config.dataDirectory as NSString).appendingPathComponent("store"))
    logger.info("object store opened", metadata: ["store.directory": "\(config.dataDirectory)/store", "store.recovery": "\(store.recovery)"])
    try await store.ensureBuckets(config.buckets)
    return store
}
