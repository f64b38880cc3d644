import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TollgateStore

/// A backend answer's body as it arrives, read ahead by up to `ResponsePipe.readAhead` bytes.
///
/// AsyncHTTPClient's own async body hands over one part at a time and stops reading the socket
/// until that part is taken, so every part of a large GET cost a round trip between the
/// connection's event loop and the consuming task. Read through a `ResponsePipe`, the backend's
/// socket keeps being read while the gateway writes, parts that arrived while the gateway wrote
/// are taken without waiting, and memory per body stays bounded.
/// A body dropped before its end cancels its request (the connection is closed, not reused).
struct BackendBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    private enum Source: Sendable {
        case pipe(PipeHandle)
        case client(HTTPClientResponse.Body)
    }

    private let source: Source

    fileprivate init(pipe: ResponsePipe) { source = .pipe(PipeHandle(pipe)) }

    init(_ body: HTTPClientResponse.Body) { source = .client(body) }

    struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate var pipe: PipeHandle?
        var client: HTTPClientResponse.Body.AsyncIterator?

        mutating func next() async throws -> ByteBuffer? {
            if let pipe { return try await pipe.pipe.next() }
            return try await client?.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .pipe(let handle): AsyncIterator(pipe: handle, client: nil)
        case .client(let body): AsyncIterator(pipe: nil, client: body.makeAsyncIterator())
        }
    }

    /// The body for the gateway to send: read through a pipe, in batches of the parts that have
    /// arrived (up to `ResponsePipe.batchLimit`), which the gateway writes with one system call
    /// (a 1 MiB GET arrives in about 18 parts, often several at once).
    var objectBody: ObjectBody {
        switch source {
        case .pipe(let handle): ObjectBody(batches: Batches(pipe: handle))
        case .client: ObjectBody(self)
        }
    }

    private struct Batches: AsyncSequence, Sendable {
        let pipe: PipeHandle

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pipe: pipe) }

        struct AsyncIterator: AsyncIteratorProtocol {
            let pipe: PipeHandle
            func next() async throws -> [ByteBuffer]? { try await pipe.pipe.nextBatch() }
        }
    }

    /// The whole body, failing past `limit` bytes.
    func collect(upTo limit: Int) async throws -> ByteBuffer {
        var whole = ByteBuffer()
        for try await var part in self {
            guard whole.readableBytes + part.readableBytes <= limit else { throw BodyTooLarge() }
            if whole.readableBytes == 0 { whole = part } else { whole.writeBuffer(&part) }
        }
        return whole
    }

    struct BodyTooLarge: Error {}
}

/// Owned by the bodies that read a pipe: when the last one goes, the request goes with it.
private final class PipeHandle: Sendable {
    let pipe: ResponsePipe
    init(_ pipe: ResponsePipe) { self.pipe = pipe }
    deinit { pipe.abandon() }
}

