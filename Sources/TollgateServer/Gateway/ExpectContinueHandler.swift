import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` with `100 Continue` as soon as the request head arrives.
///
/// S3 SDKs (botocore among them) send uploads with that expectation and hold the body back
/// until the server says go, or until their own timeout (a second in botocore) runs out. Without
/// this every upload would stall for that timeout. Answering at once is always safe: if the
/// request is then refused, the client sends the body anyway and the server drains it, so the
/// connection stays in step for the next request.
final class ExpectContinueHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data),
           let expectation = head.headerFields[.expect], expectation.lowercased() == "100-continue" {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        }
        context.fireChannelRead(data)
    }
}
