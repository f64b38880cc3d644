import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOEmbedded
import NIOHTTPTypesHTTP1
import Synchronization
import Testing
@testable import TollgateGateway
@testable import TollgateHTTP
@testable import TollgateServer
import TollgateStore
@testable import TollgateTokenService

/// `HTTP1Codec` makes the very request NIO's codec makes of every target: origin form taken as
/// it stands, anything else through NIO's conversion.
@Test(arguments: [
    "/", "/bucket/key", "/bucket/key?X-Amz-Signature=abc&X-Amz-Credential=A%2F20261124%2Fus-east-1%2Fs3%2Faws4_request",
    "//bucket//key", "/a%20b/%zz?x=%", "/?acl", "/path#fragment", "/a:b/c?d=e:f",
    "http://example.com/bucket/key?x=1", "http://example.com", "https://example.com:9000/b?uploads", "*", "bucket/key",
])
func theCodecMakesTheRequestNIOsCodecMakes(target: String) throws {
    var headers = HTTPHeaders([("Host", "gateway.example:9000"), ("X-Amz-Date", "20261124T000000Z"), ("Cookie", "a=1; b=2")])
    headers.add(name: "x-amz-meta-twice", value: "1")
    headers.add(name: "X-Amz-Meta-Twice", value: "2")
    for method in [HTTPMethod.GET, .PUT, .HEAD, .RAW(value: "PROPFIND")] {
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)
        let ours = try HTTP1Codec.request(head)
        let nio = try HTTPRequest(head, secure: false, splitCookie: false)
        #expect(ours == nio, "\(method) \(target)")
    }
}

/// One exchange on a connection: request bytes in, then response parts out.
struct Exchange: Sendable, CustomStringConvertible {
    let name: String
    let requests: String
    let responses: [HTTPResponsePart]
    var description: String { name }
}

