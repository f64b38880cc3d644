// The CRCs are written here, because libcrypto offers no CRC through its EVP API: CRC-32
// (IEEE), CRC-32C (Castagnoli) and CRC-64/NVME for S3's additional checksums, and CRC-64/XZ
// (ECMA-182, reflected) for OSS's `x-oss-hash-crc64ecma`. SHA-1 and SHA-256 go through libcrypto.
import CTollgateCRC

/// A reflected CRC over 32 or 64 bits (`poly` in reflected form), with the register set to all
/// ones before and inverted after, as all four CRCs here are.
///
/// `update` folds the bytes with carry-less multiplication where the CPU has it (x86-64
/// PCLMULQDQ, `CTollgateCRC`: 64 bytes per step, about six times the tables' speed), and
/// takes the rest (the folded 16 bytes, the tail, and every byte on other CPUs) through
/// slicing-by-8: eight bytes per step through eight 256-entry tables (table k is the CRC of a
/// byte followed by k zero bytes), then a byte at a time. Every boto3 upload carries a CRC-32
/// and every OSS write gets a CRC-64, so this runs over each body byte; `update` is inlinable
/// so that callers in other modules get it specialised for their word (unspecialised, the
/// generic arithmetic ran at a seventh of the speed). `combine` joins the CRCs of two adjacent
/// pieces without their bytes (zlib's method: multiply by x^(8·length) modulo the polynomial),
/// which is how a multipart object or an appended one gets its CRC without rereading.
public struct ReflectedCRC<Word: FixedWidthInteger & UnsignedInteger & Sendable>: Sendable {
    /// Table k at `k * 256 ..< (k + 1) * 256`.
    @usableFromInline let tables: [Word]
    let polynomial: Word
    /// x^(2^k) modulo the polynomial, k = 0...66 (a length's 63 bits, from k = 3), reflected.
    let powers: [Word]
    /// `tollgate_crc_fold`'s multipliers: x^(D+63) and x^(D-1) modulo the polynomial for
    /// D = 512, 128, 384, 256, each reflected into 64 bits.
    @usableFromInline let foldConstants: [UInt64]
    /// Whether `update` folds with carry-less multiplication (the CPU has it).
    @usableFromInline static var folds: Bool { foldingCPU }

    public init(reflectedPolynomial poly: Word) {
        polynomial = poly
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
        // In the reflected form x^0 is the top bit, so x^1 is the bit below it.
        var powers = [Word(1) << (Word.bitWidth - 2)]
        for _ in 1..<67 { powers.append(Self.multiply(powers[powers.count - 1], powers[powers.count - 1], poly)) }
        self.powers = powers
        // x^n, reflected: multiplying by x shifts right, and x^W wraps to the polynomial.
        func xPower(_ n: Int) -> UInt64 {
            var r = Word(1) << (Word.bitWidth - 1)
            for _ in 0..<n { r = r & 1 != 0 ? (r >> 1) ^ poly : r >> 1 }
            return UInt64(r) << (64 - Word.bitWidth)
        }
        foldConstants = [512, 128, 384, 256].flatMap { d in [xPower(d + 63), xPower(d - 1)] }
    }

