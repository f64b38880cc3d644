import Testing
import TollgateCrypto

private func bytes(_ hex: String) -> [UInt8] { Hex.decode(hex)! }
private func repeated(_ byte: UInt8, _ count: Int) -> [UInt8] { [UInt8](repeating: byte, count: count) }

struct MACVector: Sendable, CustomStringConvertible {
    let name: String
    let key: [UInt8]
    let data: [UInt8]
    let expected: String
    var truncate: Int? = nil
    var description: String { name }
}

/// RFC 4231, section 4: HMAC-SHA256 test cases 1–7.
let rfc4231: [MACVector] = [
    MACVector(name: "case 1", key: repeated(0x0b, 20), data: Array("Hi There".utf8),
              expected: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    MACVector(name: "case 2", key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8),
              expected: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    MACVector(name: "case 3", key: repeated(0xaa, 20), data: repeated(0xdd, 50),
              expected: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
    MACVector(name: "case 4", key: bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), data: repeated(0xcd, 50),
              expected: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
    MACVector(name: "case 5 (truncated to 128 bits)", key: repeated(0x0c, 20), data: Array("Test With Truncation".utf8),
              expected: "a3b6167473100ee06e0c796c2955552b", truncate: 16),
    MACVector(name: "case 6", key: repeated(0xaa, 131),
              data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
              expected: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    MACVector(name: "case 7", key: repeated(0xaa, 131),
              data: Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
              expected: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]

/// RFC 2202, section 3: HMAC-SHA1 test cases 1–7.
let rfc2202: [MACVector] = [
    MACVector(name: "case 1", key: repeated(0x0b, 20), data: Array("Hi There".utf8),
              expected: "b617318655057264e28bc0b6fb378c8ef146be00"),
    MACVector(name: "case 2", key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8),
              expected: "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
    MACVector(name: "case 3", key: repeated(0xaa, 20), data: repeated(0xdd, 50),
              expected: "125d7342b9ac11cd91a39af48aa17b4f63f175d3"),
    MACVector(name: "case 4", key: bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), data: repeated(0xcd, 50),
              expected: "4c9007f4026250c6bc8414f9bf50c86c2d7235da"),
    MACVector(name: "case 5", key: repeated(0x0c, 20), data: Array("Test With Truncation".utf8),
              expected: "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"),
    MACVector(name: "case 6", key: repeated(0xaa, 80),
              data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
              expected: "aa4ae5e15272d00e95705637ce8a3b55ed402112"),
    MACVector(name: "case 7", key: repeated(0xaa, 80),
              data: Array("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data".utf8),
              expected: "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"),
]

@Test("RFC 4231 HMAC-SHA256", arguments: rfc4231)
func hmacSHA256(vector: MACVector) throws {
    let mac = try Crypto.hmacSHA256(key: vector.key, data: vector.data)
    #expect(Hex.encode(mac.prefix(vector.truncate ?? mac.count)) == vector.expected)
}

@Test("RFC 2202 HMAC-SHA1", arguments: rfc2202)
func hmacSHA1(vector: MACVector) throws {
    #expect(Hex.encode(try Crypto.hmacSHA1(key: vector.key, data: vector.data)) == vector.expected)
}

/// A prepared key reuses its contexts: every MAC after the first starts from a reset one, so a
/// reset that kept any state of the previous message would show here.
@Test("HMACKey: RFC 4231 and RFC 2202 vectors, repeated on one key", arguments: rfc4231 + rfc2202)
func preparedKeyRepeats(vector: MACVector) throws {
    let algorithm: DigestAlgorithm = vector.expected.count == 40 ? .sha1 : .sha256
    let key = try HMACKey(algorithm, key: vector.key)
    for _ in 0..<3 {
        let mac = try key.authenticate(vector.data)
        #expect(Hex.encode(mac.prefix(vector.truncate ?? mac.count)) == vector.expected)
    }
    // A different message in between must not leak into the next one.
    _ = try key.authenticate(Array("something else entirely, longer than one block of SHA-256 input....".utf8))
    let mac = try key.authenticate(vector.data)
    #expect(Hex.encode(mac.prefix(vector.truncate ?? mac.count)) == vector.expected)
}

/// Many MACs at once on one key: each borrows its own context from the pool.
@Test func preparedKeyIsSharedAcrossTasks() async throws {
    let key = try HMACKey(.sha256, key: Array("key".utf8))
    let messages = (0..<200).map { Array("message \($0)".utf8) }
    let expected = try messages.map { try Crypto.hmacSHA256(key: Array("key".utf8), data: $0) }
    let results = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
        for (index, message) in messages.enumerated() {
            group.addTask { (index, try key.authenticate(message)) }
        }
        var results = [[UInt8]](repeating: [], count: messages.count)
        for try await (index, mac) in group { results[index] = mac }
        return results
    }
    #expect(results == expected)
}

/// NIST FIPS 180-2 / CSRC example values for SHA-256.
@Test("NIST SHA-256", arguments: [
    ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
])
func sha256(input: String, expected: String) throws {
    #expect(Hex.encode(try Crypto.sha256(Array(input.utf8))) == expected)
}

@Test("NIST SHA-256 of one million 'a', streamed in uneven pieces")
func sha256Million() throws {
    let digest = try StreamingDigest(.sha256)
    var remaining = 1_000_000
    var piece = 1
    while remaining > 0 {
        let n = min(piece, remaining)
        try digest.update(repeated(UInt8(ascii: "a"), n))
        remaining -= n
        piece = piece * 3 % 65_537 + 1
    }
    #expect(Hex.encode(try digest.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
}

@Test("RFC 1321 MD5", arguments: [
    ("", "d41d8cd98f00b204e9800998ecf8427e"),
    ("abc", "900150983cd24fb0d6963f7d28e17f72"),
    ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
])
func md5(input: String, expected: String) throws {
    #expect(Hex.encode(try Crypto.md5(Array(input.utf8))) == expected)
}

@Test func randomBytesAreFreshAndSized() throws {
    let a = try Crypto.randomBytes(count: 32)
    let b = try Crypto.randomBytes(count: 32)
    #expect(a.count == 32)
    #expect(a != b)
}

/// The pool hands out every byte of its blocks once, across refills, and never the same run twice.
@Test func randomPoolHandsOutFreshBytesAcrossRefills() throws {
    let pool = RandomPool(blockSize: 64)
    var seen = Set<[UInt8]>()
    var total = 0
    for count in [1, 24, 48, 64, 7, 63, 64, 30] {
        let bytes = try pool.bytes(count: count)
        #expect(bytes.count == count)
        total += count
        if count >= 16 { #expect(seen.insert(bytes).inserted) }
    }
    #expect(total > 3 * 64, "several refills were exercised")
    // Not constant: a pool that returned zeros or a fixed block would repeat itself.
    let runs = try (0..<8).map { _ in try pool.bytes(count: 16) }
    #expect(Set(runs).count == runs.count)
}

@Test func constantTimeCompare() {
    #expect(Crypto.constantTimeEqual([1, 2, 3], [1, 2, 3]))
    #expect(!Crypto.constantTimeEqual([1, 2, 3], [1, 2, 4]))
    #expect(!Crypto.constantTimeEqual([1, 2, 3], [1, 2]))
    #expect(Crypto.constantTimeEqual([UInt8](), []))
}

@Test func base64RoundTripsAndRejectsJunk() {
    for n in 0..<40 {
        let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        #expect(Base64.decode(Base64.encode(data)) == data)
        #expect(Base64.decode(Base64.encodeURL(data)) == data)
        var appended = Array("prefix.".utf8)
        Base64.appendURL(data, to: &appended)
        #expect(appended == Array("prefix.".utf8) + Array(Base64.encodeURL(data).utf8))
    }
    #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
    #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
    #expect(Base64.decode("Zm9v!mFy") == nil)
    #expect(Base64.decode("Zm9=") == nil, "non-zero trailing bits have another canonical encoding")
    #expect(Hex.decode("0g") == nil)
    #expect(Hex.decode("abc") == nil)
}

@Test func hexRoundTripsEveryByteAndRejectsJunk() {
    let every = (0...255).map { UInt8($0) }
    let lower = Hex.encode(every)
    #expect(lower.utf8.count == 512 && lower.hasPrefix("000102") && lower.hasSuffix("fdfeff"))
    #expect(Hex.decode(lower) == every)
    #expect(Hex.decode(lower.uppercased()) == every)
    #expect(Hex.decode(lower[...]) == every)
    var appended = Array("x:".utf8)
    Hex.append(every[250...], to: &appended)
    Hex.append([0xab], to: &appended)
    #expect(String(decoding: appended, as: UTF8.self) == "x:fafbfcfdfeffab")
    #expect(Hex.decode("") == [])
    // Into memory of its own: exactly half as many bytes as digits, else false.
    var out = [UInt8](repeating: 0, count: 2)
    for (digits, decodes) in [("aB0f", true), ("ab0", false), ("ab0f00", false), ("ag0f", false)] {
        let result = Array(digits.utf8).withUnsafeBufferPointer { utf8 in out.withUnsafeMutableBufferPointer { Hex.decode(utf8, into: $0) } }
        #expect(result == decodes, "\(digits)")
    }
    #expect(out == [0xab, 0x0f])
    for junk in ["0g", "abc", "g0", "0 ", "ab-c", "ａｂ", "00112233445566778899aabbccddeeff0"] {
        #expect(Hex.decode(junk) == nil, "\(junk)")
    }
}
