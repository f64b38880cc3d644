import Metrics
import NIOCore
import Synchronization
import TollgateCrypto
import TollgateSignature
import TollgateStore
import TollgateTokenService

/// What a request body must prove while it streams through.
enum BodyCheck: Sendable {
    /// Nothing to check (unsigned payload, no digests).
    case none
    /// S3: signed SHA-256, Content-MD5 and/or an `x-amz-checksum-*` header, or aws-chunked.
    case s3(S3VerifiedRequest)
    /// OSS: Content-MD5 and/or a signed `x-oss-content-sha256`, when sent.
    case oss(contentMD5: [UInt8]?, sha256: [UInt8]?)

    /// Builds the check for a request, or throws InvalidDigest for a malformed Content-MD5.
    static func forRequest(identity: GatewayIdentity, contentMD5 header: String?) throws(GatewayError) -> BodyCheck {
        if let s3 = identity.s3 { return .s3(s3) }
        var md5: [UInt8]?
        if let header {
            guard let digest = ContentMD5.parse(header) else {
                throw GatewayError(.badRequest, "InvalidDigest", "The Content-MD5 you specified is not valid.")
            }
            md5 = digest
        }
        if md5 == nil, identity.ossContentSHA256 == nil { return .none }
        return .oss(contentMD5: md5, sha256: identity.ossContentSHA256)
    }

    /// This check without its `Content-MD5`, and that MD5: for a body the store writes, which
    /// checks it itself (`WriteOptions.expectedMD5`) while it hashes the body for the ETag.
    func leavingMD5ToStore() -> (check: BodyCheck, md5: [UInt8]?) {
        switch self {
        case .none:
            return (self, nil)
        case .s3(var request):
            let md5 = request.contentMD5
            request.contentMD5 = nil
            return (.s3(request), md5)
        case .oss(let md5, let sha256):
            return (sha256 == nil ? .none : .oss(contentMD5: nil, sha256: sha256), md5)
        }
    }
}

/// What a body proved once it ended: the S3 checksum it was verified against, and its CRC-64
/// when asked for. Written by the body's iterator, read by the store before its commit.
final class BodyChecksums: Sendable {
    private let state = Mutex(ObjectChecksums.none)
    var value: ObjectChecksums { state.withLock { $0 } }
    func set(_ checksums: ObjectChecksums) { state.withLock { $0 = checksums } }
}

