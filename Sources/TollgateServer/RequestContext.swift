import Hummingbird
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// The request context of both listeners: Hummingbird's core storage plus the peer address,
/// which token logs and `aws:SourceIp` conditions need.
public struct TollgateRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The connection, for the gateway's `100 Continue` once a request is accepted.
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }

    /// The client's IP address as text, or "-" when unknown. IPv4 addresses are written here
    /// directly: NIO's `ipAddress` goes through `inet_ntop` and a C string, and every issued
    /// token logs this.
    public var clientAddress: String { Self.describe(remoteAddress) }

    /// An address as ``clientAddress`` writes it.
    static func describe(_ remoteAddress: SocketAddress?) -> String {
        switch remoteAddress {
        case .v4(let address): Self.dottedQuad(address.address.sin_addr)
        case let other?: other.ipAddress ?? "-"
        case nil: "-"
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
