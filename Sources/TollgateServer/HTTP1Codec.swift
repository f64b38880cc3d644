import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import TollgateStore

/// NIO's `HTTP1ToHTTPServerCodec`, in its place in Hummingbird's pipeline, with one difference:
/// a request target in origin form (`/path?query`, what every client sends to a server that is
/// not a proxy) becomes the request's path as it stands. NIO's codec runs every target through
/// Foundation's URL parser to find an absolute form, which cost a presigned 4 KiB GET about
/// 11,500 of its 201,500 instructions (bench/gateway_instructions.sh) and 2.5 % of its CPU time
/// (perf, during bench/gateway.sh). Any other target (absolute form, `*`) goes through NIO's own
/// conversion, and responses always do.
///
/// It also sends files with `sendfile(2)`: the kernel passes cached file pages to the socket, and
/// a large GET's body is never copied through the server's memory (it then costs what it costs
/// nginx). Hummingbird's body writer takes only `ByteBuffer`s, so a responder that has a
/// `FileSpan` triggers ``SendFile`` on the channel instead, after the response head (and any
/// earlier body parts) went through the body writer. Writes from the body writer and user events
/// reach the pipeline in the order they were made (both are handed to the channel's event loop in
/// order), so the span lands between the parts written before and after it: the codec writes it
/// as a `FileRegion` body part to the HTTP/1 encoder, which frames it as any body part. The
/// event's promise completes when the span is written, and only then may the span's file be
/// closed. Plain TCP only: TLS encrypts in user space, so with TLS the gateway sends bytes.
///
/// `EventLoopPinnedChannel` swaps it in for NIO's codec when it sets a connection up.
final class HTTP1Codec: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The outbound user event: send these bytes of this file as the next body part.
    struct SendFile: Sendable {
        let span: FileSpan
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            do {
                context.fireChannelRead(wrapInboundOut(.head(try Self.request(head))))
            } catch {
                context.fireErrorCaught(error)
            }
        case .body(let body):
            context.fireChannelRead(wrapInboundOut(.body(body)))
        case .end(let trailers):
            context.fireChannelRead(wrapInboundOut(.end(trailers.map { HTTPFields($0, splitCookie: false) })))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            context.write(wrapOutboundOut(.head(HTTPResponseHead(response))), promise: promise)
        case .body(let body):
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: promise)
        case .end(let trailers):
            context.write(wrapOutboundOut(.end(trailers.map(HTTPHeaders.init))), promise: promise)
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let send = event as? SendFile else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        // The handle borrows the span's descriptor: ownership goes back before the handle is
        // dropped, so NIO never closes it, and the span keeps the file open until then.
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: send.span.descriptor)
        let region = FileRegion(
            fileHandle: handle, readerIndex: Int(send.span.range.lowerBound), endIndex: Int(send.span.range.upperBound)
        )
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            _ = try? handle.takeDescriptorOwnership()
            withExtendedLifetime(send.span) {}
            promise?.completeWith(result)
        }
        context.writeAndFlush(wrapOutboundOut(.body(.fileRegion(region))), promise: written)
    }

    /// The request NIO's codec makes of `head` (scheme `http`, as Hummingbird sets it up, TLS or
    /// not; cookies not split).
    static func request(_ head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else {
            return try HTTPRequest(head, secure: false, splitCookie: false)
        }
        // A target that starts with "/" has no scheme, so NIO's parse gives it back unchanged.
        return HTTPRequest(method: try HTTPRequest.Method(head.method), scheme: "http", authority: head.headers["Host"].first,
                           path: head.uri, headerFields: HTTPFields(head.headers, splitCookie: false))
    }
}