private func response(_ code: Int, reason: String? = nil, _ fields: [(String, String)]) -> HTTPResponsePart {
    var headers = HTTPFields()
    for (name, value) in fields { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
    let status = reason.map { HTTPResponse.Status(code: code, reasonPhrase: $0) } ?? HTTPResponse.Status(code: code)
    return .head(HTTPResponse(status: status, headerFields: headers))
}

private func body(_ text: String) -> HTTPResponsePart { .body(ByteBuffer(string: text)) }

private let exchanges: [Exchange] = [
    Exchange(name: "GET, Content-Length", requests: "GET /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("Content-Length", "5"), ("ETag", "\"e\""), ("x-amz-meta-Mixed", "a"), ("X-Amz-Meta-Mixed", "b")]), body("hello"), .end(nil)]),
    Exchange(name: "GET, chunked, trailers", requests: "GET /b?list-type=2 HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("Content-Type", "application/xml")]), body("<a>"), body(""), body("</a>"),
                         .end([HTTPField.Name("x-amz-checksum-crc32")!: "AAAAAA=="])]),
    Exchange(name: "GET, chunked, no trailers", requests: "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("Transfer-Encoding", "gzip")]), body("x"), .end(nil)]),
    Exchange(name: "Content-Length beside Transfer-Encoding", requests: "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("Transfer-Encoding", "chunked"), ("Content-Length", "1")]), body("x"), .end(nil)]),
    Exchange(name: "HEAD, Content-Length", requests: "HEAD /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("Content-Length", "4096")]), .end(nil)]),
    Exchange(name: "HEAD, no length, a body refused", requests: "HEAD /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(404, [("Content-Type", "application/xml")]), body("no"), .end(nil)]),
    Exchange(name: "204 and 304 lose their framing", requests: "DELETE /b/k HTTP/1.1\r\nHost: h\r\n\r\nGET /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(204, [("Content-Length", "0"), ("x-amz-request-id", "1")]), .end(nil),
                         response(304, [("Content-Length", "4096"), ("Transfer-Encoding", "chunked"), ("ETag", "\"e\"")]), .end(nil)]),
    Exchange(name: "100-continue, then the answer", requests: "PUT /b/k HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
             responses: [response(100, []), response(200, [("Content-Length", "0")]), .end(nil)]),
    Exchange(name: "pipelined HEAD then GET", requests: "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, []), .end(nil), response(200, []), body("ab"), .end(nil)]),
    Exchange(name: "status lines, named and not", requests: String(repeating: "GET / HTTP/1.1\r\nHost: h\r\n\r\n", count: 3),
             responses: [response(413, [("Content-Length", "0")]), .end(nil), response(499, reason: "Client Closed", [("Content-Length", "0")]), .end(nil),
                         response(99, reason: "Odd", [("Content-Length", "0")]), .end(nil)]),
    Exchange(name: "a long head, empty values, many trailers", requests: "GET /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
             responses: [response(200, [("x-amz-meta-long", String(repeating: "v", count: 3000)), ("x-amz-meta-empty", ""), ("ETag", "\"e\"")]),
                         body("x"), .end([HTTPField.Name("x-amz-checksum-crc32")!: "AAAAAA==", HTTPField.Name("x-empty")!: "",
                                          HTTPField.Name("x-long")!: String(repeating: "t", count: 700)])]),
    Exchange(name: "HTTP/1.0 request", requests: "GET /x HTTP/1.0\r\n\r\n",
             responses: [response(200, [("Content-Length", "1"), ("Connection", "close")]), body("y"), .end(nil)]),
]

/// NIO's HTTP/1 server pipeline, as Hummingbird sets it up, and the one with `HTTP1Codec` in its
/// place put the same bytes on the wire for the same responses, decode the same requests, and
/// complete each write's promise alike (a body for HEAD refused).
@Test(arguments: exchanges)
func theCodecWritesTheBytesNIOsEncoderWrites(exchange: Exchange) throws {
    func run(ours: Bool) throws -> (requests: [HTTPRequestPart], bytes: String, writes: [Bool]) {
        let channel = EmbeddedChannel()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        if ours {
            let replaced = try HTTP1Codec.replaceNIOsHandlers(in: pipeline, limits: .init())
            channel.embeddedEventLoop.run()
            try replaced.wait()
        }
        try channel.writeInbound(ByteBuffer(string: exchange.requests))
        var requests: [HTTPRequestPart] = []
        while let part = try channel.readInbound(as: HTTPRequestPart.self) { requests.append(part) }
        var writes: [Bool] = []
        for part in exchange.responses {
            let written = channel.eventLoop.makePromise(of: Void.self)
            channel.writeAndFlush(part, promise: written)
            var succeeded: Bool?
            written.futureResult.whenComplete { succeeded = (try? $0.get()) != nil }
            channel.embeddedEventLoop.run()
            writes.append(try #require(succeeded))
        }
        var bytes = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { Issue.record("a file region"); break }
            bytes += String(buffer: buffer)
        }
        _ = try? channel.finish()
        return (requests, bytes, writes)
    }
    let nio = try run(ours: false), ours = try run(ours: true)
    #expect(!nio.requests.isEmpty && !nio.bytes.isEmpty)
    #expect(ours.requests == nio.requests)
    #expect(ours.bytes == nio.bytes)
    #expect(ours.writes == nio.writes)
}

/// Both listeners' connections convert HTTP/1 with `HTTP1Codec`, and NIO's codec and encoder are gone.
@Test func connectionsUseTheGatewaysCodec() async throws {
    let router = Router(context: TollgateRequestContext.self)
    router.get("/codec") { _, context in
        let channel = context.channel
        return try await channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            let ours = (try? pipeline.handler(type: HTTP1Codec.self)) != nil
            let nio = (try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self)) != nil
                || (try? pipeline.handler(type: HTTPResponseEncoder.self)) != nil
            return "\(ours) \(nio)"
        }.get()
    }
    let app = Application(router: router, server: try pinnedHTTPServer(.init(), certificates: nil))
    try await app.test(.live) { client in
        try await client.execute(uri: "/codec?x=1", method: .get) { response in
            #expect(String(buffer: response.body) == "true false")
        }
    }
}

/// The request decoder put in with the codec keeps the listener's header limits: over the
/// configured count, a request is refused before it reaches the responder.
@Test func theDecoderKeepsTheHeaderLimits() async throws {
    let router = Router(context: TollgateRequestContext.self)
    router.get("/limits") { _, _ in "reached" }
    var http1 = HTTP1Channel.Configuration()
    http1.httpDecoder.maxHeaderFieldCount = 8
    let app = Application(router: router, server: try pinnedHTTPServer(http1, certificates: nil))
    try await app.test(.live) { client in
        var few = HTTPFields()
        for index in 0..<3 { few[HTTPField.Name("x-field-\(index)")!] = "v" }
        try await client.execute(uri: "/limits", method: .get, headers: few) { response in
            #expect(response.status == .ok)
            #expect(String(buffer: response.body) == "reached")
        }
        var many = HTTPFields()
        for index in 0..<20 { many[HTTPField.Name("x-field-\(index)")!] = "v" }
        let reached = try? await client.execute(uri: "/limits", method: .get, headers: many) { response in
            response.status == .ok && String(buffer: response.body) == "reached"
        }
        #expect(reached != true)
    }
}

/// At the front of a connection's pipeline: for each flush, whether a file region was written
/// since the last one and whether the socket was corked then.
private final class CorkRecorder: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData
    private let state = Mutex<(file: Bool, flushes: [(file: Bool, corked: Bool)], channel: (any Channel)?)>((false, [], nil))

    var flushes: [(file: Bool, corked: Bool)] { state.withLock { $0.flushes } }
    var channel: (any Channel)? { state.withLock { $0.channel } }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        state.withLock { $0.channel = channel }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .fileRegion = unwrapOutboundIn(data) { state.withLock { $0.file = true } }
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        let corked = (try? context.channel.syncOptions?.getOption(HTTP1Codec.cork)) == 1
        state.withLock { state in
            state.flushes.append((state.file, corked))
            state.file = false
        }
        context.flush()
    }
}

