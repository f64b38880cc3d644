import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import TollgateDates
import TollgateHTTP
import TollgateStore
import TollgateTokenService

/// Answers GETs and HEADs of objects on the connection's event loop, as they arrive, without
/// Hummingbird's responder: `Gateway.answerAtOnce` admits and renders them by the same steps as
/// every other request, and this handler writes the answer. Every GET and HEAD is admitted here,
/// so its refusal is written here too. An object the store has at hand (`readAtOnce`: in memory,
/// or a file the store keeps open whose pages are cached) is answered at once, without a task.
/// Any other object is asked of the store in a task on the event loop (`answerFromStore`); its
/// answer is written here when it can be sent whole at once (a body in memory, or one span of
/// cached file pages, sent with sendfile), and otherwise the request goes on to Hummingbird's
/// responder with the read the store opened (`Gateway.prefetched`), which admits it again and
/// streams that read: the object is fetched once. A GET whose body the store already
/// knows to come in pieces (`ReadAtOnce.inPieces`) goes on to the responder at once, without the
/// store's task. Every other request goes on unchanged.
///
/// Hummingbird hands each request to a task through an async stream and writes its response
/// through another, which costs a small GET about a third of its CPU time, and a 1 MiB GET of
/// cached pages about a quarter (bench/gateway.sh). Small objects are what mobile apps fetch
/// most (thumbnails, avatars, manifests).
///
/// It sits after Hummingbird's `HTTPConnectionStateHandler`, so the idle timeout and graceful
/// shutdown see the requests answered here like any other. Answers keep their requests' order:
/// while a request handed on is unanswered, every later one is handed on too; while the store
/// is asked, later request parts, and any error reading the connection, wait here and the
/// connection is not read further (as NIO's `HTTPServerPipelineHandler` holds pipelined requests). A request answered here has no body
/// (none is announced), so its end is all that follows its head. While the connection is not
/// writable (its client does not read what it asked for), requests are handed on too, and
/// Hummingbird's responder waits for the client, which stops the reading of further requests:
/// a client that pipelines GETs without reading the answers cannot make the server queue
/// answers without bound.
package final class GatewayFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    let gateway: Gateway
    let logger: Logger
    /// Requests handed on whose response has not ended yet.
    private var handedOn = 0
    /// The current request was answered here: its end is dropped.
    private var answered = false
    /// The head of the request whose answer the store is preparing, if any.
    private var asking: HTTPRequest?
    /// What arrived while the store was asked, oldest first.
    private var waiting = CircularBuffer<Arrival>()

    /// A request part, or an error reading the connection (a malformed request): an error is
    /// passed on in its turn too, or its 400 would go out before the answers due before it.
    private enum Arrival {
        case part(HTTPRequestPart)
        case error(any Error)
    }
    /// A read was asked for while the store was asked: it is passed on once the answer is written.
    private var readDeferred = false
    private var closed = false
    /// The `Date` field, made once a second (Hummingbird's own cache is not shared): each new
    /// field costs a check of its value.
    private var date: (second: Int64, field: HTTPField) = (.min, HTTPField(name: .date, value: ""))
    /// Runs the store's tasks on this connection's event loop.
    private var executor: EventLoopTaskExecutor?

    package init(gateway: Gateway, logger: Logger) {
        self.gateway = gateway
        self.logger = logger
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if asking != nil {
            waiting.append(.part(part))
        } else {
            receive(part, context: context)
        }
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if asking != nil {
            waiting.append(.error(error))
        } else {
            context.fireErrorCaught(error)
        }
    }

    private func receive(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            if handedOn == 0, context.channel.isWritable, Self.mayAnswer(head) {
                let requestContext = TollgateRequestContext(source: .init(channel: context.channel, logger: logger))
                switch gateway.answerAtOnce(head, context: requestContext) {
                case .now(let answer):
                    answered = true
                    write(answer, context: context)
                    return
                case .fromStore(let call, let attempt):
                    ask(head, call, attempt, requestContext, context: context)
                    return
                case .handOn:
                    break
                }
            }
            handedOn += 1
        case .body:
            if answered { return }
        case .end:
            if answered {
                answered = false
                return
            }
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// Asks the store for the answer to `head`, in a task on the event loop; `storeAnswered`
    /// then writes it, or hands the request on.
    private func ask(_ head: HTTPRequest, _ call: Gateway.Call, _ attempt: Gateway.Attempt, _ requestContext: TollgateRequestContext,
                     context: ChannelHandlerContext) {
        asking = head
        let loop = context.eventLoop
        let executor = self.executor ?? EventLoopTaskExecutor(loop)
        self.executor = executor
        let gateway = self.gateway
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        Task(executorPreference: executor) {
            let answer = await gateway.answerFromStore(call, attempt, context: requestContext)
            if loop.inEventLoop {
                bound.value.0.storeAnswered(answer, context: bound.value.1)
            } else {
                loop.execute { bound.value.0.storeAnswered(answer, context: bound.value.1) }
            }
        }
    }

    /// The store's answer to the request asked about: written, or, when nil, the request goes on
    /// to the responder. Then the parts that waited are received in order, until one waits again.
    private func storeAnswered(_ answer: Gateway.FromStore, context: ChannelHandlerContext) {
        guard let head = asking else { return }
        asking = nil
        guard !closed else { return }
        switch answer {
        case .whole(let whole):
            answered = true
            write(whole, context: context)
        case .stream(let read):
            // The responder's next request on this connection is this one: it takes the read.
            gateway.prefetched.put(read, for: head, on: context.channel)
            handedOn += 1
            context.fireChannelRead(wrapInboundOut(.head(head)))
        }
        while asking == nil, let arrival = waiting.popFirst() {
            switch arrival {
            case .part(let part): receive(part, context: context)
            case .error(let error): context.fireErrorCaught(error)
            }
        }
        context.fireChannelReadComplete()
        if asking == nil, readDeferred {
            readDeferred = false
            context.read()
        }
    }

    package func read(context: ChannelHandlerContext) {
        if asking != nil {
            readDeferred = true
        } else {
            context.read()
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        // An answer still to come, and the requests after it, have nowhere to go; a read handed
        // on and not taken is dropped (a remote body's request is cancelled with it).
        closed = true
        waiting.removeAll()
        gateway.prefetched.drop(on: context.channel)
        context.fireChannelInactive()
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { handedOn -= 1 }
        context.write(data, promise: promise)
    }

    /// A GET or HEAD without a body, without `Expect` and without `Origin` (CORS rules may need
    /// the store): the rest go to Hummingbird. (Whether the connection stays open after the
    /// answer is `HTTP1Codec`'s to decide, for every answer alike.)
    static func mayAnswer(_ head: HTTPRequest) -> Bool {
        guard head.method == .get || head.method == .head else { return false }
        // One pass over the fields (a presigned GET has few): a sign of any of these is enough.
        for field in head.headerFields {
            switch field.name {
            case .transferEncoding, .expect, .origin: return false
            case .contentLength where field.value != "0": return false
            default: continue
            }
        }
        return true
    }

    /// The answer with what Hummingbird adds to every response: `Date`, `Server` and, when the
    /// answer has none, `Content-Length`. The answer is consumed, so its fields are appended to
    /// in place rather than copied first.
    private func write(_ answer: consuming Gateway.WholeAnswer, context: ChannelHandlerContext) {
        if !answer.rendered.headers.contains(.contentLength) {
            answer.rendered.headers.append(HTTPField(name: .contentLength, value: String(answer.rendered.body?.readableBytes ?? 0)))
        }
        // No answer of the gateway's sets either: appended, not searched for.
        answer.rendered.headers.append(dateField(gateway.clock()))
        answer.rendered.headers.append(Self.serverField)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: answer.rendered.status, headerFields: answer.rendered.headers))), promise: nil)
        if let body = answer.rendered.body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        // The codec writes the span as the next body part and keeps its file open until it is sent.
        if let span = answer.span { context.triggerUserOutboundEvent(HTTP1Codec.SendFile(span: span), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private static let serverField = HTTPField(name: .server, value: Gateway.serverName)

    private func dateField(_ now: Date) -> HTTPField {
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        if second != date.second { date = (second, HTTPField(name: .date, value: WireDate.httpDate(now))) }
        return date.field
    }
}
