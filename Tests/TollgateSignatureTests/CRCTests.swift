import Testing
@testable import TollgateSignature

/// The slicing-by-8 CRCs against the plain bit-at-a-time definition, over lengths and offsets
/// that exercise the eight-byte blocks, the byte tail and unaligned loads.
@Suite("CRC slicing-by-8")
struct CRCTests {
    /// The textbook reflected CRC, one bit at a time: the reference.
    static func reference<Word: FixedWidthInteger & UnsignedInteger>(_ poly: Word, _ bytes: some Sequence<UInt8>) -> Word {
        var c = ~Word(0)
        for byte in bytes {
            c ^= Word(byte)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ poly : c >> 1 }
        }
        return ~c
    }

    static func bigEndian<Word: FixedWidthInteger>(_ value: Word) -> [UInt8] {
        (0..<(Word.bitWidth / 8)).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    static func expected(_ algorithm: ChecksumAlgorithm, _ bytes: ArraySlice<UInt8>) -> [UInt8] {
        switch algorithm {
        case .crc32: bigEndian(reference(UInt32(0xEDB8_8320), bytes))
        case .crc32c: bigEndian(reference(UInt32(0x82F6_3B78), bytes))
        default: bigEndian(reference(UInt64(0x9A6C_9329_AC4B_C9B5), bytes))
        }
    }

    static let algorithms: [ChecksumAlgorithm] = [.crc32, .crc32c, .crc64nvme]
    static let data = (0..<(70 * 1024)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }

    @Test("known values: empty and one byte")
    func knownValues() throws {
        #expect(try StreamingChecksum.checksum(.crc32, []) == [0, 0, 0, 0])
        #expect(try StreamingChecksum.checksum(.crc32c, []) == [0, 0, 0, 0])
        #expect(try StreamingChecksum.checksum(.crc64nvme, []) == [0, 0, 0, 0, 0, 0, 0, 0])
        #expect(try StreamingChecksum.checksum(.crc32, Array("a".utf8)) == [0xE8, 0xB7, 0xBE, 0x43])
        #expect(try StreamingChecksum.checksum(.crc32c, Array("a".utf8)) == [0xC1, 0xD0, 0x43, 0x30])
    }

    @Test("one-shot equals the bit-wise definition at every length and offset", arguments: algorithms)
    func lengthsAndOffsets(_ algorithm: ChecksumAlgorithm) throws {
        for length in [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 255, 1000, 4099, 65536, 65537 + 6] {
            for offset in 0..<8 where offset + length <= Self.data.count {
                let slice = Self.data[offset..<(offset + length)]
                #expect(try StreamingChecksum.checksum(algorithm, slice) == Self.expected(algorithm, slice), "\(length) at \(offset)")
            }
        }
    }

    @Test("incremental updates equal one-shot, whatever the split", arguments: algorithms)
    func incremental(_ algorithm: ChecksumAlgorithm) throws {
        let whole = Self.expected(algorithm, Self.data[...])
        for pieces in [[1], [3, 5, 7], [8], [13, 4096, 1], [65536]] {
            let c = try StreamingChecksum(algorithm)
            var start = 0
            var step = 0
            while start < Self.data.count {
                let end = min(Self.data.count, start + pieces[step % pieces.count])
                try Self.data[start..<end].withUnsafeBytes { try c.update($0) }
                start = end
                step += 1
            }
            #expect(try c.finalize() == whole, "pieces \(pieces)")
        }
    }
}