/// A file span is flushed with the socket corked, so the response head leaves with the span's
/// first bytes, and the cork is pulled once it is flushed: nothing is held back afterwards.
@Test func spansAreFlushedCorkedThenUncorked() async throws {
    let bytes = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-span-\(UUID().uuidString)").path
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let recorder = CorkRecorder()
    let router = Router(context: TollgateRequestContext.self)
    router.get("/span") { _, context in
        let channel = context.channel
        try await channel.eventLoop.submit { try channel.pipeline.syncOperations.addHandler(recorder, position: .first) }.get()
        let span = openRegion(path, count: bytes.count)
        return Response(status: .ok, headers: [.contentLength: String(bytes.count)], body: ResponseBody { writer in
            try await channel.triggerUserOutboundEvent(HTTP1Codec.SendFile(span: span))
            try await writer.finish(nil)
        })
    }
    let app = Application(router: router, server: try pinnedHTTPServer(.init(), certificates: nil))
    try await app.test(.live) { client in
        try await client.execute(uri: "/span", method: .get) { response in
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == bytes)
        }
        let withFile = recorder.flushes.filter(\.file)
        #expect(withFile.count == 1 && withFile.allSatisfy(\.corked), "\(recorder.flushes)")
        let channel = try #require(recorder.channel)
        #expect(try await channel.getOption(HTTP1Codec.cork) == 0, "uncorked once flushed")
    }
}

/// Stands where the socket is, for spans: takes each file region written, makes the connection
/// unwritable (a span is longer than the high water mark) and, when the flush sends it, writable
/// again, unless its client is not reading.
private final class SpanSocket: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    var clientReads = true
    var regions: [Int] = []
    var handles: [(handle: NIOFileHandle, descriptor: CInt)] = []
    private var unsent: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .fileRegion(let region) = unwrapOutboundIn(data), let channel = context.channel as? EmbeddedChannel else {
            return context.write(data, promise: promise)
        }
        regions.append(region.readableBytes)
        handles.append((region.fileHandle, (try? region.fileHandle.withUnsafeFileDescriptor { $0 }) ?? -1))
        if let promise { unsent.append(promise) }
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
    }

    func flush(context: ChannelHandlerContext) {
        if clientReads, let channel = context.channel as? EmbeddedChannel, !channel.isWritable {
            for promise in unsent { promise.succeed() }
            unsent.removeAll()
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
        }
        context.flush()
    }
}

