import Foundation
import Testing
@testable import TollgateCrypto

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

    @Test("the catalogue's check values (CRC of \"123456789\")")
    func checkValues() {
        let check = Array("123456789".utf8)
        #expect(ReflectedCRC<UInt32>.ieee.update(0, check) == 0xCBF4_3926)
        #expect(ReflectedCRC<UInt32>.castagnoli.update(0, check) == 0xE306_9283)
        #expect(ReflectedCRC<UInt64>.nvme.update(0, check) == 0xAE8B_1486_0A79_9888)
        #expect(ReflectedCRC<UInt64>.ecma.update(0, check) == 0x995D_C9BB_DF19_39FA)
    }

    /// A split of `data` at every listed point: the combined CRC of the pieces is the CRC of the whole.
    static func combines<Word>(_ crc: ReflectedCRC<Word>) {
        let whole = Self.data.withUnsafeBytes { crc.update(0, $0) }
        for cut in [0, 1, 7, 8, 9, 4096, 65535, Self.data.count - 1, Self.data.count] {
            let first = Self.data[..<cut].withUnsafeBytes { crc.update(0, $0) }
            let second = Self.data[cut...].withUnsafeBytes { crc.update(0, $0) }
            #expect(crc.combine(first, second, secondLength: Int64(Self.data.count - cut)) == whole, "cut at \(cut)")
        }
        // Many pieces, folded left, as a multipart object's parts are.
        var folded = crc.update(0, [UInt8]())
        var start = 0
        for size in [3, 1000, 0, 17, 50_000, 5000] {
            let end = min(Self.data.count, start + size)
            folded = crc.combine(folded, Self.data[start..<end].withUnsafeBytes { crc.update(0, $0) }, secondLength: Int64(end - start))
            start = end
        }
        let rest = Self.data[start...].withUnsafeBytes { crc.update(0, $0) }
        #expect(crc.combine(folded, rest, secondLength: Int64(Self.data.count - start)) == whole)
    }

    @Test("combining the CRCs of adjacent pieces gives the CRC of the whole")
    func combine() {
        Self.combines(ReflectedCRC<UInt32>.ieee)
        Self.combines(ReflectedCRC<UInt32>.castagnoli)
        Self.combines(ReflectedCRC<UInt64>.nvme)
        Self.combines(ReflectedCRC<UInt64>.ecma)
    }

    @Test("combining across a long second piece (5 MiB of zeros)")
    func combineLong() {
        let crc = ReflectedCRC<UInt64>.ecma
        let zeros = [UInt8](repeating: 0, count: 5 << 20)
        let head = Array("tollgate".utf8)
        let expected = crc.update(0, head + zeros)
        #expect(crc.combine(crc.update(0, head), crc.update(0, zeros), secondLength: Int64(zeros.count)) == expected)
    }

    @Test("ChecksumAlgorithm combines CRC digests and refuses SHA ones")
    func algorithmCombine() throws {
        let (a, b) = (Array(Self.data[..<1000]), Array(Self.data[1000..<3000]))
        for algorithm in Self.algorithms {
            let combined = algorithm.combine(try StreamingChecksum.checksum(algorithm, a), try StreamingChecksum.checksum(algorithm, b), secondLength: 2000)
            #expect(combined == (try StreamingChecksum.checksum(algorithm, a + b)))
        }
        #expect(ChecksumAlgorithm.sha256.combine([UInt8](repeating: 0, count: 32), [UInt8](repeating: 0, count: 32), secondLength: 1) == nil)
    }
}

/// The carry-less multiplication path (`CTollgateCRC`), which `update` takes for 64 bytes and
/// more where the CPU has it, against the tables alone and the bit-wise definition: every length
/// up to 300 (the 64-byte blocks, the 16-byte state, the tail) at every offset in 16, longer
/// lengths around multiples of 64, and all four polynomials.
@Suite("CRC folding")
struct CRCFoldingTests {
    static let data = (0..<(20 * 1024)).map { UInt8(truncatingIfNeeded: ($0 &* 2_246_822_519) >> 11) }

    static func check<Word: FixedWidthInteger & UnsignedInteger & Sendable>(_ crc: ReflectedCRC<Word>, _ name: String) {
        let lengths = Array(0...300) + [511, 512, 513, 1023, 1024, 1088, 4095, 4096, 4097, 16383, 16384 + 63]
        Self.data.withUnsafeBytes { all in
            for length in lengths {
                for offset in 0..<16 where offset + length <= all.count {
                    let bytes = UnsafeRawBufferPointer(rebasing: all[offset..<(offset + length)])
                    let tables = ~crc.advance(~0, bytes)
                    let folded = crc.update(0, bytes)
                    if folded != tables {
                        Issue.record("\(name): \(length) bytes at \(offset): folded \(folded), tables \(tables)")
                        return
                    }
                }
            }
            // The register carries over: a CRC continued from a prefix's.
            let prefix = UnsafeRawBufferPointer(rebasing: all[0..<77])
            let rest = UnsafeRawBufferPointer(rebasing: all[77..<5000])
            #expect(crc.update(crc.update(0, prefix), rest) == ~crc.advance(~0, UnsafeRawBufferPointer(rebasing: all[0..<5000])), "\(name)")
        }
        #expect(crc.update(0, Array(Self.data[..<4096])) == CRCTests.reference(crc.polynomial, Self.data[..<4096]), "\(name)")
    }

    @Test("folding gives the tables' CRC for CRC-32, CRC-32C, CRC-64/NVME and CRC-64/XZ")
    func foldingEqualsTables() {
        Self.check(ReflectedCRC<UInt32>.ieee, "CRC-32")
        Self.check(ReflectedCRC<UInt32>.castagnoli, "CRC-32C")
        Self.check(ReflectedCRC<UInt64>.nvme, "CRC-64/NVME")
        Self.check(ReflectedCRC<UInt64>.ecma, "CRC-64/XZ")
    }

    @Test("an x86-64 CPU with PCLMULQDQ folds; any other takes the tables")
    func foldsWhereTheCPUCan() throws {
        #if arch(x86_64) && os(Linux)
        let flags = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("flags") }.map { $0.split(separator: " ").map(String.init) } ?? []
        #expect(ReflectedCRC<UInt32>.folds == (flags.contains("pclmulqdq") && flags.contains("sse4_1")))
        #else
        #expect(!ReflectedCRC<UInt32>.folds)
        #endif
    }
}