/// A request body that is decoded (aws-chunked) and verified as it streams. When the client's
/// stream ends, every digest is checked; a mismatch throws, so the store discards the upload
/// before committing anything. The bytes received are counted as they pass. A `Content-MD5`
/// left to the store (`expectedMD5`) is checked there instead, against the MD5 it computes.
struct VerifiedBody<Base: AsyncSequence>: AsyncSequence where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let check: BodyCheck
    /// `tollgate_gateway_bytes_received_total` of the request's dialect.
    let received: Counter
    /// Computes the CRC-64/XZ of the (decoded) bytes: OSS's `x-oss-hash-crc64ecma` of an object.
    let computesCRC64: Bool
    /// The `Content-MD5` the store is to check (see `BodyCheck.leavingMD5ToStore`).
    var expectedMD5: [UInt8]? = nil
    let result = BodyChecksums()

    /// The body's checksums, for `WriteOptions.bodyChecksums` (complete once the body ended).
    var checksums: @Sendable () -> ObjectChecksums { { [result] in result.value } }

    /// The decoded body's length, when the client announced it: an aws-chunked body's
    /// `x-amz-decoded-content-length`, else the request's `Content-Length` (set by the handler).
    var contentLength: Int64? = nil

    /// What the store is told with the body: its length and the checksum stated before it (both
    /// when known), its checksums once it ended, the `Content-MD5` to check.
    func writeOptions(_ preconditions: WritePreconditions = .none) -> WriteOptions {
        var stated = ObjectChecksums.none
        if case .s3(let request) = check, let header = request.headerChecksum {
            stated.additional = AdditionalChecksum(algorithm: header.algorithm, digest: header.digest)
        }
        var length = contentLength
        if case .s3(let request) = check, request.payload.isChunked { length = request.decodedContentLength.map(Int64.init) }
        return WriteOptions(preconditions: preconditions, contentLength: length, statedChecksums: stated, bodyChecksums: checksums,
                            expectedMD5: expectedMD5)
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), checker: Checker(check, computesCRC64: computesCRC64, result: result), received: received)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let checker: Checker
        let received: Counter
        var finished = false

        mutating func next() async throws -> ByteBuffer? {
            while !finished {
                if let queued = checker.nextQueued() { return queued }
                guard let buffer = try await base.next() else {
                    finished = true
                    try checker.finish()
                    return nil
                }
                received.increment(by: Int64(buffer.readableBytes))
                if let out = try checker.process(buffer) { return out }
            }
            return nil
        }
    }

    /// The per-body verification state (not thread-safe; one per body, used by one task).
    final class Checker {
        private let verifier: S3PayloadVerifier?
        private let decoder: AWSChunkedDecoder?
        /// OSS digests, verified with the S3 verifier; its errors are renamed in `finish`.
        private let ossVerifier: S3PayloadVerifier?
        private let failure: (any Error)?
        /// The payload ranges of the buffer being decoded (aws-chunked), `maxSlices` at most;
        /// kept for its capacity.
        private var ranges: [Range<Int>] = []
        /// The payload slices of the buffer decoded last, handed out in order by `nextQueued`
        /// (`process` returns the first), and the index of the next.
        private var queued: [ByteBuffer] = []
        private var next = 0
        private var crc64: UInt64?
        private let result: BodyChecksums

        init(_ check: BodyCheck, computesCRC64: Bool, result: BodyChecksums) {
            self.result = result
            crc64 = computesCRC64 ? 0 : nil
            var verifier: S3PayloadVerifier?
            var decoder: AWSChunkedDecoder?
            var ossVerifier: S3PayloadVerifier?
            var failure: (any Error)?
            do {
                switch check {
                case .none: break
                case .s3(let request):
                    decoder = try request.makeChunkedDecoder()
                    if decoder == nil {
                        let plain = try request.makePayloadVerifier()
                        verifier = plain.isTrivial ? nil : plain
                    }
                case .oss(let md5, let sha256):
                    ossVerifier = try S3PayloadVerifier(expectedSHA256: sha256, contentMD5: md5, checksum: nil)
                }
            } catch {
                failure = error
            }
            self.verifier = verifier
            self.decoder = decoder
            self.ossVerifier = ossVerifier
            self.failure = failure
        }

        /// The most slices one read buffer gives (`process`); a buffer of more, smaller chunks
        /// has its payload copied into one buffer, so that a body of tiny chunks cannot make the
        /// store's write batches hold a buffer per byte.
        static var maxSlices: Int { 8 }

        /// The body's bytes in `buffer`, checked (nil: none, only framing). An aws-chunked
        /// buffer gives its payload as slices of itself, without a copy: the first returned, any
        /// more (it ended a chunk and began another) queued for `nextQueued`; past `maxSlices`
        /// chunks, one copy of their payload instead.
        func process(_ buffer: ByteBuffer) throws -> ByteBuffer? {
            if let failure { throw failure }
            if let decoder {
                ranges.removeAll(keepingCapacity: true)
                var joined: ByteBuffer?
                let result: Result<Void, S3AuthError> = buffer.withUnsafeReadableBytes { bytes in
                    Result { () throws(S3AuthError) in
                        try decoder.decode(bytes) { range in
                            if joined == nil, ranges.count == Self.maxSlices {
                                // One chunk too many: this buffer's payload is copied from here on.
                                var copy = ByteBufferAllocator().buffer(capacity: bytes.count)
                                for earlier in ranges { copy.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[earlier])) }
                                joined = copy
                            }
                            if joined == nil {
                                ranges.append(range)
                            } else {
                                joined!.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[range]))
                            }
                        }
                    }
                }
                try result.get()
                queued.removeAll(keepingCapacity: true)
                next = 0
                if let joined {
                    queued.append(joined)
                } else {
                    for range in ranges { queued.append(buffer.getSlice(at: buffer.readerIndex + range.lowerBound, length: range.count)!) }
                }
                if let crc = crc64 {
                    crc64 = queued.reduce(crc) { crc, piece in piece.withUnsafeReadableBytes { ReflectedCRC.ecma.update(crc, $0) } }
                }
                return nextQueued()
            }
            if let verifier = verifier ?? ossVerifier {
                let result: Result<Void, S3AuthError> = buffer.withUnsafeReadableBytes { bytes in
                    Result { () throws(S3AuthError) in try verifier.update(bytes) }
                }
                try result.get()
            }
            if let crc = crc64 { crc64 = buffer.withUnsafeReadableBytes { ReflectedCRC.ecma.update(crc, $0) } }
            return buffer
        }

        /// The next payload slice `process` queued, if any.
        func nextQueued() -> ByteBuffer? {
            guard next < queued.count else { return nil }
            next += 1
            return queued[next - 1]
        }

        /// Checks every digest after the last byte, then records what the body proved.
        func finish() throws {
            if let failure { throw failure }
            let verified = try verifiedChecksum()
            result.set(ObjectChecksums(
                additional: verified.map { AdditionalChecksum(algorithm: $0.algorithm, digest: $0.digest) }, crc64ecma: crc64
            ))
            try finishOSS()
        }

        /// The S3 checksum the body was verified against (header or trailer), if any.
        private func verifiedChecksum() throws(S3AuthError) -> ExpectedChecksum? {
            if let decoder { return try decoder.finish().checksum }
            if let verifier { return try verifier.finish().checksum }
            return nil
        }

        private func finishOSS() throws {
            do { try ossVerifier?.finish() } catch .contentMD5Mismatch {
                throw GatewayError(.badRequest, "InvalidDigest", "The Content-MD5 you specified did not match what we received.")
            } catch .contentSHA256Mismatch {
                throw GatewayError(.badRequest, "InvalidDigest", "The x-oss-content-sha256 you specified did not match what we received.")
            }
        }
    }
}
