import TollgateCrypto

// CRC32 (IEEE), CRC32C (Castagnoli) and CRC64/NVME are written here, because libcrypto offers
// no CRC through its EVP API. SHA-1 and SHA-256 go through TollgateCrypto.

/// A reflected CRC over 32 or 64 bits (`poly` in reflected form), slicing-by-8: eight bytes per
/// step through eight 256-entry tables (table k is the CRC of a byte followed by k zero bytes),
/// then the tail a byte at a time. Every boto3 upload carries a CRC-32 trailer, so this runs over
/// each body byte.
struct ReflectedCRC<Word: FixedWidthInteger & UnsignedInteger & Sendable>: Sendable {
    /// Table k at `k * 256 ..< (k + 1) * 256`.
    let tables: [Word]

    init(reflectedPolynomial poly: Word) {
        var tables = [Word](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = Word(n)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ poly : c >> 1 }
            tables[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = tables[(k - 1) * 256 + n]
                tables[k * 256 + n] = (previous >> 8) ^ tables[Int(truncatingIfNeeded: previous & 0xff)]
            }
        }
        self.tables = tables
    }

    func update(_ crc: Word, _ bytes: UnsafeRawBufferPointer) -> Word {
        tables.withUnsafeBufferPointer { t in
            var c = ~crc
            var offset = 0
            while bytes.count - offset >= 8 {
                // The CRC (32 or 64 bits) folds into the first bytes of the block; the eight
                // bytes then index tables 7 down to 0.
                let v = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                    ^ UInt64(truncatingIfNeeded: c)
                var next = t[7 * 256 + Int(v & 0xff)]
                next ^= t[6 * 256 + Int(v >> 8 & 0xff)]
                next ^= t[5 * 256 + Int(v >> 16 & 0xff)]
                next ^= t[4 * 256 + Int(v >> 24 & 0xff)]
                next ^= t[3 * 256 + Int(v >> 32 & 0xff)]
                next ^= t[2 * 256 + Int(v >> 40 & 0xff)]
                next ^= t[1 * 256 + Int(v >> 48 & 0xff)]
                next ^= t[Int(v >> 56)]
                c = next
                offset += 8
            }
            while offset < bytes.count {
                c = t[Int(truncatingIfNeeded: (c ^ Word(bytes[offset])) & 0xff)] ^ (c >> 8)
                offset += 1
            }
            return ~c
        }
    }
}

extension ReflectedCRC where Word == UInt32 {
    static let ieee = ReflectedCRC(reflectedPolynomial: 0xEDB8_8320)
    static let castagnoli = ReflectedCRC(reflectedPolynomial: 0x82F6_3B78)
}

extension ReflectedCRC where Word == UInt64 {
    /// CRC-64/NVME (the `x-amz-checksum-crc64nvme` algorithm).
    static let nvme = ReflectedCRC(reflectedPolynomial: 0x9A6C_9329_AC4B_C9B5)
}

/// The S3 additional-checksum algorithms (`x-amz-checksum-*`, `x-amz-trailer`).
public enum ChecksumAlgorithm: String, Sendable, CaseIterable, Equatable {
    case crc32, crc32c, crc64nvme, sha1, sha256

    /// `x-amz-checksum-crc32`, …
    public var headerName: String { "x-amz-checksum-\(rawValue)" }

    /// The name S3 uses in messages ("The CRC32 you specified did not match …").
    public var displayName: String { rawValue.uppercased() }

    /// Size of the raw digest in bytes.
    public var digestSize: Int {
        switch self {
        case .crc32, .crc32c: 4
        case .crc64nvme: 8
        case .sha1: 20
        case .sha256: 32
        }
    }

    /// Parses `x-amz-checksum-crc32` (any case) into `.crc32`.
    public init?(headerName: String) {
        let lower = headerName.lowercased()
        guard lower.hasPrefix("x-amz-checksum-") else { return nil }
        self.init(rawValue: String(lower.dropFirst("x-amz-checksum-".count)))
    }
}

/// An expected checksum value, as sent in an `x-amz-checksum-*` header or trailer.
public struct ExpectedChecksum: Sendable, Equatable {
    public var algorithm: ChecksumAlgorithm
    /// The raw digest bytes.
    public var digest: [UInt8]

    public init(algorithm: ChecksumAlgorithm, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    /// Decodes the base64 value; nil when it is not base64 of the algorithm's digest size.
    public init?(algorithm: ChecksumAlgorithm, base64 value: String) {
        guard let digest = Base64.decode(value.trimmingASCIIWhitespace()), digest.count == algorithm.digestSize
        else { return nil }
        self.init(algorithm: algorithm, digest: digest)
    }

    public var base64: String { Base64.encode(digest) }
}

/// An incremental checksum over a streamed body, for any `ChecksumAlgorithm`.
/// Not thread-safe: one instance per body.
public final class StreamingChecksum {
    public let algorithm: ChecksumAlgorithm
    private var crc32: UInt32 = 0
    private var crc64: UInt64 = 0
    private let digest: StreamingDigest?

    public init(_ algorithm: ChecksumAlgorithm) throws(CryptoError) {
        self.algorithm = algorithm
        switch algorithm {
        case .sha1: digest = try StreamingDigest(.sha1)
        case .sha256: digest = try StreamingDigest(.sha256)
        case .crc32, .crc32c, .crc64nvme: digest = nil
        }
    }

    public func update(_ bytes: UnsafeRawBufferPointer) throws(CryptoError) {
        switch algorithm {
        case .crc32: crc32 = ReflectedCRC<UInt32>.ieee.update(crc32, bytes)
        case .crc32c: crc32 = ReflectedCRC<UInt32>.castagnoli.update(crc32, bytes)
        case .crc64nvme: crc64 = ReflectedCRC<UInt64>.nvme.update(crc64, bytes)
        case .sha1, .sha256: try digest!.update(bytes)
        }
    }

    public func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(CryptoError) {
        let array = Array(bytes)
        let result: Result<Void, CryptoError> = array.withUnsafeBytes { buffer in
            Result { () throws(CryptoError) in try update(buffer) }
        }
        try result.get()
    }

    /// The digest bytes (CRCs big-endian, as S3 encodes them). Call once.
    public func finalize() throws(CryptoError) -> [UInt8] {
        switch algorithm {
        case .crc32, .crc32c:
            return [UInt8(crc32 >> 24), UInt8(crc32 >> 16 & 0xff), UInt8(crc32 >> 8 & 0xff), UInt8(crc32 & 0xff)]
        case .crc64nvme:
            return (0..<8).reversed().map { UInt8(truncatingIfNeeded: crc64 >> (UInt64($0) * 8)) }
        case .sha1, .sha256:
            return try digest!.finalize()
        }
    }

    /// One-shot convenience.
    public static func checksum<Bytes: Sequence<UInt8>>(_ algorithm: ChecksumAlgorithm, _ bytes: Bytes) throws(CryptoError) -> [UInt8] {
        let c = try StreamingChecksum(algorithm)
        try c.update(bytes)
        return try c.finalize()
    }
}

extension StringProtocol {
    /// Trims spaces and horizontal tabs (HTTP optional whitespace) at both ends.
    func trimmingASCIIWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
