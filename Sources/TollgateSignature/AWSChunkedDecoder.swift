import TollgateCrypto

/// An incremental decoder for `aws-chunked` bodies (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`,
/// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`, `STREAMING-UNSIGNED-PAYLOAD-TRAILER`).
///
/// Feed it the body as it arrives, in slices cut anywhere (a chunk header may straddle two
/// feeds); it names the ranges of each slice that are payload (the gateway passes those on as
/// slices of the buffer it read, never copying a byte), or appends them to an array. Every
/// chunk is emitted as it
/// arrives, so memory does not grow with the chunk size a client announces: a signed chunk is
/// hashed on the way through and its signature checked when its last byte arrives, and a
/// mismatch throws. After the last byte, `finish()` checks that the final chunk and trailer
/// arrived, that the decoded length matches `x-amz-decoded-content-length`, and every checksum
/// (trailer, header, Content-MD5). So emitted bytes are verified only once `finish()` returns:
/// the consumer writes them somewhere temporary and commits nothing before that (the store's
/// writes do exactly this).
///
/// Not thread-safe: one instance per body.
public final class AWSChunkedDecoder {
    public static let defaultMaxChunkSize = 16 * 1024 * 1024
    static let maxLineLength = 4096
    static let maxTrailerBytes = 16 * 1024

    private enum State {
        case chunkHeader
        case chunkData(remaining: Int)
        case chunkDataCR
        case chunkDataLF
        /// After a final chunk without trailer: optional closing CRLF.
        case finalCRLF(seenCR: Bool)
        case trailer
        case done
    }

    public let mode: S3PayloadMode
    public let maxChunkSize: Int
    private let decodedLength: Int
    private let signing: ChunkSigningContext?
    private let trailerAlgorithm: ChecksumAlgorithm?
    private var state: State = .chunkHeader
    private var line: [UInt8] = []
    /// The SHA-256 of the signed chunk being read, for its signature.
    private var chunkDigest: StreamingDigest?
    private var chunkSignature: String = ""
    private var previousSignature: String
    private var trailerLines: [(name: String, value: String)] = []
    private var trailerSignature: String?
    private var trailerBytes = 0
    private let trailerChecksum: StreamingChecksum?
    private let headerChecks: S3PayloadVerifier
    /// Decoded payload bytes emitted so far.
    public private(set) var decodedCount = 0

    init(request: S3VerifiedRequest, maxChunkSize: Int) throws(S3AuthError) {
        mode = request.payload
        self.maxChunkSize = maxChunkSize
        decodedLength = request.decodedContentLength ?? 0
        signing = request.chunkSigning
        previousSignature = request.chunkSigning?.seedSignature ?? ""
        trailerAlgorithm = request.trailerChecksum
        do {
            trailerChecksum = try request.trailerChecksum.map { a throws(CryptoError) in try StreamingChecksum(a) }
        } catch {
            throw .internalError
        }
        headerChecks = try S3PayloadVerifier(expectedSHA256: nil, contentMD5: request.contentMD5, checksum: request.headerChecksum)
        if mode.hasChunkSignatures && signing == nil { throw .internalError }
    }

