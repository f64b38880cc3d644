import TollgateCrypto

/// The digests computed over a body, returned when verification succeeds. Only the digests that
/// were checked are computed (nil otherwise); the gateway needs the verdict alone.
public struct ComputedDigests: Sendable, Equatable {
    public var sha256: [UInt8]?
    public var md5: [UInt8]?
    public var checksum: ExpectedChecksum?
}

/// Verifies a body while it streams through, against whichever of these the request carried:
/// a signed SHA-256 (`XAmzContentSHA256Mismatch`), `Content-MD5` (`BadDigest`) and an
/// `x-amz-checksum-*` header (`BadDigest`). Used for plain S3 bodies, for the decoded bytes of
/// aws-chunked ones (without the SHA-256), and for OSS bodies (the gateway renames its errors).
/// Feed every body byte to `update`, then call `finish` before committing.
/// Not thread-safe: one instance per body.
public final class S3PayloadVerifier {
    private let expectedSHA256: [UInt8]?
    private let contentMD5: [UInt8]?
    private let expectedChecksum: ExpectedChecksum?
    private let sha256: StreamingDigest?
    private let md5: StreamingDigest?
    private let checksum: StreamingChecksum?
    public private(set) var byteCount = 0

    public init(expectedSHA256: [UInt8]?, contentMD5: [UInt8]?, checksum: ExpectedChecksum?) throws(S3AuthError) {
        self.expectedSHA256 = expectedSHA256
        self.contentMD5 = contentMD5
        self.expectedChecksum = checksum
        do {
            sha256 = expectedSHA256 == nil ? nil : try StreamingDigest(.sha256)
            md5 = contentMD5 == nil ? nil : try StreamingDigest(.md5)
            self.checksum = try checksum.map { c throws(CryptoError) in try StreamingChecksum(c.algorithm) }
        } catch {
            throw .internalError
        }
    }

    /// True when there is nothing to check (the caller may skip hashing).
    public var isTrivial: Bool { sha256 == nil && md5 == nil && checksum == nil }

    public func update(_ bytes: UnsafeRawBufferPointer) throws(S3AuthError) {
        byteCount += bytes.count
        do {
            try sha256?.update(bytes)
            try md5?.update(bytes)
            try checksum?.update(bytes)
        } catch {
            throw .internalError
        }
    }

    public func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(S3AuthError) {
        let array = Array(bytes)
        let result: Result<Void, S3AuthError> = array.withUnsafeBytes { buffer in
            Result { () throws(S3AuthError) in try update(buffer) }
        }
        try result.get()
    }

    /// Checks every expected digest; the first mismatch throws. Call once, after the last byte.
    @discardableResult
    public func finish() throws(S3AuthError) -> ComputedDigests {
        var result = ComputedDigests()
        do {
            result.sha256 = try sha256?.finalize()
            result.md5 = try md5?.finalize()
            if let checksum { result.checksum = ExpectedChecksum(algorithm: checksum.algorithm, digest: try checksum.finalize()) }
        } catch {
            throw .internalError
        }
        if let expectedSHA256, let computed = result.sha256, !Crypto.constantTimeEqual(expectedSHA256, computed) {
            throw .contentSHA256Mismatch(clientComputed: Hex.encode(expectedSHA256), serverComputed: Hex.encode(computed))
        }
        if let contentMD5, let computed = result.md5, contentMD5 != computed {
            throw .contentMD5Mismatch
        }
        if let expectedChecksum, let computed = result.checksum, expectedChecksum.digest != computed.digest {
            throw .checksumMismatch(expectedChecksum.algorithm)
        }
        return result
    }
}
