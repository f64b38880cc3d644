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
/// body, or the next request), the refusal carries `Connection: close`, and `HTTP1Codec` closes
/// the connection after it, as RFC 9110 §10.1.1 allows.
///
/// Requests may be pipelined: the expectation is kept per request read and not yet answered,
/// in order, and each final answer settles the oldest. `SendContinue` is for the oldest too,
/// the one the responder is answering.
package final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// The outbound user event a responder triggers once it will read the body.
    package struct SendContinue: Sendable {
        package init() {}
    }

    /// For each request read and not answered yet, oldest first: it expects 100-continue, not sent yet.
    private var expecting = CircularBuffer<Bool>(initialCapacity: 4)

    package init() {}

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            expecting.append(head.headerFields[.expect]?.lowercased() == "100-continue")
        }
        context.fireChannelRead(data)
    }

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is SendContinue else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        if expecting.first == true {
            expecting[expecting.startIndex] = false
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: promise)
        } else {
            promise?.succeed()
        }
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(var response) = unwrapOutboundIn(data), response.status.kind != .informational,
           let stillExpecting = expecting.popFirst(), stillExpecting {
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
            return
        }
        context.write(data, promise: promise)
    }
}