/// Stands where Hummingbird's responder does: records the writability each change it hears of left.
private final class WritabilityWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTPRequestPart
    var heard: [Bool] = []

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        heard.append(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }
}

/// A span that makes the connection unwritable and is sent whole before the codec returns
/// changes nothing the handlers after it hear of; one its client does not read leaves the
/// connection unwritable, and they hear that once; the client's reading later reaches them as
/// it happens.
@Test func writabilityChangesWhileASpanIsSentReachTheResponderOnlyWhenTheyLast() throws {
    let bytes = [UInt8](repeating: 7, count: 256 * 1024)
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-span-\(UUID().uuidString)").path
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let (socket, watcher) = (SpanSocket(), WritabilityWatcher())
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandlers([socket, HTTP1Codec(), watcher])
    func get() throws -> EventLoopFuture<Void> {
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/photo")))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        while try channel.readInbound(as: HTTPRequestPart.self) != nil {}
        channel.write(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: String(bytes.count)])), promise: nil)
        let span = openRegion(path, count: bytes.count)
        let sent = channel.eventLoop.makePromise(of: Void.self)
        channel.pipeline.triggerUserOutboundEvent(HTTP1Codec.SendFile(span: span), promise: sent)
        channel.writeAndFlush(HTTPResponsePart.end(nil), promise: nil)
        return sent.futureResult
    }

    for _ in 0..<3 { try get().wait() }
    #expect(socket.regions == Array(repeating: bytes.count, count: 3))
    #expect(watcher.heard == [], "unwritable and writable again within one span: nothing to hear")

    socket.clientReads = false
    let unread = try get()
    #expect(watcher.heard == [false])
    socket.clientReads = true
    channel.flush()
    try unread.wait()
    #expect(watcher.heard == [false, true])
    _ = try channel.finish()
}

/// NIO's file handle owns the descriptor it holds: the codec gives it a duplicate of the span's,
/// which is closed once the span is written, and the span's own descriptor stays open for its
/// owner (the store's kept file) to close.
@Test func aSpanIsSentThroughADescriptorNIOOwns() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-span-\(UUID().uuidString)").path
    try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let socket = SpanSocket()
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandlers([socket, HTTP1Codec()])
    try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/photo")))
    try channel.writeInbound(HTTPServerRequestPart.end(nil))
    channel.write(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "4096"])), promise: nil)
    let span = openRegion(path, count: 4096)
    let sent = channel.eventLoop.makePromise(of: Void.self)
    channel.pipeline.triggerUserOutboundEvent(HTTP1Codec.SendFile(span: span), promise: sent)
    channel.writeAndFlush(HTTPResponsePart.end(nil), promise: nil)
    try sent.futureResult.wait()

    let (handle, descriptor) = try #require(socket.handles.first)
    #expect(descriptor >= 0 && descriptor != span.descriptor, "NIO holds a descriptor of its own, not the span's")
    #expect(!handle.isOpen, "the duplicate is closed once the span is written")
    #expect(fcntl(span.descriptor, F_GETFD) != -1, "the span's own descriptor is its owner's to close")
    _ = try channel.finish()
}

/// Where `HTTP1Codec` departs from NIO's pair on purpose: it decides whether a connection stays
/// open, for both listeners (see its documentation). Each case: the request bytes, the responses
/// written, the bytes expected on the wire, whether the connection is closed after them, and how
/// many requests reach the server.
struct Persistence: Sendable, CustomStringConvertible {
    let name: String
    let requests: String
    let responses: [HTTPResponsePart]
    let wire: String
    let closes: Bool
    var requestsRead = 1
    var description: String { name }
}

