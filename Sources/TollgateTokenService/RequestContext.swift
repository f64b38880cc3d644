import HTTPTypes
import Hummingbird
import NIOCore
#if canImport(Glibc)
import Glibc
import TollgateHTTP
#endif

/// The request context of both listeners: Hummingbird's core storage plus who the client is
/// (its address for logs, rate limits and `aws:SourceIp`; TLS for `aws:SecureTransport`).
public struct TollgateRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The connection, for the gateway's `100 Continue` once a request is accepted.
    package let channel: any Channel
    /// The client's address as a trusted proxy named it; nil: the TCP peer is the client.
    private var forwardedAddress: String?
    /// The client's connection is TLS (to this listener, or to the trusted proxy that says so):
    /// `aws:SecureTransport`.
    public private(set) var secureTransport = false

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }

    /// Decides who the client is, once per request, before anything reads `clientAddress` or
    /// `secureTransport`: the TCP peer over this listener's transport, unless the peer is one of
    /// `trustedProxies` and its `Forwarded` / `X-Forwarded-For` / `X-Forwarded-Proto` say otherwise.
    package mutating func identifyClient(_ headers: HTTPFields, tls: Bool, trustedProxies: TrustedProxies) {
        secureTransport = tls
        guard !trustedProxies.isEmpty else { return }
        let client = trustedProxies.client(
            peer: remoteAddress?.ipAddress, forwarded: headers[values: .forwarded],
            forwardedFor: headers[values: .xForwardedFor], forwardedProto: headers[values: .xForwardedProto])
        if let reason = client.ignored {
            logger.debug("forwarding headers ignored", metadata: ["client.peer": "\(remoteAddress?.ipAddress ?? "-")", "proxy.reason": "\(reason)"])
        }
        forwardedAddress = client.address
        if let https = client.https { secureTransport = https }
    }

    /// The client's IP address as text, or "-" when unknown.
    public var clientAddress: String { clientIP ?? "-" }

    /// The client's IP address (see `identifyClient`); nil when unknown. IPv4 peers are written
    /// here directly: NIO's `ipAddress` goes through `inet_ntop` and a C string, and every
    /// issued token logs this.
    public var clientIP: String? {
        if let forwardedAddress { return forwardedAddress }
        switch remoteAddress {
        case .v4(let address): return Self.dottedQuad(address.address.sin_addr)
        case let other?: return other.ipAddress
        case nil: return nil
        }
    }

    /// `a.b.c.d` of an IPv4 address (stored in network byte order).
    static func dottedQuad(_ address: in_addr) -> String {
        withUnsafeBytes(of: address.s_addr) { octets in
            String(unsafeUninitializedCapacity: 15) { out in
                var count = 0
                for (index, octet) in octets.enumerated() {
                    if index > 0 {
                        out[count] = UInt8(ascii: ".")
                        count += 1
                    }
                    if octet >= 100 {
                        out[count] = UInt8(ascii: "0") + octet / 100
                        count += 1
                    }
                    if octet >= 10 {
                        out[count] = UInt8(ascii: "0") + octet / 10 % 10
                        count += 1
                    }
                    out[count] = UInt8(ascii: "0") + octet % 10
                    count += 1
                }
                return count
            }
        }
    }
}

/// Decides each token-endpoint request's client (see `TollgateRequestContext.identifyClient`).
package struct ClientMiddleware: RouterMiddleware {
    package typealias Context = TollgateRequestContext
    let tls: Bool
    /// `TrustedProxies` of the configuration in force.
    let live: LiveConfig

    package init(tls: Bool, live: LiveConfig) {
        self.tls = tls
        self.live = live
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.identifyClient(request.headers, tls: tls, trustedProxies: live.current.config.trustedProxies)
        return try await next(request, context)
    }
}

package extension HTTPField.Name {
    static let forwarded = Self("Forwarded")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}
