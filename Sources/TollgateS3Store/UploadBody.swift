import NIOCore
import Synchronization
import TollgateCrypto
import TollgateSignature
import TollgateStore

/// A client's body on its way to the backend: iterated once, by the one request that sends it
/// (`@unchecked Sendable`: the HTTP client reads it from its own task, while the store's call
/// awaits that request, so no two tasks ever touch it at once). It counts the bytes, checks
/// them against the announced length, and marks its source's failures (`SourceFailed`), which
/// are the client's and not the backend's.
final class UploadBody: @unchecked Sendable {
    /// The bytes the body has, when announced.
    let length: Int64?
    private let nextBuffer: () async throws -> ByteBuffer?
    private(set) var count: Int64 = 0

    /// Whether a read of the source is under way, who waits for it to end, whether the source
    /// ended, and whether the request gave up on the body (`drain`).
    private struct State {
        var reading = false
        var waiter: CheckedContinuation<Void, Never>?
        var ended = false
        var abandoned = false
    }
    private let state = Mutex(State())

    /// The body's own source failed (the client went away, or its body did not verify).
    struct SourceFailed: Error {
        let error: any Error
    }

    /// The body had more or fewer bytes than announced.
    struct LengthMismatch: Error, CustomStringConvertible {
        let announced: Int64
        let received: Int64
        var description: String { "the body had \(received) bytes, not the \(announced) announced" }
    }

    /// The source's iterator is made at the first read, not before: a request that fails before
    /// it sends any byte leaves the client's body unread, for the server to drain (an iterator
    /// made and dropped would leave it nothing to drain with).
    init<Base: AsyncSequence>(_ base: Base, length: Int64?) where Base.Element == ByteBuffer {
        var iterator: Base.AsyncIterator?
        nextBuffer = {
            if iterator == nil { iterator = base.makeAsyncIterator() }
            return try await iterator!.next()
        }
        self.length = length
    }