private let persistence: [Persistence] = [
    Persistence(name: "HTTP/1.1 stays open", requests: "GET /a HTTP/1.1\r\nHost: h\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", closes: false),
    Persistence(name: "HTTP/1.0 without keep-alive closes", requests: "GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nconnection: close\r\n\r\nok", closes: true),
    Persistence(name: "HTTP/1.0 with keep-alive stays open", requests: "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", closes: false),
    Persistence(name: "HTTP/1.0 without a length: no chunks, the close ends the body", requests: "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                responses: [response(200, []), body("abc"), body("de"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nabcde", closes: true),
    Persistence(name: "Connection: Close, and a request pipelined behind it is not read",
                requests: "GET /a HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\nPUT /b HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nconnection: close\r\n\r\nok", closes: true),
    Persistence(name: "CONNECT refused: framed, then closed",
                requests: "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n",
                responses: [response(405, [("Content-Length", "3")]), body("no!"), .end(nil)],
                wire: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 3\r\nconnection: close\r\n\r\nno!", closes: true),
    Persistence(name: "a GET announcing a body is answered, then closed",
                requests: "GET /a HTTP/1.1\r\nContent-Length: 9\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nconnection: close\r\n\r\nok", closes: true),
    Persistence(name: "a DELETE announcing chunks is answered, then closed",
                requests: "DELETE /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
                responses: [response(204, []), .end(nil)],
                wire: "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n", closes: true),
    Persistence(name: "an empty body announced is no body", requests: "GET /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ok"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", closes: false),
    Persistence(name: "a responder's Connection: close ends the connection", requests: "PUT /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
                responses: [response(403, [("Content-Length", "0"), ("Connection", "close")]), .end(nil)],
                wire: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true),
    Persistence(name: "a body short of its length: closed after it", requests: "GET /a HTTP/1.1\r\n\r\n",
                responses: [response(200, [("Content-Length", "5")]), body("ab"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", closes: true),
    Persistence(name: "a body past its length: the extra part refused, closed after it", requests: "GET /a HTTP/1.1\r\n\r\n",
                responses: [response(200, [("Content-Length", "2")]), body("ab"), body("cd"), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nab", closes: true),
    Persistence(name: "HEAD declares a length and sends none", requests: "HEAD /a HTTP/1.1\r\n\r\n",
                responses: [response(200, [("Content-Length", "5")]), .end(nil)],
                wire: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", closes: false),
]

@Test(arguments: persistence)
func theCodecEndsTheConnectionsThatMustEnd(_ exchange: Persistence) throws {
    let channel = EmbeddedChannel()
    let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
    try channel.pipeline.syncOperations.addHandlers([decoder, HTTP1Codec()])
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9000)).wait()
    // The bytes after a GET's announced body may not parse: that error is not what is checked.
    _ = try? channel.writeInbound(ByteBuffer(string: exchange.requests))
    var heads = 0
    while let part = try channel.readInbound(as: HTTPRequestPart.self) {
        if case .head = part { heads += 1 }
    }
    #expect(heads == exchange.requestsRead, "requests read after one that ends the connection")
    for part in exchange.responses { channel.write(part, promise: nil) }
    channel.flush()
    channel.embeddedEventLoop.run()
    var bytes = ""
    while let data = try channel.readOutbound(as: IOData.self) {
        guard case .byteBuffer(let buffer) = data else { Issue.record("a file region"); break }
        bytes += String(buffer: buffer)
    }
    #expect(bytes == exchange.wire)
    #expect(!channel.isActive == exchange.closes)
    _ = try? channel.finish()
}

/// Closes its descriptor when the last region that holds it is gone (what the local store's open files do).
final class OpenFile: Sendable {
    let descriptor: Int32
    init(_ path: String) { descriptor = open(path, O_RDONLY) }
    deinit { close(descriptor) }
}

/// All of the file at `path` as a zero-copy region that keeps it open.
func openRegion(_ path: String, count: Int) -> ZeroCopyRegion {
    let file = OpenFile(path)
    return ZeroCopyRegion(descriptor: file.descriptor, range: 0..<Int64(count), keepingOpen: file)
}
