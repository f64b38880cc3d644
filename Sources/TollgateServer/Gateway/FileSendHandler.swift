import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import TollgateStore

/// Sends a file-backed GET body with `sendfile(2)`: the kernel passes cached file pages to the
/// socket, and the body is never copied through the server's memory (a large-object GET then
/// costs what it costs nginx).
///
/// Hummingbird's body writer takes only `ByteBuffer`s, so a responder that has a `FileSpan`
/// triggers ``Send`` on the channel instead, after the response head (and any earlier body
/// parts) went through the body writer. Writes from the body writer and user events reach the
/// pipeline in the order they were made (both are handed to the channel's event loop in order),
/// so the span lands between the parts written before and after it. This handler sits after
/// `HTTP1ToHTTPServerCodec`, whose parts carry `ByteBuffer` bodies only; it writes the span as a
/// `FileRegion` body part from the codec's context, to the HTTP/1 encoder below it, which frames
/// it as any body part. The event's promise completes when the span is written, and only then
/// may the span's file be closed.
///
/// Plain TCP only: TLS encrypts in user space, so with TLS the gateway sends bytes and this
/// handler is not installed.
final class FileSendHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The outbound user event: send these bytes of this file as the next body part.
    struct Send: Sendable {
        let span: FileSpan
    }

    /// The codec's context: writes from it go to the handler below the codec.
    private var codec: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        codec = try? context.pipeline.syncOperations.context(handlerType: HTTP1ToHTTPServerCodec.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        codec = nil
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let send = event as? Send else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        guard let codec else {
            promise?.fail(ChannelError.ioOnClosedChannel)
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
        codec.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.fileRegion(region))), promise: written)
    }
}
