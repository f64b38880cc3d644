import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing
import TollgateHTTP
import TollgateS3Store

/// The S3 store keeps its connections to the backend: a streamed GET read from an event loop
/// (the gateway's fast path) must not open a connection of its own. (AsyncHTTPClient closes a
/// connection opened for a request that requires an event loop as soon as no request waits for
/// that loop; the store once asked for that, and each large GET under load cost a new
/// connection: a TCP handshake, the backend's accept, and a port in TIME_WAIT.)
@Suite struct S3ConnectionReuseTests {
    static let objectSize = 256 * 1024

    @Test func streamedReadsFromAnEventLoopReuseTheirConnections() async throws {
        let backend = try await CountingBackend.start(bodySize: Self.objectSize)
        let store = try S3ObjectStore(configuration: S3StoreConfiguration(
            endpoint: "http://127.0.0.1:\(backend.port)", accessKeyID: "TESTKEY", secretAccessKey: "test-secret"
        ))
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            for _ in 0..<5 { try await Self.read(store) }
        }
        #expect(backend.accepted == 1, "5 GETs one after another, on one event loop")
        // Four at once, four times: the four connections of the first round serve the others.
        try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            for _ in 0..<4 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 { group.addTask { try await Self.read(store) } }
                    try await group.waitForAll()
                }
            }
        }
        #expect(backend.accepted <= 5, "16 GETs, 4 at a time")
        try await store.close()
        try await backend.stop()
    }

    /// A GET of the whole object, its body read to the end.
    static func read(_ store: S3ObjectStore) async throws {
        let read = try await store.getObject(bucket: "bucket", key: "object", range: nil)
        #expect(read.body.singleBuffer == nil, "streamed, not read whole")
        var length = 0
        for try await part in read.body { length += part.readableBytes }
        #expect(length == objectSize)
    }
}

/// A loopback HTTP/1.1 server that answers every request with 200 and `bodySize` bytes, keeping
/// the connection open, counts the connections it accepts and keeps the heads of the requests.
final class CountingBackend: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counter: Counter
    let port: Int

    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        let heads = Mutex<[HTTPRequestHead]>([])
    }

    var accepted: Int { counter.value.load(ordering: .relaxed) }
    var requests: [HTTPRequestHead] { counter.heads.withLock { $0 } }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, counter: Counter) {
        self.group = group
        self.channel = channel
        self.counter = counter
        port = channel.localAddress?.port ?? 0
    }

    static func start(bodySize: Int) async throws -> CountingBackend {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = Counter()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counter.value.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Answer(bodySize: bodySize, counter: counter))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return CountingBackend(group: group, channel: channel, counter: counter)
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    private final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let bodySize: Int
        let counter: Counter

        init(bodySize: Int, counter: Counter) {
            self.bodySize = bodySize
            self.counter = counter
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head(let head) = unwrapInboundIn(data) { counter.heads.withLock { $0.append(head) } }
            guard case .end = unwrapInboundIn(data) else { return }
            let headers: HTTPHeaders = [
                "Content-Length": String(bodySize), "ETag": "\"0123456789abcdef0123456789abcdef\"",
                "Last-Modified": "Sun, 29 Nov 2026 12:00:00 GMT", "Content-Type": "application/octet-stream",
            ]
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: UInt8(ascii: "a"), count: bodySize)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
