import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

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
        // The connection's event loop is the caller's when the caller runs on one of the client's
        // (the gateway's fast path): parts then reach the writer without changing threads.
        var preference = HTTPClient.EventLoopPreference.indifferent
        if let current = client.eventLoopGroup.makeIterator().first(where: { $0.inEventLoop }) {
            preference = .delegateAndChannel(on: current)
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
        enum Taken { case bytes(ByteBuffer, resume: EventLoopPromise<Void>?), end, failed(any Error), wait }
        let taken: Taken = state.withLock { state in
            guard let first = state.parts.popFirst() else {
                if let failure = state.failure { return .failed(failure) }
                return state.finished ? .end : .wait
            }
            state.buffered -= first.readableBytes
            var resume: EventLoopPromise<Void>?
            if state.buffered < Self.readAhead / 2 {
                resume = state.paused
                state.paused = nil
            }
            return .bytes(first, resume: resume)
        }
        switch taken {
        case .bytes(let bytes, let resume):
            resume?.succeed()
            return bytes
        case .end:
            return nil
        case .failed(let error):
            throw error
        case .wait:
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                let now: Result<ByteBuffer?, any Error>? = state.withLock { state in
                    // What arrived between the two looks.
                    if let part = state.parts.popFirst() {
                        state.buffered -= part.readableBytes
                        return .success(part)
                    }
                    if let failure = state.failure { return .failure(failure) }
                    if state.finished { return .success(nil) }
                    state.consumer = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                abandon()
            }
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
