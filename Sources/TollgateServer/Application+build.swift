import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import Prometheus
import TollgateConfig
import TollgateGateway
import TollgateHTTP
import TollgateIdentity
import TollgateJSON
import TollgateStore
import TollgateTokenService

/// Everything a running Tollgate shares: the configuration in force, which a reload replaces,
/// and what outlives reloads.
public struct TollgateState: Sendable {
    public let live: LiveConfig
    public let clock: @Sendable () -> Date
    /// Revoked credentials (`tollgate serve` opens them in the data directory); nil: none, and
    /// no admin endpoint.
    public var revocations: RevocationStore?
    /// Where issued tokens are recorded (`tollgate serve` keeps it in the data directory, and
    /// runs it as a service); nil: only the log line.
    public var tokenAudit: TokenAuditLog?
    /// The object store, whose health `/healthz` reports as `backend`; nil: not reported (and
    /// no mobile Storage API).
    public var store: (any ObjectStore)?
    /// The mobile collections' change feeds, which the gateway writes to as well; nil: none kept.
    public var changes: ChangeFeed?

    public init(live: LiveConfig, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.live = live
        self.clock = clock
    }

    public init(_ snapshot: ConfigSnapshot, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.init(live: LiveConfig(snapshot), clock: clock)
    }

    /// The configuration in force now.
    public var snapshot: ConfigSnapshot { live.current }
}

/// The swift-metrics factory `tollgate serve` bootstraps: Prometheus, with the gateway's
/// request duration histogram in buckets from half a millisecond to a minute.
public func makeMetricsFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
    var factory = PrometheusMetricsFactory(registry: registry)
    factory.durationHistogramBuckets[GatewayMetrics.durationLabel] = GatewayMetrics.durationBuckets
    factory.durationHistogramBuckets[UpstreamMetrics.durationLabel] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30),
    ]
    return factory
}

/// The token listener's router (port 7080): token endpoint, the mobile Storage API, `/healthz`, `/metrics`.
public func buildTokenRouter(state: TollgateState, metrics: PrometheusCollectorRegistry? = nil) -> Router<TollgateRequestContext> {
    let router = Router(context: TollgateRequestContext.self)
    router.add(middleware: TokenCORSMiddleware(live: state.live))
    router.add(middleware: ClientMiddleware(tls: state.snapshot.config.tls != nil, live: state.live))
    router.add(middleware: TokenErrorMiddleware())
    TokenRoutes(live: state.live, revocations: state.revocations, audit: state.tokenAudit, clock: state.clock).addRoutes(to: router)
    if let store = state.store {
        MobileStorageAPI(live: state.live, store: store, changes: state.changes, revocations: state.revocations, clock: state.clock).addRoutes(to: router)
    }
    if let revocations = state.revocations {
        AdminController(root: state.snapshot.root, revocations: revocations, clock: state.clock).addRoutes(to: router)
    }
    router.get("/healthz") { _, _ in
        var json = JSONObjectWriter(capacity: 48)
        json.add("status", "ok")
        json.add("roles", Int64(state.snapshot.policies.count))
        // The process serves either way (a backend that is down is answered with 503s at once):
        // the backend's state is reported, not made the status, so that a load balancer does
        // not drop every instance of a cluster whose storage is down.
        if let store = state.store { json.add("backend", await store.health().word) }
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

/// The token listener as a Hummingbird application (a swift-service-lifecycle `Service`);
/// HTTPS when `certificates` (the config's `TLS`) are given.
public func buildTokenApplication(state: TollgateState, certificates: TLSCertificates?, metrics: PrometheusCollectorRegistry?,
                                  logger: Logger) throws -> some ApplicationProtocol {
    let config = state.snapshot.config
    return Application(
        router: buildTokenRouter(state: state, metrics: metrics),
        server: try pinnedHTTPServer(.init(idleTimeout: idleTimeout(config)), certificates: certificates),
        configuration: .init(address: .hostname(config.listenAddress, port: config.port), serverName: Gateway.serverName),
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

/// The object gateway's responder (port 9000). `sendsFiles`: the connections it answers are
/// plain TCP, so file-backed bodies go out with sendfile (`HTTP1Codec.SendFile`).
public func buildGatewayResponder(state: TollgateState, store: any ObjectStore, sendsFiles: Bool = false) -> some HTTPResponder<TollgateRequestContext> {
    makeGateway(state: state, store: store, sendsFiles: sendsFiles)
}

func makeGateway(state: TollgateState, store: any ObjectStore, sendsFiles: Bool) -> Gateway {
    Gateway(store: store, capabilities: store.capabilities, live: state.live, revocations: state.revocations, tls: state.snapshot.config.gatewayTLS != nil,
            sendsFiles: sendsFiles, changes: state.changes, clock: state.clock)
}

/// The object gateway as a Hummingbird application; HTTPS when `certificates` (the config's
/// `GatewayTLS`) are given.
public func buildGatewayApplication(state: TollgateState, store: any ObjectStore, certificates: TLSCertificates?,
                                    logger: Logger) throws -> some ApplicationProtocol {
    let config = state.snapshot.config
    // TLS encrypts in user space: files are sent with sendfile on plain TCP only.
    let sendsFiles = certificates == nil
    let gateway = makeGateway(state: state, store: store, sendsFiles: sendsFiles)
    return Application(
        responder: gateway,
        // TLS sits below HTTP: these handlers see decrypted HTTP parts, as without TLS. The fast
        // path answers no request that expects 100-continue, so ExpectContinueHandler, after it,
        // sees every request that may.
        server: try pinnedHTTPServer(
            .init(idleTimeout: idleTimeout(config)),
            certificates: certificates,
            largestRead: store.capabilities.uploadReadSize,
            beforeResponder: { logger in [GatewayFastPath(gateway: gateway, logger: logger), ExpectContinueHandler()] }
        ),
        configuration: .init(address: .hostname(config.gatewayAddress, port: config.gatewayPort), serverName: Gateway.serverName),
        logger: logger
    )
}


/// HTTP/1 (in TLS when `certificates` are given), each connection's task pinned to its event
/// loop; see `EventLoopPinnedChannel` for `largestRead`.
func pinnedHTTPServer(_ http1: HTTP1Channel.Configuration, certificates: TLSCertificates?, largestRead: Int? = nil,
                      beforeResponder: (@Sendable (Logger) -> [any ChannelHandler])? = nil) throws -> HTTPServerBuilder {
    let tls = certificates.map { TLSChannelConfiguration(tlsConfiguration: $0.configuration) }
    return HTTPServerBuilder { responder in
        let channel = HTTP1Channel(responder: responder, configuration: http1)
        guard let tls else {
            return EventLoopPinnedChannel(base: channel, decoderLimits: http1.httpDecoder, largestRead: largestRead, beforeResponder: beforeResponder)
        }
        return EventLoopPinnedChannel(base: try TLSChannel(channel, configuration: tls), decoderLimits: http1.httpDecoder,
                                      largestRead: largestRead, beforeResponder: beforeResponder)
    }
}