    /// Decodes `input`, appending verified payload bytes to `output`.
    public func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(S3AuthError) {
        try decode(input) { range in output.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[range])) }
    }

    /// Decodes `input`, calling `payload` with each range of it that holds payload bytes, in
    /// order (none for a slice of framing alone, several when it ends one chunk and starts another).
    public func decode(_ input: UnsafeRawBufferPointer, payload: (Range<Int>) -> Void) throws(S3AuthError) {
        var index = 0
        let count = input.count
        while index < count {
            switch state {
            case .chunkHeader:
                let byte = input[index]
                index += 1
                if byte == UInt8(ascii: "\n") {
                    try headerLineComplete()
                } else {
                    line.append(byte)
                    if line.count > Self.maxLineLength { throw .malformedChunkedBody("chunk header too long") }
                }
            case .chunkData(let remaining):
                let take = min(remaining, count - index)
                let slice = UnsafeRawBufferPointer(rebasing: input[index..<(index + take)])
                index += take
                if let chunkDigest {
                    do { try chunkDigest.update(slice) } catch { throw .internalError }
                }
                try emit(slice)
                payload((index - take)..<index)
                if remaining - take == 0 {
                    state = .chunkDataCR
                    try verifyChunk()
                } else {
                    state = .chunkData(remaining: remaining - take)
                }
            case .chunkDataCR:
                guard input[index] == UInt8(ascii: "\r") else { throw .malformedChunkedBody("missing CRLF after chunk data") }
                index += 1
                state = .chunkDataLF
            case .chunkDataLF:
                guard input[index] == UInt8(ascii: "\n") else { throw .malformedChunkedBody("missing CRLF after chunk data") }
                index += 1
                state = .chunkHeader
            case .finalCRLF(let seenCR):
                let byte = input[index]
                index += 1
                if !seenCR && byte == UInt8(ascii: "\r") {
                    state = .finalCRLF(seenCR: true)
                } else if byte == UInt8(ascii: "\n") {
                    state = .done
                } else {
                    throw .malformedChunkedBody("unexpected data after the final chunk")
                }
            case .trailer:
                let byte = input[index]
                index += 1
                trailerBytes += 1
                if trailerBytes > Self.maxTrailerBytes { throw .malformedChunkedBody("trailer too long") }
                if byte == UInt8(ascii: "\n") {
                    try trailerLineComplete()
                } else {
                    line.append(byte)
                }
            case .done:
                throw .malformedChunkedBody("unexpected data after the end of the body")
            }
        }
    }

    /// Decodes `input` (an array, slice, or any byte sequence), appending verified payload bytes
    /// to `output`.
    public func decode<Bytes: Sequence<UInt8>>(_ input: Bytes, into output: inout [UInt8]) throws(S3AuthError) {
        let result: Result<Void, S3AuthError>? = input.withContiguousStorageIfAvailable { buffer in
            Result { () throws(S3AuthError) in try decode(UnsafeRawBufferPointer(buffer), into: &output) }
        }
        if let result { return try result.get() }
        let bytes = Array(input)
        let copied: Result<Void, S3AuthError> = bytes.withUnsafeBytes { buffer in
            Result { () throws(S3AuthError) in try decode(buffer, into: &output) }
        }
        try copied.get()
    }

    /// Decodes `input` and returns the verified payload bytes it completed.
    public func decode<Bytes: Sequence<UInt8>>(_ input: Bytes) throws(S3AuthError) -> [UInt8] {
        var output: [UInt8] = []
        try decode(input, into: &output)
        return output
    }

    /// Call after the last body byte. Throws when the body was cut short, the decoded length
    /// differs from `x-amz-decoded-content-length`, the trailer is missing or its signature or
    /// any checksum does not match. Returns the computed digests.
    @discardableResult
    public func finish() throws(S3AuthError) -> ComputedDigests {
        switch state {
        case .done: break
        case .finalCRLF(seenCR: false): break // tolerate a body that ends right after the final chunk header
        default: throw .incompleteBody
        }
        guard decodedCount == decodedLength else { throw .incompleteBody }
        var result = try headerChecks.finish()
        if let trailerAlgorithm, let trailerChecksum {
            guard let value = trailerLines.first(where: { $0.name == trailerAlgorithm.headerName })?.value else {
                throw .malformedChunkedBody("the trailer \(trailerAlgorithm.headerName) announced in x-amz-trailer is missing")
            }
            guard let expected = ExpectedChecksum(algorithm: trailerAlgorithm, base64: value) else {
                throw .invalidChecksumValue(name: trailerAlgorithm.headerName, trailer: true)
            }
            let computed: [UInt8]
            do { computed = try trailerChecksum.finalize() } catch { throw .internalError }
            guard computed == expected.digest else { throw .checksumMismatch(trailerAlgorithm) }
            result.checksum = expected
        }
        return result
    }

    // MARK: Internals

    /// Counts and checksums payload bytes on their way out.
    private func emit(_ bytes: UnsafeRawBufferPointer) throws(S3AuthError) {
        guard !bytes.isEmpty else { return }
        decodedCount += bytes.count
        if decodedCount > decodedLength {
            throw .malformedChunkedBody("the chunks hold more data than x-amz-decoded-content-length")
        }
        do { try trailerChecksum?.update(bytes) } catch { throw .internalError }
        try headerChecks.update(bytes)
    }

    private func takeLine() -> [UInt8] {
        var bytes = line
        line.removeAll(keepingCapacity: true)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return bytes
    }

    private func headerLineComplete() throws(S3AuthError) {
        let bytes = takeLine()
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.split(separator: ";", omittingEmptySubsequences: false)
        let sizeText = parts[0].trimmingASCIIWhitespace()
        guard !sizeText.isEmpty, sizeText.utf8.count <= 16, let size = Int(sizeText, radix: 16), size >= 0 else {
            throw .malformedChunkedBody("invalid chunk size")
        }
        if mode.hasChunkSignatures {
            var signature: String?
            for extensionPart in parts.dropFirst() {
                let item = extensionPart.trimmingASCIIWhitespace()
                if item.hasPrefix("chunk-signature=") { signature = String(item.dropFirst("chunk-signature=".count)) }
            }
            guard let signature, signature.utf8.count == 64 else {
                throw .malformedChunkedBody("missing chunk-signature")
            }
            chunkSignature = signature
        }
        guard size <= maxChunkSize else {
            throw .malformedChunkedBody("chunk of \(size) bytes exceeds the maximum of \(maxChunkSize)")
        }
        guard decodedCount + size <= decodedLength else {
            throw .malformedChunkedBody("the chunks hold more data than x-amz-decoded-content-length")
        }
        if signing != nil {
            do { chunkDigest = try StreamingDigest(.sha256) } catch { throw .internalError }
        }
        if size == 0 {
            try verifyChunk()
            state = mode.hasTrailer ? .trailer : .finalCRLF(seenCR: false)
        } else {
            state = .chunkData(remaining: size)
        }
    }

    private func trailerLineComplete() throws(S3AuthError) {
        let bytes = takeLine()
        if bytes.isEmpty {
            if mode == .streamingSignedTrailer { try verifyTrailer() }
            state = .done
            return
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else { throw .malformedChunkedBody("malformed trailer line") }
        let name = text[..<colon].trimmingASCIIWhitespace().lowercased()
        let value = text[text.index(after: colon)...].trimmingASCIIWhitespace()
        if name == "x-amz-trailer-signature" {
            guard mode == .streamingSignedTrailer, trailerSignature == nil else {
                throw .malformedChunkedBody("unexpected x-amz-trailer-signature")
            }
            trailerSignature = value
        } else {
            guard trailerSignature == nil else { throw .malformedChunkedBody("trailer after x-amz-trailer-signature") }
            // Once each: a second value (a good checksum, then a bad one) would leave which one
            // was checked to the reader.
            guard !trailerLines.contains(where: { $0.name == name }) else { throw .malformedChunkedBody("the trailer \(name) is sent twice") }
            trailerLines.append((name: name, value: value))
        }
    }

    /// Checks the signature of the chunk just read (its bytes went through `chunkDigest`).
    private func verifyChunk() throws(S3AuthError) {
        guard let signing, let chunkDigest else { return }
        self.chunkDigest = nil
        let hash: String
        do { hash = Hex.encode(try chunkDigest.finalize()) } catch { throw .internalError }
        let stringToSign = "AWS4-HMAC-SHA256-PAYLOAD\n\(signing.timestamp)\n\(signing.scope)\n\(previousSignature)\n\(S3SigV4.emptySHA256)\n\(hash)"
        try check(stringToSign: stringToSign, provided: chunkSignature, key: signing.signingKey)
        previousSignature = chunkSignature.lowercased()
    }

    private func verifyTrailer() throws(S3AuthError) {
        guard let signing else { throw .internalError }
        guard let provided = trailerSignature else { throw .malformedChunkedBody("missing x-amz-trailer-signature") }
        let canonical = trailerLines.map { "\($0.name):\($0.value)\n" }.joined()
        let hash: String
        do { hash = Hex.encode(try Crypto.sha256(Array(canonical.utf8))) } catch { throw .internalError }
        let stringToSign = "AWS4-HMAC-SHA256-TRAILER\n\(signing.timestamp)\n\(signing.scope)\n\(previousSignature)\n\(hash)"
        try check(stringToSign: stringToSign, provided: provided, key: signing.signingKey)
    }

    private func check(stringToSign: String, provided: String, key: [UInt8]) throws(S3AuthError) {
        let expected: String
        do { expected = Hex.encode(try Crypto.hmacSHA256(key: key, stringToSign)) } catch { throw .internalError }
        guard Crypto.constantTimeEqual(expected, provided.lowercased()) else {
            throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: signing?.accessKeyId ?? "", stringToSign: stringToSign,
                                                             signatureProvided: provided, canonicalRequest: ""))
        }
    }
}
