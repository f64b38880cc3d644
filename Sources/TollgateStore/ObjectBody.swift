import NIOCore

/// An object's bytes as an async sequence of `ByteBuffer`, whatever the store behind it.
///
/// A body is either already in memory (`init(_: ByteBuffer)`: a small object, a cached one, the
/// in-memory store), which the gateway sends with the response head in one write and which
/// costs no allocation beyond the buffer; or any sequence a store supplies (`init(_:)` with a
/// sequence: a remote store's response), type-erased here so that handlers never see a store's
/// own types (with `init(batches:)`, a sequence that hands over the parts that have arrived
/// together, which a sender writes at once: `batches`); or a body that also offers itself for
/// zero-copy sending (`init(_: ZeroCopyBody)`, the local store's larger reads, when
/// `StoreCapabilities.zeroCopyReads`): it iterates as bytes read in chunks, and a sender that can
/// pass file pages to the kernel uses `zeroCopy` instead.
public struct ObjectBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    private enum Source: Sendable {
        case memory(ByteBuffer)
        case stream(@Sendable () -> () async throws -> ByteBuffer?)
        case batches(@Sendable () -> () async throws -> [ByteBuffer]?)
        case zeroCopy(ZeroCopyBody)
    }

    private let source: Source

    /// A body held in memory.
    public init(_ buffer: ByteBuffer) {
        source = .memory(buffer)
    }

    /// A body produced by `sequence`, which is iterated once per iteration of the body.
    public init<Base: AsyncSequence & Sendable>(_ sequence: Base) where Base.Element == ByteBuffer {
        source = .stream {
            var iterator = sequence.makeAsyncIterator()
            return { try await iterator.next() }
        }
    }

    /// A body produced by `sequence` in batches: each holds parts that had arrived when it was
    /// asked for (at least one), so that a sender writes them with one system call.
    public init<Base: AsyncSequence & Sendable>(batches sequence: Base) where Base.Element == [ByteBuffer] {
        source = .batches {
            var iterator = sequence.makeAsyncIterator()
            return { try await iterator.next() }
        }
    }

    /// A body that can also be sent without copying its bytes through memory.
    public init(_ zeroCopy: ZeroCopyBody) {
        source = .zeroCopy(zeroCopy)
    }

    /// The body as pieces a sender can pass to the kernel, when the store offers that.
    public var zeroCopy: ZeroCopyBody? {
        if case .zeroCopy(let body) = source { return body }
        return nil
    }

    /// Whether the whole body is in memory (`singleBuffer`, or empty).
    public var isInMemory: Bool {
        if case .memory = source { return true }
        return false
    }

    /// The whole body, when it is in memory and not empty.
    public var singleBuffer: ByteBuffer? {
        if case .memory(let buffer) = source, buffer.readableBytes > 0 { return buffer }
        return nil
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .memory(let buffer):
            return AsyncIterator(buffer: buffer.readableBytes > 0 ? buffer : nil, next: nil)
        case .stream(let make):
            return AsyncIterator(buffer: nil, next: make())
        case .batches(let make):
            let nextBatch = make()
            var batch: [ByteBuffer] = []
            var taken = 0
            return AsyncIterator(buffer: nil) {
                while taken == batch.count {
                    guard let next = try await nextBatch() else { return nil }
                    (batch, taken) = (next, 0)
                }
                defer { taken += 1 }
                return batch[taken]
            }
        case .zeroCopy(let body):
            return AsyncIterator(buffer: nil, next: body.makeBytes())
        }
    }

    /// The body as batches of parts to write at once: what a batched body's sequence hands over,
    /// else one part per batch.
    public var batches: Batches { Batches(body: self) }

    public struct Batches: AsyncSequence, Sendable {
        public typealias Element = [ByteBuffer]
        let body: ObjectBody

        public func makeAsyncIterator() -> AsyncIterator {
            if case .batches(let make) = body.source { return AsyncIterator(next: make()) }
            var parts = body.makeAsyncIterator()
            return AsyncIterator { try await parts.next().map { [$0] } }
        }

        public struct AsyncIterator: AsyncIteratorProtocol {
            let next: () async throws -> [ByteBuffer]?
            public mutating func next() async throws -> [ByteBuffer]? { try await next() }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var buffer: ByteBuffer?
        let next: (() async throws -> ByteBuffer?)?

        public mutating func next() async throws -> ByteBuffer? {
            if let next { return try await next() }
            defer { buffer = nil }
            return buffer
        }
    }
}

/// A range of an open file whose pages were in the page cache when the store checked: a sender
/// can pass it to the kernel (`sendfile`) without reading it, and without the kernel waiting on
/// the disk. The descriptor stays open as long as the region exists (its `owner` holds it).
public struct ZeroCopyRegion: Sendable {
    /// The open descriptor, valid while this region exists; positional use only (no seeking).
    public let descriptor: Int32
    public let range: Range<Int64>
    private let owner: any Sendable

    public init(descriptor: Int32, range: Range<Int64>, keepingOpen owner: any Sendable) {
        self.descriptor = descriptor
        self.range = range
        self.owner = owner
    }
}

/// One piece of a zero-copy body: a region of cached pages to send as is, or bytes (read from the
/// disk because they were not cached: reading them is what caches them).
public enum ZeroCopyPiece: Sendable {
    case region(ZeroCopyRegion)
    case bytes(ByteBuffer)
}

/// A body a store offers for zero-copy sending (`StoreCapabilities.zeroCopyReads`): its pieces,
/// and `whole`, the entire body as one region of cached pages when it is one, which a sender
/// can pass to the kernel at once without waiting on anything.
public struct ZeroCopyBody: AsyncSequence, Sendable {
    public typealias Element = ZeroCopyPiece

    public let whole: ZeroCopyRegion?
    private let makePieces: @Sendable () -> () async throws -> ZeroCopyPiece?
    fileprivate let makeBytes: @Sendable () -> () async throws -> ByteBuffer?

    /// `pieces` and `bytes` are the same body, as pieces to send and as bytes to iterate.
    public init<Pieces: AsyncSequence & Sendable, Bytes: AsyncSequence & Sendable>(whole: ZeroCopyRegion?, pieces: Pieces, bytes: Bytes)
    where Pieces.Element == ZeroCopyPiece, Bytes.Element == ByteBuffer {
        self.whole = whole
        makePieces = {
            var iterator = pieces.makeAsyncIterator()
            return { try await iterator.next() }
        }
        makeBytes = {
            var iterator = bytes.makeAsyncIterator()
            return { try await iterator.next() }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(next: makePieces())
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let next: () async throws -> ZeroCopyPiece?
        public mutating func next() async throws -> ZeroCopyPiece? { try await next() }
    }
}
