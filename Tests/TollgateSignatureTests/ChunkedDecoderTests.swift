import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto

@Suite("aws-chunked decoder")
struct ChunkedDecoderTests {
    static let small = generatedS3Vectors.filter {
        ($0.mode == .streamingSigned || $0.mode == .streamingSignedTrailer || $0.mode == .streamingUnsignedTrailer)
            && $0.bodyBytes.count < 2048
    }

    func decoder(_ vector: S3Vector, adjust: (inout S3VerifiedRequest) -> Void = { _ in }) throws -> AWSChunkedDecoder {
        var verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        adjust(&verified)
        return try #require(try verified.makeChunkedDecoder())
    }

    @Test("split at every byte boundary", arguments: small)
    func everySplit(_ vector: S3Vector) throws {
        let body = vector.bodyBytes
        for split in 0...body.count {
            let decoder = try decoder(vector)
            var out: [UInt8] = []
            try decoder.decode(body[..<split], into: &out)
            try decoder.decode(body[split...], into: &out)
            try decoder.finish()
            let same = out == vector.decodedBytes
            #expect(same, "split at \(split)")
        }
    }

    @Test("payload ranges: within each feed, in order, framing never among them, the decoded bytes when joined", arguments: small)
    func payloadRanges(_ vector: S3Vector) throws {
        let body = vector.bodyBytes
        for feed in [1, 2, 7, 64, 200, body.count] where feed > 0 {
            let decoder = try decoder(vector)
            var joined: [UInt8] = []
            var start = 0
            while start < body.count {
                let piece = Array(body[start..<min(body.count, start + feed)])
                var ranges: [Range<Int>] = []
                try piece.withUnsafeBytes { bytes in try decoder.decode(bytes) { ranges.append($0) } }
                for (index, range) in ranges.enumerated() {
                    #expect(range.lowerBound >= 0 && range.upperBound <= piece.count && !range.isEmpty, "feed \(feed)")
                    if index > 0 { #expect(range.lowerBound > ranges[index - 1].upperBound, "a chunk's framing lies between two ranges") }
                    joined += piece[range]
                }
                start += feed
            }
            try decoder.finish()
            #expect(joined == vector.decodedBytes, "feed \(feed)")
        }
    }

    @Test("one byte at a time", arguments: small)
    func byteByByte(_ vector: S3Vector) throws {
        let decoder = try decoder(vector)
        var out: [UInt8] = []
        for byte in vector.bodyBytes { try decoder.decode(CollectionOfOne(byte), into: &out) }
        try decoder.finish()
        let same = out == vector.decodedBytes
        #expect(same)
    }

    @Test("a body cut short is IncompleteBody", arguments: small)
    func truncated(_ vector: S3Vector) throws {
        let body = vector.bodyBytes
        for cut in stride(from: 0, to: body.count - 2, by: max(1, body.count / 37)) {
            let decoder = try decoder(vector)
            let error = s3Error { () throws(S3AuthError) in
                _ = try decoder.decode(body[..<cut])
                return try decoder.finish()
            }
            #expect(error?.code == "IncompleteBody", "cut at \(cut): \(String(describing: error))")
        }
    }

    @Test("decoded length must match x-amz-decoded-content-length", arguments: small.filter { !$0.decodedBytes.isEmpty })
    func decodedLength(_ vector: S3Vector) throws {
        let longer = try decoder(vector) { $0.decodedContentLength! += 1 }
        let short = s3Error { () throws(S3AuthError) in
            _ = try longer.decode(vector.bodyBytes)
            return try longer.finish()
        }
        #expect(short?.code == "IncompleteBody")
        let shorter = try decoder(vector) { $0.decodedContentLength! -= 1 }
        let over = s3Error { () throws(S3AuthError) in
            _ = try shorter.decode(vector.bodyBytes)
            return try shorter.finish()
        }
        #expect(over?.code == "InvalidRequest")
    }

    @Test("signed chunks stream: the bytes of a chunk come out before its end, and a tampered chunk still fails at its end",
          arguments: small.filter { $0.mode != .streamingUnsignedTrailer && $0.decodedBytes.count > 1 })
    func signedChunksStream(_ vector: S3Vector) throws {
        let body = vector.bodyBytes
        // The first chunk's data starts after its header line.
        let dataStart = try #require(body.firstIndex(of: UInt8(ascii: "\n"))) + 1
        let streaming = try decoder(vector)
        var out: [UInt8] = []
        try streaming.decode(body[..<(dataStart + 1)], into: &out)
        #expect(out == Array(vector.decodedBytes.prefix(1)), "one data byte in, one byte out: nothing held back")

        var tampered = body
        tampered[dataStart + 1] ^= 0x01
        let checked = try decoder(vector)
        let error = s3Error { () throws(S3AuthError) in
            _ = try checked.decode(tampered)
            return try checked.finish()
        }
        #expect(isSignatureMismatch(error))
    }

    @Test("chunks over the size cap are refused before they are buffered")
    func chunkCap() throws {
        let vector = try #require(Self.small.first { $0.name == "signed chunked small" })
        let verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        let decoder = try #require(try verified.makeChunkedDecoder(maxChunkSize: 64))
        let error = s3Error { () throws(S3AuthError) in try decoder.decode(vector.bodyBytes) }
        #expect(error?.code == "InvalidRequest")
        #expect(error?.message.contains("exceeds") == true)
    }

    @Test("a wrong trailer checksum is BadDigest (unsigned) or SignatureDoesNotMatch (signed trailer)",
          arguments: small.filter { $0.mode != .streamingSigned })
    func trailerChecksum(_ vector: S3Vector) throws {
        var text = String(decoding: vector.bodyBytes, as: UTF8.self)
        let marker = try #require(text.range(of: "x-amz-checksum-"))
        let colon = try #require(text[marker.upperBound...].firstIndex(of: ":"))
        let lineEnd = try #require(text[colon...].firstIndex(of: "\r\n")) // "\r\n" is one Character
        let value = String(text[text.index(after: colon)..<lineEnd])
        // Same length, still valid base64 of the right size, different digest.
        let digest = try #require(Base64.decode(value))
        let wrong = Base64.encode(digest.map { $0 ^ 0xff })
        text.replaceSubrange(text.index(after: colon)..<lineEnd, with: wrong)
        let decoder = try decoder(vector)
        let error = s3Error { () throws(S3AuthError) in
            _ = try decoder.decode(Array(text.utf8))
            return try decoder.finish()
        }
        if vector.mode == .streamingSignedTrailer {
            #expect(isSignatureMismatch(error))
        } else {
            #expect(error?.code == "BadDigest")
            #expect(error?.message.hasSuffix("you specified did not match the calculated checksum.") == true)
        }
    }

    @Test("a checksum trailer sent twice, the good value first, is refused", arguments: small.filter { $0.mode != .streamingSigned })
    func repeatedTrailer(_ vector: S3Vector) throws {
        var text = String(decoding: vector.bodyBytes, as: UTF8.self)
        let marker = try #require(text.range(of: "x-amz-checksum-"))
        let lineEnd = try #require(text[marker.lowerBound...].firstIndex(of: "\r\n"))
        let line = String(text[marker.lowerBound..<lineEnd])
        let colon = try #require(line.firstIndex(of: ":"))
        let digest = try #require(Base64.decode(String(line[line.index(after: colon)...])))
        let bad = String(line[...colon]) + Base64.encode(digest.map { $0 ^ 0xff })
        text.insert(contentsOf: "\r\n" + bad, at: lineEnd)
        let decoder = try decoder(vector)
        let error = s3Error { () throws(S3AuthError) in
            _ = try decoder.decode(Array(text.utf8))
            return try decoder.finish()
        }
        #expect(error?.code == "InvalidRequest")
        #expect(error?.message.contains("sent twice") == true)
    }

    @Test("trailing garbage after the end is refused", arguments: small)
    func trailingGarbage(_ vector: S3Vector) throws {
        let decoder = try decoder(vector)
        let error = s3Error { () throws(S3AuthError) in
            _ = try decoder.decode(vector.bodyBytes + Array("x".utf8))
            return try decoder.finish()
        }
        #expect(error?.code == "InvalidRequest")
    }

    @Test("a malformed chunk size is refused")
    func badSize() throws {
        let vector = try #require(Self.small.first { $0.mode == .streamingUnsignedTrailer })
        let decoder = try decoder(vector)
        let error = s3Error { () throws(S3AuthError) in try decoder.decode(Array("zz\r\n".utf8)) }
        #expect(error?.code == "InvalidRequest")
    }
}

@Suite("checksums and payload verification")
struct ChecksumTests {
    static let check = Array("123456789".utf8)