    /// The CRC of the bytes that `crc` covered followed by `bytes` (0 for none before).
    @inlinable
    public func update(_ crc: Word, _ bytes: UnsafeRawBufferPointer) -> Word {
        guard Self.folds, bytes.count >= 64 else { return ~advance(~crc, bytes) }
        let folded = bytes.count & ~63
        var block: (UInt64, UInt64) = (0, 0)
        let register = withUnsafeMutableBytes(of: &block) { out in
            foldConstants.withUnsafeBufferPointer { constants in
                tollgate_crc_fold(constants.baseAddress, UInt64(~crc), bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), folded,
                                  out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            return advance(0, UnsafeRawBufferPointer(out))
        }
        return ~advance(register, UnsafeRawBufferPointer(rebasing: bytes[folded...]))
    }

    /// The CRC register (not inverted) after `bytes`, through the tables only.
    @inlinable
    func advance(_ register: Word, _ bytes: UnsafeRawBufferPointer) -> Word {
        tables.withUnsafeBufferPointer { t in
            var c = register
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
            return c
        }
    }

    public func update<Bytes: Sequence<UInt8>>(_ crc: Word, _ bytes: Bytes) -> Word {
        Array(bytes).withUnsafeBytes { update(crc, $0) }
    }

    /// The CRC of A followed by B, from A's CRC, B's CRC and B's length in bytes.
    public func combine(_ first: Word, _ second: Word, secondLength: Int64) -> Word {
        precondition(secondLength >= 0, "a length is never negative")
        // x^(8·length) from the powers x^(2^k) of the length's set bits (8 = 2^3: start at k = 3).
        var shift = Word(1) << (Word.bitWidth - 1)
        var n = UInt64(secondLength)
        var k = 3
        while n != 0 {
            if n & 1 != 0 { shift = Self.multiply(powers[k], shift, polynomial) }
            n >>= 1
            k += 1
        }
        return Self.multiply(shift, first, polynomial) ^ second
    }

    /// a·b modulo the polynomial, both reflected.
    static func multiply(_ a: Word, _ b: Word, _ poly: Word) -> Word {
        var a = a, b = b, product: Word = 0
        var bit = Word(1) << (Word.bitWidth - 1)
        while a != 0 {
            if a & bit != 0 {
                product ^= b
                a &= ~bit
            }
            bit >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ poly : b >> 1
        }
        return product
    }
}

extension ReflectedCRC where Word == UInt32 {
    /// CRC-32 (ISO-HDLC, zlib's).
    public static let ieee = ReflectedCRC(reflectedPolynomial: 0xEDB8_8320)
    /// CRC-32C (Castagnoli, iSCSI).
    public static let castagnoli = ReflectedCRC(reflectedPolynomial: 0x82F6_3B78)
}

extension ReflectedCRC where Word == UInt64 {
    /// CRC-64/NVME (S3's `crc64nvme`).
    public static let nvme = ReflectedCRC(reflectedPolynomial: 0x9A6C_9329_AC4B_C9B5)
    /// CRC-64/XZ: the ECMA-182 polynomial, reflected (OSS's `crc64ecma`).
    public static let ecma = ReflectedCRC(reflectedPolynomial: 0xC96C_5795_D787_0F42)
}

/// The additional checksum algorithms of S3 (`x-amz-checksum-*`), which the store keeps with
/// an object when a client sent one.
public enum ChecksumAlgorithm: String, Sendable, CaseIterable, Equatable {
    case crc32, crc32c, crc64nvme, sha1, sha256

    /// The name S3 uses in messages and XML (`CRC32`, `ChecksumCRC32`).
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

    /// A CRC, whose value for a whole object can be combined from its parts' (S3's FULL_OBJECT
    /// multipart checksums exist for these only).
    public var isCRC: Bool { self == .crc32 || self == .crc32c || self == .crc64nvme }

    /// The CRC of `first` followed by `second` (each given as its big-endian digest); nil for
    /// the SHA algorithms, which cannot be combined.
    public func combine(_ first: [UInt8], _ second: [UInt8], secondLength: Int64) -> [UInt8]? {
        guard first.count == digestSize, second.count == digestSize else { return nil }
        func word<W: FixedWidthInteger>(_ bytes: [UInt8]) -> W { bytes.reduce(0) { $0 << 8 | W($1) } }
        switch self {
        case .crc32: return BigEndian.bytes(ReflectedCRC.ieee.combine(word(first), word(second), secondLength: secondLength))
        case .crc32c: return BigEndian.bytes(ReflectedCRC.castagnoli.combine(word(first), word(second), secondLength: secondLength))
        case .crc64nvme: return BigEndian.bytes(ReflectedCRC.nvme.combine(word(first), word(second), secondLength: secondLength))
        case .sha1, .sha256: return nil
        }
    }
}

/// Whether this CPU folds CRCs with carry-less multiplication; asked once.
@usableFromInline let foldingCPU = tollgate_crc_fold_available() != 0

enum BigEndian {
    static func bytes<Word: FixedWidthInteger>(_ value: Word) -> [UInt8] {
        (0..<(Word.bitWidth / 8)).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }
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
        case .crc32, .crc32c: return BigEndian.bytes(crc32)
        case .crc64nvme: return BigEndian.bytes(crc64)
        case .sha1, .sha256: return try digest!.finalize()
        }
    }

    /// One-shot convenience.
    public static func checksum<Bytes: Sequence<UInt8>>(_ algorithm: ChecksumAlgorithm, _ bytes: Bytes) throws(CryptoError) -> [UInt8] {
        let c = try StreamingChecksum(algorithm)
        try c.update(bytes)
        return try c.finalize()
    }
}
