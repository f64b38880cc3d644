// libFuzzer target: the gateway's connection, from bytes in to bytes out. The input is what a
// client sends on one connection (pipelined requests, malformed ones, bodies, Expect, HTTP/1.0,
// CONNECT …); it goes through NIO's request decoder, HTTP1Codec and GatewayFastPath (with a real
// Gateway over the in-memory store, a fixed clock and the root credentials the seeds are signed
// with) to a stand-in responder that answers every request handed on, in order, as Hummingbird's
// would. What comes out must be, for any input:
//   - a sequence of well-framed HTTP/1.1 responses (a length that matches its body, or chunks,
//     or no body where the request or status allows none), one per request at most, plus a 400
//     for a request that does not parse;
//   - in request order: the responder's answer to request i is response i;
//   - every request read whole answered, and the 400 for what does not parse after them all;
//   - ended where an answer said `Connection: close`: nothing after it, and the connection closed.
// A violation traps, and libFuzzer keeps the input. Seeds: python3 fuzz/make_corpus.py (presigned
// requests for this root secret and clock).
import Dispatch
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
@testable import TollgateConfig
@testable import TollgateGateway
@testable import TollgateHTTP
import TollgateMemoryStore
import TollgateStore
@testable import TollgateServer
@testable import TollgateTokenService

private let rootAccessKeyID = "FUZZROOTACCESSKEY"
private let rootSecret = "fuzz-root-secret-0123456789abcdefghijklmn"
private let now = Date(timeIntervalSince1970: 1_773_500_966)

/// The gateway every input meets: bucket `fuzz` with `small.txt` (in memory, so GETs of it are
/// answered at once) and the root credentials; missing keys go to the store's task.
private let gateway: Gateway = {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-fuzz-http1-\(getpid())").path
    try! FileManager.default.createDirectory(atPath: directory + "/policy", withIntermediateDirectories: true)
    try! #"{"Version":"1","Statement":[{"Effect":"Allow","Action":["oss:*"],"Resource":["acs:oss:*:*:*"]}]}"#
        .write(toFile: directory + "/policy/all.txt", atomically: true, encoding: .utf8)
    try! """
        {"AccessKeyID": "\(rootAccessKeyID)", "AccessKeySecret": "\(rootSecret)", "RoleArn": "", "TokenExpireTime": "900",
         "PolicyFile": "policy/all.txt", "DataDirectory": "\(directory)/data"}
        """.write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
    let config = try! TollgateConfig.load(path: directory + "/config.json", environment: [:])
    let snapshot = try! ConfigSnapshot(path: directory + "/config.json", root: try! RootCredentials.resolve(config), environment: [:],
                                       clock: { now })
    let store = MemoryObjectStore()
    let ready = DispatchSemaphore(value: 0)
    Task {
        _ = try! await store.ensureBuckets(["fuzz"])
        let (body, writer) = AsyncStream.makeStream(of: ByteBuffer.self)
        writer.yield(ByteBuffer(string: "small object\n"))
        writer.finish()
        _ = try! await store.putObject(bucket: "fuzz", key: "small.txt", body: body)
        ready.signal()
    }
    ready.wait()
    return makeGateway(state: TollgateState(snapshot, clock: { now }), store: store, sendsFiles: false)
}()

/// Between the decoder and the codec: numbers each request (`x-fuzz-index`, which the responder
/// echoes) and records its method.
private final class Numbering: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    var methods: [HTTPMethod] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        head.headers.replaceOrAdd(name: "x-fuzz-index", value: String(methods.count))
        methods.append(head.method)
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// After the codec: counts the requests it passes on whole (head and end), each of which must
/// get its answer unless the connection ends first.
private final class Passed: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    var ended = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { ended += 1 }
        context.fireChannelRead(data)
    }
}

/// Stands where Hummingbird's responder does: answers each request handed on when its end
/// arrives, in order, echoing its number; a read error gets Hummingbird's 400 and close.
private final class Responder: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart
    private var current: HTTPRequest?
    private var failed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): current = head
        case .body: break
        case .end:
            guard let head = current, !failed else { return }
            current = nil
            var fields: HTTPFields = [.contentLength: "5"]
            fields[HTTPField.Name("x-fuzz-index")!] = head.headerFields[HTTPField.Name("x-fuzz-index")!] ?? "?"
            context.write(wrapOutboundOut(.head(HTTPResponse(status: .ok, headerFields: fields))), promise: nil)
            if head.method != .head { context.write(wrapOutboundOut(.body(ByteBuffer(string: "hello"))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !failed else { return }
        failed = true
        var fields: HTTPFields = [.connection: "close", .contentLength: "0"]
        fields[HTTPField.Name("x-fuzz-error")!] = "1"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .badRequest, headerFields: fields))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzHTTP1: \(message())") }
}

