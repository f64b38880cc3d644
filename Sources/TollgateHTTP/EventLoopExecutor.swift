import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypesHTTP1

/// Runs a connection's Swift tasks on the connection's own event loop.
///
/// Hummingbird reads and writes a connection on its NIO event loop but runs the responder in a
/// task on Swift's global pool, so every request crosses threads twice (the request head in,
/// the response out), each a wake-up of a sleeping thread. With this task executor preferred
/// for the connection's task, the responder runs on the event loop that already has the bytes:
/// no hop. It must then never block: every blocking call in the gateway runs on the store's
/// `BlockingIO` pool or GRDB's queues, and awaiting them gives the loop back.
package final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: immutable; an EventLoop is thread-safe.
    let loop: any EventLoop

    package init(_ loop: any EventLoop) {
        self.loop = loop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}

/// A child channel whose connection task prefers its event loop's `EventLoopTaskExecutor`.
/// With a `largestRead`, the connection reads up to that many bytes at once when its peer
/// sends faster than it is read (NIO's default is 64 KiB): fewer, larger body parts for an
/// upload, each of which costs a trip through the HTTP decoder and the request body's stream.
/// Reads of small requests stay small: the allocator grows only after a read fills its buffer.
/// Its HTTP/1 codec is `HTTP1Codec` instead of NIO's codec and response encoder (see there),
/// behind a request decoder with the same limits (`decoderLimits`, Hummingbird's).
/// `beforeResponder` handlers (the gateway's `GatewayFastPath` and `ExpectContinueHandler`)
/// go, in order, just before its requests reach Hummingbird's responder: after
/// `HTTPConnectionStateHandler`, which then sees every request and response, wherever it is
/// answered.
package struct EventLoopPinnedChannel<Base: ServerChildChannel>: ServerChildChannel {
    package typealias Value = Base.Value
    let base: Base
    var decoderLimits = HTTP1Channel.Configuration.DecoderConfiguration()
    var largestRead: Int? = nil
    var beforeResponder: (@Sendable (Logger) -> [any ChannelHandler])? = nil

    package init(
        base: Base, decoderLimits: HTTP1Channel.Configuration.DecoderConfiguration = .init(), largestRead: Int? = nil,
        beforeResponder: (@Sendable (Logger) -> [any ChannelHandler])? = nil
    ) {
        self.base = base
        self.decoderLimits = decoderLimits
        self.largestRead = largestRead
        self.beforeResponder = beforeResponder
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        var ready = channel.eventLoop.makeSucceededVoidFuture()
        if let largestRead {
            let allocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: largestRead)
            ready = channel.setOption(ChannelOptions.recvAllocator, value: allocator)
        }
        return ready.flatMap { base.setup(channel: channel, logger: logger) }.flatMap { value in
            let pipeline = channel.pipeline.syncOperations
            do {
                if let beforeResponder {
                    try pipeline.addHandlers(beforeResponder(logger), position: .after(try pipeline.handler(type: HTTPConnectionStateHandler.self)))
                }
                return try HTTP1Codec.replaceNIOsHandlers(in: pipeline, limits: decoderLimits).map { value }
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
    }

    package func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor(value.channel.eventLoop)) {
            await base.handle(value: value, logger: logger)
        }
    }
}