    @Test("CRC check values")
    func crcCheckValues() throws {
        #expect(try StreamingChecksum.checksum(.crc32, Self.check) == [0xCB, 0xF4, 0x39, 0x26])
        #expect(try StreamingChecksum.checksum(.crc32c, Self.check) == [0xE3, 0x06, 0x92, 0x83])
        #expect(try StreamingChecksum.checksum(.crc64nvme, Self.check) == [0xAE, 0x8B, 0x14, 0x86, 0x0A, 0x79, 0x98, 0x88])
        #expect(try StreamingChecksum.checksum(.crc32, []) == [0, 0, 0, 0])
    }

    @Test("streaming equals one-shot for every algorithm", arguments: ChecksumAlgorithm.allCases)
    func streaming(_ algorithm: ChecksumAlgorithm) throws {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 31) }
        let c = try StreamingChecksum(algorithm)
        try c.update(data[..<333])
        try c.update(data[333...])
        let streamed = try c.finalize()
        #expect(streamed == (try StreamingChecksum.checksum(algorithm, data)))
        #expect(streamed.count == algorithm.digestSize)
    }

    @Test("SHA-256 and SHA-1 checksums are the base64 digests S3 uses")
    func shaValues() throws {
        #expect(Base64.encode(try StreamingChecksum.checksum(.sha256, Array("abc".utf8))) == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
        #expect(Base64.encode(try StreamingChecksum.checksum(.sha1, Array("abc".utf8))) == "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=")
        #expect(Base64.encode(try StreamingChecksum.checksum(.crc32, Array("abc".utf8))) == "NSRBwg==")
    }

    @Test("x-amz-checksum header mismatch is BadDigest; a malformed value is InvalidRequest")
    func headerChecksum() throws {
        let body = Array("header checksum".utf8)
        let good = try #require(ExpectedChecksum(algorithm: .crc32, base64: Base64.encode(try StreamingChecksum.checksum(.crc32, body))))
        let ok = try S3PayloadVerifier(expectedSHA256: nil, contentMD5: nil, checksum: good)
        try ok.update(body)
        #expect(try ok.finish().checksum == good)
        let bad = try S3PayloadVerifier(expectedSHA256: nil, contentMD5: nil, checksum: good)
        try bad.update(body + [0])
        let error = s3Error { () throws(S3AuthError) in try bad.finish() }
        #expect(error?.code == "BadDigest")
        #expect(error?.message == "The CRC32 you specified did not match the calculated checksum.")

        let headers: SignatureHeaders = ["x-amz-checksum-crc32": "not base64!"]
        #expect(s3Error { () throws(S3AuthError) in try S3SigV4.parseChecksumHeader(headers) }?.code == "InvalidRequest")
        let two: SignatureHeaders = ["x-amz-checksum-crc32": "NSRBwg==", "x-amz-checksum-sha1": "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="]
        #expect(s3Error { () throws(S3AuthError) in try S3SigV4.parseChecksumHeader(two) }?.code == "InvalidRequest")
        let type: SignatureHeaders = ["x-amz-checksum-type": "FULL_OBJECT", "x-amz-checksum-crc32": "NSRBwg=="]
        #expect(try S3SigV4.parseChecksumHeader(type)?.algorithm == .crc32)
    }

    @Test("Content-MD5: malformed is InvalidDigest, mismatch is BadDigest")
    func contentMD5() throws {
        #expect(ContentMD5.parse("1B2M2Y8AsgTpgAmY7PhCfg==") == (try Crypto.md5([UInt8]())))
        #expect(ContentMD5.parse("1B2M2Y8AsgTpgAmY7PhCfg") != nil)
        #expect(ContentMD5.parse("abc") == nil)
        #expect(ContentMD5.parse(Base64.encode([UInt8](repeating: 0, count: 15))) == nil)
        let verifier = try S3PayloadVerifier(expectedSHA256: nil, contentMD5: try Crypto.md5(Array("x".utf8)), checksum: nil)
        try verifier.update(Array("y".utf8))
        #expect(s3Error { () throws(S3AuthError) in try verifier.finish() }?.code == "BadDigest")
        #expect(S3AuthError.invalidDigest.code == "InvalidDigest")
    }
}