/// Parses `bytes` as the responses to requests of `methods`, checking the properties above.
private func verify(_ bytes: [UInt8], methods: [HTTPMethod], ended: Int, closed: Bool) {
    var at = 0
    func line() -> String? {
        var end = at
        while end + 1 < bytes.count, !(bytes[end] == 13 && bytes[end + 1] == 10) { end += 1 }
        guard end + 1 < bytes.count else { return nil }
        defer { at = end + 2 }
        return String(decoding: bytes[at..<end], as: UTF8.self)
    }
    var index = 0
    while at < bytes.count {
        guard let status = line() else { return check(false, "a truncated status line at \(at)") }
        let parts = status.split(separator: " ", maxSplits: 2)
        check(parts.count >= 2 && parts[0] == "HTTP/1.1", "not a status line: \(status)")
        let code = Int(parts[1]) ?? -1
        var fields: [(String, String)] = []
        while true {
            guard let field = line() else { return check(false, "a truncated head") }
            if field.isEmpty { break }
            let colon = field.firstIndex(of: ":") ?? field.endIndex
            fields.append((field[..<colon].lowercased(), field[colon...].dropFirst().trimmingCharacters(in: .whitespaces)))
        }
        func value(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
        if (100..<200).contains(code) {
            check(value("content-length") == nil && value("transfer-encoding") == nil, "an interim response with framing")
            continue
        }
        // Response `index` answers request `index` (a 400 after the last may answer none).
        check(index <= methods.count, "response \(index) with only \(methods.count) requests")
        let method = index < methods.count ? methods[index] : .GET
        if let echoed = value("x-fuzz-index") { check(echoed == String(index), "request \(echoed)'s answer is response \(index)") }
        // The 400 for what does not parse comes after the answers of every request before it.
        if value("x-fuzz-error") != nil { check(index == ended, "the 400 is response \(index), after \(ended) requests") }
        check(!(value("content-length") != nil && value("transfer-encoding") != nil), "both framings")
        if method == .HEAD || code == 204 || code == 304 || (method == .CONNECT && (200..<300).contains(code)) {
            // no body
        } else if let chunked = value("transfer-encoding") {
            check(chunked == "chunked", "transfer-encoding \(chunked)")
            while true {
                guard let size = line().flatMap({ Int($0.split(separator: ";")[0], radix: 16) }) else { return check(false, "a bad chunk size") }
                if size == 0 {
                    while let trailer = line(), !trailer.isEmpty {}
                    break
                }
                check(at + size + 2 <= bytes.count, "a truncated chunk")
                at += size + 2
            }
        } else if let length = value("content-length").flatMap({ Int($0) }) {
            check(at + length <= bytes.count, "a body of \(bytes.count - at) bytes where \(length) were declared")
            at += length
        } else {
            check(value("connection")?.lowercased().contains("close") == true, "\(code) without framing")
            at = bytes.count
        }
        index += 1
        if value("connection")?.lowercased().contains("close") == true {
            check(at == bytes.count, "\(bytes.count - at) bytes after an answer that said close")
            check(closed, "an answer said close and the connection stayed open")
            return
        }
    }
    // Still open: every request read whole has its answer, no more and no fewer.
    if !closed { check(index == ended, "\(index) answers to \(ended) requests") }
}

private func run(_ input: [UInt8]) async {
    let numbering = Numbering()
    let passed = Passed()
    let channel = NIOAsyncTestingChannel()
    let logger = Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
    try! await channel.pipeline.addHandlers([
        ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)), numbering, HTTP1Codec(), passed,
        GatewayFastPath(gateway: gateway, logger: logger), Responder(),
    ])
    try! await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9000))
    _ = try? await channel.writeInbound(ByteBuffer(bytes: input))
    // The store's tasks run on the channel's loop: run it until nothing more is written.
    var output: [UInt8] = []
    var quiet = 0
    while quiet < 3 {
        await channel.testingEventLoop.run()
        var wrote = false
        while let data = try? await channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = data {
                output += buffer.readableBytesView
                wrote = true
            }
        }
        quiet = wrote ? 0 : quiet + 1
        await Task.yield()
    }
    let closed = !(try! await channel.testingEventLoop.executeInContext { channel.isActive })
    let (methods, ended) = try! await channel.testingEventLoop.executeInContext { (numbering.methods, passed.ended) }
    verify(output, methods: methods, ended: ended, closed: closed)
    _ = try? await channel.finish()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    _ = gateway
    let done = DispatchSemaphore(value: 0)
    Task {
        await run(input)
        done.signal()
    }
    done.wait()
    return 0
}
