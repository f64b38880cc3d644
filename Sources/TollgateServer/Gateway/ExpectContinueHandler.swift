import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// `Expect: 100-continue`, answered only once the request is known to be accepted.
///
/// S3 SDKs (botocore among them) send uploads with that expectation and hold the body back
/// until the server says go. The gateway says go only after the signature, the token and the
/// policy accepted the request: it then triggers ``SendContinue`` on the channel and this handler
/// writes `100 Continue`. A request refused before that gets its refusal instead, and the client
/// never sends the body it announced; since the connection's next bytes are then unknown (the
/// body, or the next request), the refusal carries `Connection: close` and the connection is
/// closed after it, as RFC 9110 §10.1.1 allows.
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The outbound user event a responder triggers once it will read the body.
    struct SendContinue: Sendable {}

    private enum State {
        case idle
        /// The current request expects 100-continue, not sent yet.
        case pending
        /// The final response went out without 100: close after its end.
        case closeAfterResponse
    }

    private var state = State.idle

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            state = head.headerFields[.expect]?.lowercased() == "100-continue" ? .pending : .idle
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is SendContinue else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        if case .pending = state {
            state = .idle
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: promise)
        } else {
            promise?.succeed()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where response.status.kind != .informational:
            if case .pending = state {
                state = .closeAfterResponse
                response.headerFields[.connection] = "close"
                context.write(wrapOutboundOut(.head(response)), promise: promise)
                return
            }
        case .end:
            if case .closeAfterResponse = state {
                state = .idle
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(data).whenComplete { result in
                    promise?.completeWith(result)
                    bound.value.close(promise: nil)
                }
                return
            }
        default:
            break
        }
        context.write(data, promise: promise)
    }
}