@Suite("canonical forms and parsing")
struct CanonicalFormTests {
    @Test("S3 canonical URI: re-encodes once, no normalisation", arguments: [
        ("/test$file.text", "/test%24file.text"),
        ("/test%24file.text", "/test%24file.text"),
        ("/a%2Fb/c", "/a%2Fb/c"),
        ("/%7Euser/a+b", "/~user/a%2Bb"),
        ("/a//b/./c/../d", "/a//b/./c/../d"),
        ("/%E6%95%B0/%e6%95%b0", "/%E6%95%B0/%E6%95%B0"),
        ("/%", "/%25"), ("/a%2", "/a%252"), ("/a%zz/b%4", "/a%25zz/b%254"), ("/日本/", "/%E6%97%A5%E6%9C%AC/"),
        ("", "/"),
    ])
    func canonicalURI(_ pair: (String, String)) {
        #expect(S3SigV4.canonicalURI(rawPath: pair.0) == pair.1)
    }

    @Test("S3 canonical query: sorted by encoded name then value, empty values keep '='")
    func canonicalQuery() {
        #expect(S3SigV4.canonicalQuery(rawQuery: "prefix=J&max-keys=2&acl&a=2&a=1&sp=a+b&t=%7e", excludingSignature: false)
                == "a=1&a=2&acl=&max-keys=2&prefix=J&sp=a%20b&t=~")
        #expect(S3SigV4.canonicalQuery(rawQuery: "X-Amz-Signature=abc&b=1", excludingSignature: true) == "b=1")
        #expect(S3SigV4.canonicalQuery(rawQuery: "z=1&X-Amz-Signature=abc&b=%2f&&c", excludingSignature: true) == "b=%2F&c=&z=1")
        #expect(S3SigV4.canonicalQuery(rawQuery: "X-Amz-Signature=abc&b=1", excludingSignature: false) == "X-Amz-Signature=abc&b=1")
        #expect(S3SigV4.canonicalQuery(rawQuery: "k=%&k2=%4&k3=a=b", excludingSignature: false) == "k=%25&k2=%254&k3=a%3Db")
        // Already canonical (copied whole) next to forms that are not: lower-case hex, escaped unreserved bytes.
        #expect(S3SigV4.canonicalQuery(rawQuery: "c=a%2Fb%3D&a=%41%7e&b=%2f%e6%95%b0", excludingSignature: false)
                == "a=A~&b=%2F%E6%95%B0&c=a%2Fb%3D")
    }

    @Test("query items split on & and the first =, by bytes")
    func queryItems() {
        let query = RawQuery("a=1&&b&c=x=y&%41+b=%2B+&=v&日=本")
        var rawValues: [String?] = []
        query.forEachRawItem { bytes, _, value in rawValues.append(value.map { String(decoding: bytes[$0], as: UTF8.self) }) }
        #expect(rawValues == ["1", nil, "x=y", "%2B+", "v", "本"])
        #expect(query.items.map(\.name) == ["a", "b", "c", "A b", "", "日"])
        #expect(query.items.map(\.value) == ["1", "", "x=y", "+ ", "v", "本"])
        #expect(query.items.map(\.hasValue) == [true, false, true, true, true, true])
        #expect(RawQuery("").isEmpty)
        #expect(RawQuery("&&").isEmpty)
    }

    @Test("query lookups compare decoded names, case-sensitively, and find the first")
    func queryLookups() {
        let query = RawQuery("X-Amz-Date=1&x-amz-date=2&X%2DAmz-Date=3&a+b=4&X-Amz-Dat=5&=6&acl")
        #expect(query.first(named: "X-Amz-Date") == "1")
        #expect(query.first(named: "x-amz-date") == "2")
        #expect(query.first(named: "a b") == "4")
        #expect(query.first(named: "a+b") == nil)
        #expect(query.first(named: "") == "6")
        #expect(query.first(named: "acl") == "")
        #expect(query.firstIndex(named: "X-Amz-Dat") == 4)
        #expect(!query.contains(named: "X-Amz-Date2"))
        #expect(query.firstValues(named: [Array("acl".utf8), Array("X-Amz-Date".utf8), Array("none".utf8)]) == ["", "1", nil])
        // An escaped name is compared decoded: X%2DAmz-Date is X-Amz-Date.
        let escaped = RawQuery("X%2DAmz-Date=3")
        #expect(escaped.first(named: "X-Amz-Date") == "3")
        #expect(escaped.nameHasPrefix(0, "X-Amz-"))
        #expect(!query.nameHasPrefix(1, "X-Amz-"))
    }

    @Test("SignedHeaders: non-empty lower-case names only", arguments: [
        ("host", ["host"]), ("host;x-amz-date", ["host", "x-amz-date"]),
        ("Host", nil), ("host;;x-amz-date", nil), ("", nil), ("host;", nil),
    ] as [(String, [String]?)])
    func signedHeaders(_ pair: (String, [String]?)) {
        #expect(S3SigV4.parseSignedHeaders(pair.0) == pair.1)
    }

    @Test("Trimall: trims and collapses whitespace", arguments: [
        ("  a   b  ", "a b"), ("a\t\tb", "a b"), ("ab", "ab"), ("   ", ""), ("", ""), (" a \r\n b", "a b"),
    ])
    func trimAll(_ pair: (String, String)) {
        #expect(S3SigV4.trimAll(pair.0) == pair.1)
    }

    @Test("scheme detection", arguments: [
        ([("Authorization", "OSS ak:sig")], "", SignatureScheme.ossV1Header),
        ([("Authorization", "OSS4-HMAC-SHA256 Credential=a/b")], "", .ossV4Header),
        ([("Authorization", "AWS4-HMAC-SHA256 Credential=a/b")], "", .s3SigV4Header),
        ([("Authorization", "AWS ak:sig")], "", .s3SigV2Header),
        ([("Authorization", "Bearer abc")], "", .unsupported("Bearer")),
        ([], "AWSAccessKeyId=a&Expires=1&Signature=x", .s3SigV2Query),
        ([], "OSSAccessKeyId=a&Expires=1&Signature=x", .ossV1Query),
        ([], "x-oss-signature-version=OSS4-HMAC-SHA256&x-oss-credential=a", .ossV4Query),
        ([], "X-Amz-Algorithm=AWS4-HMAC-SHA256", .s3SigV4Query),
        ([], "acl", .anonymous),
        // Precedence: OSS V4 and V2, OSS V1, S3 V4, S3 V2, wherever each stands in the query.
        ([], "X-Amz-Algorithm=AWS4-HMAC-SHA256&OSSAccessKeyId=a", .ossV1Query),
        ([], "AWSAccessKeyId=a&X-Amz-Algorithm=AWS4-HMAC-SHA256", .s3SigV4Query),
        ([], "OSSAccessKeyId=a&x-oss-signature-version=OSS2&x-oss-signature-version=OSS4-HMAC-SHA256", .ossV2Query),
        ([], "OSSAccessKeyId=a&x-oss-signature-version=OSS3", .unsupported("OSS3")),
        ([("Authorization", "OSS2 AccessKeyId:a,Signature:b")], "", .ossV2Header),
        ([("Authorization", "OSS3 AccessKeyId:a,Signature:b")], "", .unsupported("OSS3")),
        // Names as decoded, compared exactly.
        ([], "X%2DAmz-Algorithm=AWS4-HMAC-SHA256", .s3SigV4Query),
        ([], "x-amz-algorithm=AWS4-HMAC-SHA256&awsaccesskeyid=a", .anonymous),
    ])
    func detection(_ input: ([(String, String)], String, SignatureScheme)) {
        let request = SignatureRequest(method: "GET", rawPath: "/", rawQuery: input.1, headers: SignatureHeaders(input.0),
                                       now: Date(timeIntervalSince1970: 0))
        #expect(SignatureScheme.detect(request) == input.2)
    }

    @Test("the signing context never prints its key")
    func redaction() throws {
        let vector = try #require(generatedS3Vectors.first { $0.mode == .streamingSigned })
        let verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        let text = "\(verified) \(String(reflecting: verified))"
        #expect(!text.contains("signingKey"))
        #expect(!text.contains(vector.secret))
    }
}
