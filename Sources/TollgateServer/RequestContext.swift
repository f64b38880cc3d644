import Hummingbird
import NIOCore

/// The request context of both listeners: Hummingbird's core storage plus the peer address,
/// which token logs and `aws:SourceIp` conditions need.
public struct TollgateRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The client's IP address as text, or "-" when unknown.
    public var clientAddress: String { remoteAddress?.ipAddress ?? "-" }

    /// Bodies are streamed; only small XML/JSON bodies are collected, with their own limits.
    public var maxUploadSize: Int { 1024 * 1024 }
}
