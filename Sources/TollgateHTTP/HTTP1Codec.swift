import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import TollgateStore
#if canImport(Glibc)
import Glibc
#endif

/// The HTTP/1 server codec between NIO's request decoder and Hummingbird: what NIO's
/// `HTTP1ToHTTPServerCodec` and `HTTPResponseEncoder` do together, in their place, byte for
/// byte (HTTP1CodecTests compares the two pipelines), with less work:
///
/// - Requests: a target in origin form (`/path?query`, what every client sends to a server
///   that is not a proxy) becomes the request's path as it stands. NIO's codec runs every
///   target through Foundation's URL parser to find an absolute form, which cost a presigned
///   4 KiB GET about 11,500 of its 201,500 instructions (bench/gateway_instructions.sh). Any
///   other target (absolute form, `*`) goes through NIO's own conversion.
/// - Responses are encoded here, straight from HTTP types, each head in one copy into a buffer
///   of its counted length: NIO's pair converted each response head to NIO's header list and
///   then wrote it a string at a time, one more handler down the pipeline. Encoding here took a
///   presigned 4 KiB GET from 185,000 to 173,500 instructions (bench/gateway_instructions.sh);
///   the one copy, from 147,600 to 146,800. The framing rules are NIO's: no body for a response to
///   HEAD or CONNECT, nor for 1xx, 204 and 304; `Content-Length` when the response has one,
///   otherwise `Transfer-Encoding: chunked`. Responses are always HTTP/1.1, as NIO's conversion
///   made them. Because the encoder must know which request each response answers (HEAD), this
///   codec replaces NIO's request decoder too, by one made without a link to NIO's encoder.
///
/// It also sends files with `sendfile(2)`: the kernel passes cached file pages to the socket, and
/// a large GET's body is never copied through the server's memory (it then costs what it costs
/// nginx). Hummingbird's body writer takes only `ByteBuffer`s, so a responder that has a
/// store's `ZeroCopyRegion` triggers ``SendFile`` on the channel instead, after the response head (and any
/// earlier body parts) went through the body writer. Writes from the body writer and user events
/// reach the pipeline in the order they were made (both are handed to the channel's event loop in
/// order), so the span lands between the parts written before and after it: the codec frames it
/// as any body part and writes it as a `FileRegion` over a duplicate of the span's descriptor,
/// which NIO owns and which is closed when the span is written; the event's promise completes then. Plain TCP only: TLS encrypts in user
/// space, so with TLS the gateway sends bytes.
///
/// The socket is corked (`TCP_CORK`) while a span is flushed, as nginx's `tcp_nopush` does: the
/// response head written before the span leaves with the span's first bytes in full segments,
/// not alone in a small one. On loopback this took a GET 1 MiB's CPU time, server and client
/// together, from about 480 to 450 µs, and its throughput up 4 % (`bench/gateway.sh`): the
/// client's share fell to what it is with nginx, and the server's rose (perf shows loopback's
/// delivery of the segments to the client running inside the server's sendfile). The cork is
/// pulled when the flush returns, so a last partial segment leaves at once (when the socket was
/// full, sendfile's rest goes uncorked).
///
/// A span longer than the connection's high water mark (64 KiB) makes the connection unwritable
/// when it is written and, when the flush sends it whole, writable again before the flush
/// returns: two writability changes that would cross every handler after the codec to
/// Hummingbird's writer, for nothing: unheld, they cost a 1 MiB GET 8,400 of its 169,000
/// instructions (bench/gateway_instructions.sh). So they are held while a span is sent, and the
/// handlers after the codec hear of a change only when the span leaves the connection otherwise
/// than it found it (its client is not reading). Changes at any other time pass as they come,
/// so Hummingbird's writer still waits for a slow client.
///
/// It is also where a connection's persistence is decided, once for both listeners, so that a
/// proxy that pools connections can never read one request's answer as another's (RFC 9112 §9.6):
///
/// - A request that ends the connection (HTTP/1.0 without `keep-alive`, `Connection: close`,
///   `CONNECT`, and a GET, HEAD or DELETE announcing a body, whose bytes may be the next
///   request's) gets `Connection: close` on its answer, and nothing read after it reaches the
///   server: later requests on the connection are neither run nor answered.
/// - An answer that says `Connection: close` (its responder's decision: a refused
///   `Expect: 100-continue`, say) ends the connection once it is written.
/// - An answer whose body falls short of its `Content-Length` (or would pass it: the extra part
///   is refused) cannot be followed by another on the same connection: it is closed after it.
/// - An answer to HTTP/1.0 without a length is delimited by the close, not chunked.
/// - A non-2xx answer to `CONNECT` is framed as any answer (RFC 9110 §9.3.6: only a 2xx one
///   starts a tunnel and carries no framing).
///
/// `EventLoopPinnedChannel` swaps it in for NIO's handlers when it sets a connection up.
package final class HTTP1Codec: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = IOData

    /// The outbound user event: send these bytes of this file as the next body part.
    package struct SendFile: Sendable {
        let span: ZeroCopyRegion

        package init(span: ZeroCopyRegion) {
            self.span = span
        }
    }

    /// What the response to a request may carry, by the request's method.
    private enum Answering { case other, head, connect }

    /// A request read and not answered yet.
    private struct Unanswered {
        var answering: Answering
        /// The connection ends after its answer (see above).
        var closes: Bool
        /// HTTP/1.0: an answer without a length is delimited by the close.
        var http10: Bool
    }

    /// The requests read and not answered yet, oldest first (more than one when pipelined).
    private var unanswered = CircularBuffer<Unanswered>(initialCapacity: 4)
    /// The response being written may have no body (HEAD, 1xx, 204, 304, 2xx to CONNECT).
    private var bodyless = false
    /// The response being written is framed in chunks.
    private var chunked = false
    /// The response being written declared this many body bytes (`Content-Length`); nil otherwise.
    private var declaredLength: Int64?
    /// Body bytes written of the response being written.
    private var sentLength: Int64 = 0
    /// The connection ends once the response being written has ended.
    private var closesAfterResponse = false
    /// A request that ends the connection was read: its body and end pass on, nothing after them.
    private var lastRequestRead = false
    /// Parts of requests after that one: dropped.
    private var droppingRequests = false
    /// The connection's last response has ended: nothing more is written.
    private var finished = false
    /// A span is being sent: writability changes are held back (see above).
    private var sendingSpan = false

    /// Puts a codec where NIO's HTTP/1 server handlers are (its request decoder, its response
    /// encoder and `HTTP1ToHTTPServerCodec`, as Hummingbird sets them up), behind NIO's request
    /// decoder with `limits` but no link to NIO's encoder. Before the connection's first read:
    /// the handlers removed hold no state yet. NIO's decoder leaves the pipeline in a task on
    /// the event loop: the future completes when all three have left.
    static func replaceNIOsHandlers(in pipeline: ChannelPipeline.SynchronousOperations,
                                    limits: HTTP1Channel.Configuration.DecoderConfiguration) throws -> EventLoopFuture<Void> {
        var configuration = NIOHTTPDecoderLimitConfiguration()
        configuration.maxHeaderFieldSize = limits.maxHeaderFieldSize
        configuration.maxHeaderListSize = limits.maxHeaderListSize
        configuration.maxHeaderFieldCount = limits.maxHeaderFieldCount
        let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: configuration))
        let nios = [
            try pipeline.context(handlerType: HTTPResponseEncoder.self),
            try pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self),
            try pipeline.context(handlerType: HTTP1ToHTTPServerCodec.self),
        ]
        try pipeline.addHandlers([decoder, HTTP1Codec()], position: .after(nios[2].handler))
        let removed = nios.map { context in
            let promise = context.eventLoop.makePromise(of: Void.self)
            pipeline.removeHandler(context: context, promise: promise)
            return promise.futureResult
        }
        return EventLoopFuture.andAllSucceed(removed, on: nios[0].eventLoop)
    }

    /// What cannot be parsed after a request that ends the connection is dropped with it: no
    /// one answers it, and nothing closes the connection before the last answer is read.
    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if lastRequestRead { return }
        context.fireErrorCaught(error)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        // Requests after one that ends the connection are not the server's to run (RFC 9112
        // §9.6); that one's body and end still pass.
        if droppingRequests { return }
        if case .head = part, lastRequestRead {
            droppingRequests = true
            return
        }
        switch part {
        case .head(let head):
            let closes = Self.endsTheConnection(head)
            unanswered.append(Unanswered(answering: head.method == .HEAD ? .head : head.method == .CONNECT ? .connect : .other,
                                         closes: closes, http10: head.version.major == 1 && head.version.minor == 0))
            if closes { lastRequestRead = true }
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

    /// Whether the connection ends after the answer to `head` (see above).
    static func endsTheConnection(_ head: HTTPRequestHead) -> Bool {
        if !head.isKeepAlive || head.method == .CONNECT { return true }
        switch head.method {
        case .GET, .HEAD, .DELETE:
            // A body where none belongs: if the client does not send it, the next request's bytes
            // would be read as this one's body.
            if head.headers.contains(name: "transfer-encoding") { return true }
            return head.headers[canonicalForm: "content-length"].contains { $0 != "0" }
        default:
            return false
        }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if !sendingSpan { context.fireChannelWritabilityChanged() }
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !finished else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let response):
            context.write(wrapOutboundOut(.byteBuffer(encode(response, allocator: context.channel.allocator))), promise: promise)
        case .body(let body):
            writeBody(.byteBuffer(body), context: context, promise: promise)
        case .end(let trailers):
            bodyless = false
            // Short of its length: the client would read the next answer as the rest of this one.
            if let declaredLength, sentLength < declaredLength { closesAfterResponse = true }
            declaredLength = nil
            let last = chunked ? Self.lastChunk(trailers, allocator: context.channel.allocator) : nil
            guard closesAfterResponse else {
                if let last {
                    context.write(wrapOutboundOut(.byteBuffer(last)), promise: promise)
                } else if let promise {
                    // Nothing to write, but the promise completes in order with the writes before it.
                    context.write(wrapOutboundOut(.byteBuffer(context.channel.allocator.buffer(capacity: 0))), promise: promise)
                }
                return
            }
            // The last response: once it is on the wire, the connection ends.
            finished = true
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(last ?? context.channel.allocator.buffer(capacity: 0))), promise: written)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            written.futureResult.whenComplete { result in
                promise?.completeWith(result)
                Self.endConnection(bound.value)
            }
        }
    }

    /// How long a connection whose last answer is written may still take to read it.
    static let lingering: TimeAmount = .seconds(2)

    /// Ends the connection after its last answer: the output first (a FIN after the answer),
    /// then, once the client closes its side or `lingering` has passed, the rest. Closing at once
    /// with requests the client pipelined still unread would reset the connection, and a reset
    /// makes the client's system drop the part of the answer it has not read yet. What arrives
    /// meanwhile is read and dropped. Where the output cannot be closed alone (TLS), it all closes.
    static func endConnection(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let halfClosed = context.eventLoop.makePromise(of: Void.self)
        halfClosed.futureResult.whenComplete { result in
            guard case .success = result else { return bound.value.close(promise: nil) }
            bound.value.eventLoop.scheduleTask(in: lingering) { bound.value.close(promise: nil) }
        }
        context.close(mode: .output, promise: halfClosed)
    }

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let send = event as? SendFile else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        // NIO's handle owns the descriptor it is given and is closed when the write ends, as
        // NIO's ownership rule asks: it gets a duplicate of the span's (one dup(2) per span), so
        // the span's file stays its owner's to close, whenever that owner lets go.
        let duplicate = dup(send.span.descriptor)
        guard duplicate >= 0 else {
            promise?.fail(IOError(errnoCode: errno, reason: "dup"))
            return
        }
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: duplicate)
        let region = FileRegion(
            fileHandle: handle, readerIndex: Int(send.span.range.lowerBound), endIndex: Int(send.span.range.upperBound)
        )
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            try? handle.close()
            promise?.completeWith(result)
        }
        let wasWritable = context.channel.isWritable
        sendingSpan = true
        let options = context.channel.syncOptions
        try? options?.setOption(Self.cork, value: 1)
        writeBody(.fileRegion(region), context: context, promise: written)
        context.flush()
        try? options?.setOption(Self.cork, value: 0)
        sendingSpan = false
        if context.channel.isWritable != wasWritable { context.fireChannelWritabilityChanged() }
    }

    /// `TCP_CORK`, set while a span is flushed (see above).
    static let cork = ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: TCP_CORK))

    /// A body part, in a chunk when the response is chunked; refused when it may have no body, or
    /// would take the body past its `Content-Length` (the connection then ends after the response).
    private func writeBody(_ body: IOData, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        if bodyless {
            promise?.fail(NIOHTTPResponseEncoderError.responseBodyNotAllowed)
            return
        }
        sentLength += Int64(body.readableBytes)
        if let declaredLength, sentLength > declaredLength {
            sentLength -= Int64(body.readableBytes)
            closesAfterResponse = true
            promise?.fail(ResponseTooLong(declared: declaredLength))
        } else if chunked && body.readableBytes > 0 {
            var size = context.channel.allocator.buffer(capacity: 16)
            size.writeString(String(body.readableBytes, radix: 16))
            size.writeStaticString("\r\n")
            context.write(wrapOutboundOut(.byteBuffer(size)), promise: nil)
            context.write(wrapOutboundOut(body), promise: nil)
            size.moveReaderIndex(forwardBy: size.readableBytes - 2)
            context.write(wrapOutboundOut(.byteBuffer(size)), promise: promise)
        } else {
            context.write(wrapOutboundOut(body), promise: promise)
        }
    }

    /// The body a response had more of than its `Content-Length` said (the part is refused).
    struct ResponseTooLong: Error {
        let declared: Int64
    }

    /// The response head in HTTP/1.1, framed as NIO's encoder frames it (but for the rules above).
    private func encode(_ response: HTTPResponse, allocator: ByteBufferAllocator) -> ByteBuffer {
        // NIO's status: its own reason phrase for the codes it names.
        let status = HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase)
        let final = !(100..<200).contains(status.code) || status.code == 101
        var tunnel = false, http10 = false
        if final, let request = unanswered.popFirst() {
            tunnel = request.answering == .connect && (200..<300).contains(status.code)
            bodyless = request.answering == .head || tunnel
            http10 = request.http10
            closesAfterResponse = request.closes
        }
        let fields = response.headerFields
        if final, fields[values: .connection].contains(where: Self.saysClose) { closesAfterResponse = true }
        // Which framing headers go: both when there can be no body; a Transfer-Encoding beside
        // a Content-Length; any other Transfer-Encoding, for `chunked` (added last; for HTTP/1.0,
        // which has no chunks, the body ends with the connection instead).
        let mayHaveBody = !tunnel && status.mayHaveResponseBody
        let dropsLength = !mayHaveBody
        let unframed = mayHaveBody && !fields.contains(.contentLength)
        if unframed && http10 { closesAfterResponse = true }
        let addsChunked = unframed && !http10
        chunked = addsChunked && !bodyless
        sentLength = 0
        declaredLength = mayHaveBody && !bodyless ? fields[.contentLength].flatMap { Int64($0) } : nil
        let addsClose = final && closesAfterResponse && !fields[values: .connection].contains(where: Self.saysClose)

        let reason = status.reasonPhrase
        // One copy into a buffer of the head's length, counted first: each separate write to a
        // `ByteBuffer` costs more than the bytes it copies.
        var length = "HTTP/1.1 000 \r\n\r\n".utf8.count + reason.utf8.count + (addsChunked ? Self.chunkedField.utf8CodeUnitCount : 0)
            + (addsClose ? Self.closeField.utf8CodeUnitCount : 0)
        for field in fields { length += HeadWriter.length(of: field) }
        return HeadWriter.buffer(length: length, allocator: allocator) { head in
            head.append(static: "HTTP/1.1 ")
            if (100..<1000).contains(status.code) {
                head.append(UInt8(ascii: "0") + UInt8(status.code / 100))
                head.append(UInt8(ascii: "0") + UInt8(status.code / 10 % 10))
                head.append(UInt8(ascii: "0") + UInt8(status.code % 10))
            } else {
                head.append(String(status.code))  // HTTP types' codes go down to 0
            }
            head.append(UInt8(ascii: " "))
            head.append(reason)
            head.append(static: "\r\n")
            for field in fields where !(field.name.is(.transferEncoding) || dropsLength && field.name.is(.contentLength)) {
                head.append(field)
            }
            if addsChunked { head.append(static: Self.chunkedField) }
            if addsClose { head.append(static: Self.closeField) }
            head.append(static: "\r\n")
        }
    }

    private static let chunkedField: StaticString = "transfer-encoding: chunked\r\n"
    private static let closeField: StaticString = "connection: close\r\n"

    /// A `Connection` value with the `close` option.
    static func saysClose(_ value: String) -> Bool {
        value.lowercased().split(separator: ",").contains { $0.filter { $0 != " " && $0 != "\t" } == "close" }
    }

    /// The last chunk and the trailers, in one copy.
    private static func lastChunk(_ trailers: HTTPFields?, allocator: ByteBufferAllocator) -> ByteBuffer {
        var length = "0\r\n\r\n".utf8.count
        for field in trailers ?? [:] { length += HeadWriter.length(of: field) }
        return HeadWriter.buffer(length: length, allocator: allocator) { last in
            last.append(static: "0\r\n")
            for field in trailers ?? [:] { last.append(field) }
            last.append(static: "\r\n")
        }
    }

    /// The request NIO's codec makes of `head` (scheme `http`, as Hummingbird sets it up, TLS or
    /// not; cookies not split).
    static func request(_ head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else {
            return try HTTPRequest(head, secure: false, splitCookie: false)
        }
        // A target that starts with "/" has no scheme, so NIO's parse gives it back unchanged.
        return HTTPRequest(method: try HTTPRequest.Method(head.method), scheme: "http", authority: head.headers.first(name: "Host"),
                           path: head.uri, headerFields: HTTPFields(head.headers, splitCookie: false))
    }
}