    /// The request stopped reading the body: the backend answered before it had it all (an
    /// error), or did not answer. The server must not answer while a read of the client's body is
    /// under way (its own drain of the connection would read at the same time), so this waits for
    /// such a read to end, then reads and drops the rest of the body, as a server does with the
    /// body of a request it refuses.
    func drain() async {
        let reading: Bool = state.withLock { state in
            state.abandoned = true
            return state.reading
        }
        if reading {
            await withCheckedContinuation { continuation in
                let ready: Bool = state.withLock { state in
                    guard state.reading else { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
        while !state.withLock({ $0.ended }) {
            guard (try? await read()) != nil else { return }
        }
    }

    /// One read of the source, marked as under way.
    private func read() async throws -> ByteBuffer? {
        state.withLock { $0.reading = true }
        defer {
            let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
                state.reading = false
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
        do {
            let buffer = try await nextBuffer()
            if buffer == nil { state.withLock { $0.ended = true } }
            return buffer
        } catch {
            state.withLock { $0.ended = true }
            throw error
        }
    }

    /// The next buffer of the source (never an empty one), or nil at its end.
    func next() async throws -> ByteBuffer? {
        while true {
            if state.withLock({ $0.abandoned }) { throw SourceFailed(error: CancellationError()) }
            let buffer: ByteBuffer?
            do { buffer = try await read() } catch { throw SourceFailed(error: error) }
            guard let buffer else {
                if let length, count != length { throw SourceFailed(error: LengthMismatch(announced: length, received: count)) }
                return nil
            }
            if buffer.readableBytes == 0 { continue }
            count += Int64(buffer.readableBytes)
            if let length, count > length { throw SourceFailed(error: LengthMismatch(announced: length, received: count)) }
            return buffer
        }
    }

    /// The most of a body of unknown length that is gathered to learn its length: S3 needs a
    /// body's length before its first byte (RGW refuses `Transfer-Encoding: chunked` with 411).
    static let unknownLengthLimit = 8 * 1024 * 1024

    /// Bodies up to this size are gathered and sent in one piece, signed with their SHA-256 (an
    /// empty aws-chunked body is refused by RGW), and sent again when the request is retried.
    static let smallBody: Int64 = 128 * 1024

    /// How the body goes to the backend: streamed when its length is known and more than
    /// `smallBody`; gathered when it is small or of unknown length (up to `unknownLengthLimit`,
    /// then `notSupported`).
    func prepared() async throws -> S3Call.Body {
        if let length, length > Self.smallBody { return .stream(self) }
        var gathered = ByteBuffer()
        while let buffer = try await nextUnwrapped() {
            guard count <= Self.unknownLengthLimit else {
                throw StoreError.notSupported("a body without Content-Length of more than \(Self.unknownLengthLimit) bytes (the storage backend needs the length first)")
            }
            var piece = buffer
            gathered.writeBuffer(&piece)
        }
        return .bytes(gathered)
    }

    /// `next`, with the source's own failure as it was.
    private func nextUnwrapped() async throws -> ByteBuffer? {
        do { return try await next() } catch let failure as SourceFailed { throw failure.error }
    }

    /// The body as it is, one buffer behind its source: a buffer is handed on only once the next
    /// one (or the source's end, with every check of the source passed) has arrived. So when the
    /// source fails at its very end (a checksum that does not match), the last bytes are never
    /// sent and the backend, short of the body it was promised, stores nothing.
    func passingThrough() -> PassThrough { PassThrough(body: self) }

    struct PassThrough: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let body: UploadBody

        struct AsyncIterator: AsyncIteratorProtocol {
            let body: UploadBody
            var pending: ByteBuffer?
            var finished = false

            mutating func next() async throws -> ByteBuffer? {
                if finished { return nil }
                if pending == nil {
                    pending = try await body.next()
                    if pending == nil {
                        finished = true
                        return nil
                    }
                }
                let following = try await body.next()
                let out = pending
                pending = following
                if following == nil { finished = true }
                return out
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: body) }
    }
}

/// A body as `aws-chunked` with every chunk signed (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`): the
/// backend checks each chunk's SHA-256 and signature as it arrives, so a byte changed on the way
/// fails the upload there. Chunks are `chunkSize` bytes but the last; the final, empty chunk is
/// sent only after the source ended with every check passed, so a body that fails at its end is
/// never complete at the backend.
struct SignedChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    static let chunkSize = 512 * 1024
    let base: UploadBody
    let length: Int64
    let signer: AWSChunkSigner

    /// `HEX;chunk-signature=<64 hex>\r\n…\r\n` for each chunk, then the final chunk.
    static func encodedLength(_ length: Int64) -> Int64 {
        func chunk(_ size: Int64) -> Int64 {
            Int64(String(size, radix: 16).utf8.count) + Int64(";chunk-signature=".utf8.count) + 64 + 2 + size + 2
        }
        let size = Int64(chunkSize)
        let full = length / size
        let rest = length % size
        return full * chunk(size) + (rest > 0 ? chunk(rest) : 0) + chunk(0)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let base: UploadBody
        var signer: AWSChunkSigner
        /// Payload bytes still to be sent in chunks.
        var remaining: Int64
        var leftover: ByteBuffer?
        var sentFinal = false
        /// The rest of the chunk whose header went last: its payload's pieces, then its CRLF.
        var queued = CircularBuffer<ByteBuffer>()

        /// A chunk goes as its header, then the pieces of the source that make its payload, as
        /// they came (slices, not copies), then CRLF: its pieces are gathered and hashed first,
        /// since the header carries the payload's signature.
        mutating func next() async throws -> ByteBuffer? {
            if let piece = queued.popFirst() { return piece }
            if sentFinal { return nil }
            let size = Int(Swift.min(Int64(SignedChunks.chunkSize), remaining))
            if size == 0 {
                // The source must end here, with every check of it passed, before the final chunk goes.
                guard leftover == nil, try await base.next() == nil else {
                    throw UploadBody.SourceFailed(error: UploadBody.LengthMismatch(announced: base.length ?? 0, received: base.count))
                }
                sentFinal = true
            }
            let digest = try StreamingDigest(.sha256)
            var gathered = 0
            while gathered < size {
                if leftover == nil { leftover = try await base.next() }
                guard var piece = leftover else {
                    throw UploadBody.SourceFailed(error: UploadBody.LengthMismatch(announced: base.length ?? 0, received: base.count))
                }
                let slice = piece.readSlice(length: Swift.min(size - gathered, piece.readableBytes))!
                try slice.withUnsafeReadableBytes { try digest.update($0) }
                queued.append(slice)
                gathered += slice.readableBytes
                leftover = piece.readableBytes > 0 ? piece : nil
            }
            remaining -= Int64(size)
            queued.append(ByteBuffer(string: "\r\n"))
            let signature = try signer.sign(payloadSHA256: try digest.finalize())
            return ByteBuffer(string: String(size, radix: 16) + ";chunk-signature=" + signature + "\r\n")
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base, signer: signer, remaining: length) }
}
