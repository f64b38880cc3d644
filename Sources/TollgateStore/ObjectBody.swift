import NIOCore

/// An object's bytes as an async sequence of `ByteBuffer`s, whatever the store behind it.
///
/// A body is either already in memory (`init(_: ByteBuffer)`: a small object, a cached one, the
/// in-memory store), which the gateway sends with the response head in one write and which
/// costs no allocation beyond the buffer; or any sequence a store supplies (`init(_:)` with a
/// sequence: a remote store's response), type-erased here so that handlers never see a store's
/// own types; or a range of a local file (the local store's larger reads), which iterates as
/// bytes read in chunks and also offers itself as `fileSegments`, for a sender that can pass
/// file pages to the kernel instead of copying them through memory.
public struct ObjectBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    private enum Source: Sendable {
        case memory(ByteBuffer)
        case stream(@Sendable () -> () async throws -> ByteBuffer?)
        case file(FileChunks, FileSegments)
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

    /// A range of a local file, iterated as `chunks` or sent as `segments`.
    init(chunks: FileChunks, segments: FileSegments) {
        source = .file(chunks, segments)
    }

    /// The body as segments of a local file, when it is one.
    public var fileSegments: FileSegments? {
        if case .file(_, let segments) = source { return segments }
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
        case .file(let chunks, _):
            var iterator = chunks.makeAsyncIterator()
            return AsyncIterator(buffer: nil, next: { try await iterator.next() })
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