/// The delegate that receives one backend answer on the connection's event loop and hands it to
/// one consumer: the head through `send`, the body through `next`.
final class ResponsePipe: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    /// Bytes read ahead of the consumer before the connection stops reading.
    static let readAhead = 1024 * 1024

    private struct State {
        var head: CheckedContinuation<HTTPResponseHead, any Error>?
        var parts = CircularBuffer<ByteBuffer>()
        var buffered = 0
        var finished = false
        var failure: (any Error)?
        var consumer: CheckedContinuation<ByteBuffer?, any Error>?
        /// Completed when the consumer has taken enough for the connection to read again.
        var paused: EventLoopPromise<Void>?
        var task: HTTPClient.Task<Void>?
        var abandoned = false
    }

    private let state = Mutex(State())

    /// Sends `request` and waits for the answer's head; the body follows through `BackendBody`.
    static func send(_ request: HTTPClient.Request, client: HTTPClient, deadline: NIODeadline,
                     logger: Logger) async throws -> (HTTPResponseHead, BackendBody) {
        let pipe = ResponsePipe()
        // When the caller runs on one of the client's event loops (the gateway's fast path), the
        // answer is delivered there, and an idle connection on that loop is taken first (a new one
        // is opened there): parts then mostly reach the writer without changing threads. Only
        // preferred, not required: AsyncHTTPClient closes a connection opened for a required
        // loop as soon as no request waits for that loop, so every answer would cost a new
        // connection to the backend.
        var preference = HTTPClient.EventLoopPreference.indifferent
        if let current = client.eventLoopGroup.makeIterator().first(where: { $0.inEventLoop }) {
            preference = .delegate(on: current)
        }
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseHead, any Error>) in
                pipe.state.withLock { $0.head = continuation }
                let task = client.execute(request: request, delegate: pipe, eventLoop: preference, deadline: deadline, logger: logger)
                let cancel = pipe.state.withLock { state in
                    state.task = task
                    return state.abandoned
                }
                if cancel { task.cancel() }
            }
        } onCancel: {
            pipe.abandon()
        }
        return (head, BackendBody(pipe: pipe))
    }

    // MARK: The connection's side (its event loop)

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let continuation = state.withLock { state in
            defer { state.head = nil }
            return state.head
        }
        continuation?.resume(returning: head)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        enum Next { case handed(CheckedContinuation<ByteBuffer?, any Error>), read, pause(EventLoopPromise<Void>) }
        let next: Next = state.withLock { state in
            if let consumer = state.consumer {
                state.consumer = nil
                return .handed(consumer)
            }
            guard !state.abandoned else { return .read }
            state.parts.append(buffer)
            state.buffered += buffer.readableBytes
            guard state.buffered >= Self.readAhead else { return .read }
            let promise = task.eventLoop.makePromise(of: Void.self)
            state.paused = promise
            return .pause(promise)
        }
        switch next {
        case .handed(let consumer):
            consumer.resume(returning: buffer)
            return task.eventLoop.makeSucceededVoidFuture()
        case .read:
            return task.eventLoop.makeSucceededVoidFuture()
        case .pause(let promise):
            return promise.futureResult
        }
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        let consumer: CheckedContinuation<ByteBuffer?, any Error>? = state.withLock { state in
            state.finished = true
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume(returning: nil)
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        let (head, consumer) = state.withLock { state in
            state.failure = error
            defer { state.head = nil; state.consumer = nil }
            return (state.head, state.consumer)
        }
        head?.resume(throwing: error)
        consumer?.resume(throwing: error)
    }

    // MARK: The consumer's side

    /// The next part, as the connection read it. (Parts are not merged: copying them into larger
    /// buffers cost more, in fresh pages to fault in, than the writes it saved.)
    func next() async throws -> ByteBuffer? {
        if let taken = state.withLock({ Self.take(&$0) }) { return try taken.get() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // What arrived between the two looks, else the connection hands the consumer the next.
                let taken = state.withLock { state in
                    let taken = Self.take(&state)
                    if taken == nil { state.consumer = continuation }
                    return taken
                }
                if let taken { continuation.resume(with: Result { try taken.get() }) }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Every part that has arrived, up to `batchLimit` (at least one, waiting for it if none
    /// has), nil at the end.
    func nextBatch() async throws -> [ByteBuffer]? {
        if let taken = state.withLock({ Self.takeAll(&$0) }) { return try taken.get() }
        return try await next().map { [$0] }
    }

    /// What the consumer takes next from `state`: a part, the end or the failure; nil when it
    /// must wait. Taking a part may let the paused connection read again.
    private static func take(_ state: inout State) -> Taken<ByteBuffer?>? {
        guard let part = state.parts.popFirst() else { return ending(state) }
        state.buffered -= part.readableBytes
        return Taken(.success(part), resume: resumable(&state))
    }

    /// The most bytes one batch takes before its last part: what a consumer holds while it
    /// writes them, on top of what the pipe reads ahead (the bench's 64 downloads at once).
    static let batchLimit = 256 * 1024

    /// `take` for every part that has arrived, up to `batchLimit`.
    private static func takeAll(_ state: inout State) -> Taken<[ByteBuffer]?>? {
        guard !state.parts.isEmpty else { return ending(state) }
        var parts: [ByteBuffer] = []
        var taken = 0
        while taken < batchLimit, let part = state.parts.popFirst() {
            parts.append(part)
            taken += part.readableBytes
        }
        state.buffered -= taken
        return Taken(.success(parts), resume: resumable(&state))
    }

    /// The failure or the end once every part is taken; nil while more may come.
    private static func ending<Value: ExpressibleByNilLiteral>(_ state: State) -> Taken<Value>? {
        if let failure = state.failure { return Taken(.failure(failure)) }
        return state.finished ? Taken(.success(nil)) : nil
    }

    /// The paused connection, once the consumer has taken enough for it to read again.
    private static func resumable(_ state: inout State) -> EventLoopPromise<Void>? {
        guard state.buffered < readAhead / 2 else { return nil }
        defer { state.paused = nil }
        return state.paused
    }

    /// Parts (nil: the end) or the failure, and the connection to resume once they are taken.
    private struct Taken<Value> {
        let result: Result<Value, any Error>
        var resume: EventLoopPromise<Void>?

        init(_ result: Result<Value, any Error>, resume: EventLoopPromise<Void>? = nil) {
            self.result = result
            self.resume = resume
        }

        /// Resumes the connection (outside the lock), then hands over the result.
        func get() throws -> Value {
            resume?.succeed()
            return try result.get()
        }
    }

    /// The consumer is gone: the request is cancelled and what was read ahead is dropped.
    func abandon() {
        let (task, paused, finished) = state.withLock { state in
            state.abandoned = true
            state.parts.removeAll()
            state.buffered = 0
            defer { state.paused = nil }
            return (state.task, state.paused, state.finished || state.failure != nil)
        }
        if !finished { task?.cancel() }
        paused?.succeed()
    }
}
