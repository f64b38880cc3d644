import NIOCore
import NIOHTTP1
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

// The least an HTTP/1 server on SwiftNIO does for a small GET, to measure the gateway's 4 KiB
// GET against (`WORKLOADS=nio-4k bash bench/gateway.sh`): NIO's own request decoder and response
// encoder, one event loop per core as the gateway has, and a handler that answers every request
// with the same 4 KiB from memory and the headers the gateway sends with a 4 KiB object. No
// routing, no signature, no store, no HTTP types, no Hummingbird.
//   NIOFloor PORT        (listens on 127.0.0.1)

final class Floor: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let body = ByteBuffer(repeating: UInt8(ascii: "a"), count: 4096)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        let headers: HTTPHeaders = [
            "ETag": "\"620f0b67a91f7f74151bc5be745b7110\"", "Last-Modified": "Thu, 26 Nov 2026 10:00:00 GMT",
            "Accept-Ranges": "bytes", "Content-Type": "binary/octet-stream", "Content-Length": "4096",
            "x-amz-request-id": "18F2A9C3B5D7E1F0", "Date": "Thu, 26 Nov 2026 10:00:00 GMT", "Server": "tollgate",
        ]
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(Self.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

guard CommandLine.arguments.count == 2, let port = Int(CommandLine.arguments[1]) else {
    print("usage: NIOFloor PORT")
    exit(2)
}
let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 256)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false)
            try channel.pipeline.syncOperations.addHandler(Floor())
        }
    }
    .bind(host: "127.0.0.1", port: port).wait()
try channel.closeFuture.wait()