/// Writes a response head (or trailers) into memory counted for it beforehand
/// (`length(of:)` for each field).
private struct HeadWriter {
    private let out: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    private init(_ out: UnsafeMutableRawBufferPointer) { self.out = out }

    /// A buffer of `length` bytes, written by `fill` in one copy.
    static func buffer(length: Int, allocator: ByteBufferAllocator, _ fill: (inout HeadWriter) -> Void) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { out in
            var writer = HeadWriter(out)
            fill(&writer)
            return writer.count
        }
        return buffer
    }

    /// The bytes `append(field)` writes: `name: value` and a line end.
    static func length(of field: HTTPField) -> Int { field.name.rawName.utf8.count + field.value.utf8.count + 4 }

    mutating func append(_ byte: UInt8) {
        precondition(count < out.count, "a response head longer than counted")
        out[count] = byte
        count += 1
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= out.count - count, "a response head longer than counted")
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        (out.baseAddress! + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func append(static text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func append(_ text: String) {
        // Native strings, as every field's are, are read in place.
        if text.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) == nil {
            for byte in text.utf8 { append(byte) }
        }
    }

    mutating func append(_ field: HTTPField) {
        append(field.name.rawName)
        append(static: ": ")
        append(field.value)
        append(static: "\r\n")
    }
}

fileprivate extension HTTPField.Name {
    /// Whether this is `name`: the lengths first, as almost every field differs in length from
    /// the one looked for (`==` compares the canonical names as strings).
    func `is`(_ name: HTTPField.Name) -> Bool {
        canonicalName.utf8.count == name.canonicalName.utf8.count && self == name
    }
}
