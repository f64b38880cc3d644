import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto
import TollgateDates

/// The examples in AWS's S3 SigV4 documentation ("Examples: Signature Calculations",
/// sigv4-header-based-auth, sigv4-query-string-auth, sigv4-streaming), with their published
/// signatures.
@Suite("AWS published SigV4 examples")
struct AWSPublishedExampleTests {
    static let accessKeyId = "AKIAIOSFODNN7EXAMPLE"
    static let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    static let now = WireDate.parseISO8601Basic("20130524T000000Z")!
    static let emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    static func lookup(_ secret: String = secret) -> SecretLookup {
        { q throws(CredentialLookupError) in
            guard q.accessKeyId == accessKeyId else { throw .unknownAccessKey }
            return secret
        }
    }

    static func authorization(_ signedHeaders: String, _ signature: String) -> String {
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=\(signedHeaders),Signature=\(signature)"
    }

    struct Example: Sendable, CustomTestStringConvertible {
        var name: String
        var method: String
        var target: String
        var headers: [(String, String)]
        var testDescription: String { name }
    }

    static let examples: [Example] = [
        Example(name: "GET Object with Range", method: "GET", target: "/test.txt", headers: [
            ("Host", "examplebucket.s3.amazonaws.com"),
            ("Authorization", authorization("host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")),
            ("Range", "bytes=0-9"),
            ("x-amz-content-sha256", emptySHA),
            ("x-amz-date", "20130524T000000Z"),
        ]),
        Example(name: "PUT Object test$file.text", method: "PUT", target: "/test$file.text", headers: [
            ("Host", "examplebucket.s3.amazonaws.com"),
            ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
            ("Authorization", authorization("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"),
        ]),
        Example(name: "GET Bucket lifecycle", method: "GET", target: "/?lifecycle", headers: [
            ("Host", "examplebucket.s3.amazonaws.com"),
            ("Authorization", authorization("host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-content-sha256", emptySHA),
        ]),
        Example(name: "GET Bucket (list objects)", method: "GET", target: "/?max-keys=2&prefix=J", headers: [
            ("Host", "examplebucket.s3.amazonaws.com"),
            ("Authorization", authorization("host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-content-sha256", emptySHA),
        ]),
        Example(name: "presigned GET", method: "GET",
                target: "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
                headers: [("Host", "examplebucket.s3.amazonaws.com")]),
    ]

    @Test("verifies", arguments: examples)
    func verifies(_ example: Example) throws {
        let request = SignatureRequest(method: example.method, target: example.target,
                                       headers: SignatureHeaders(example.headers), now: Self.now)
        let verified = try S3SigV4.verify(request, lookup: Self.lookup())
        #expect(verified.identity.accessKeyId == Self.accessKeyId)
        #expect(verified.identity.region == "us-east-1")
    }

    @Test("fails with another secret", arguments: examples)
    func wrongSecret(_ example: Example) {
        let request = SignatureRequest(method: example.method, target: example.target,
                                       headers: SignatureHeaders(example.headers), now: Self.now)
        #expect(isSignatureMismatch(s3Error { () throws(S3AuthError) in
            try S3SigV4.verify(request, lookup: Self.lookup("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ"))
        }))
    }

    @Test("the PUT example's body verifies, and another body does not")
    func putBody() throws {
        let example = Self.examples[1]
        let request = SignatureRequest(method: example.method, target: example.target,
                                       headers: SignatureHeaders(example.headers), now: Self.now)
        let verified = try S3SigV4.verify(request, lookup: Self.lookup())
        let good = try verified.makePayloadVerifier()
        try good.update(Array("Welcome to Amazon S3.".utf8))
        let digests = try good.finish()
        #expect(digests.sha256.map { Hex.encode($0) } == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let bad = try verified.makePayloadVerifier()
        try bad.update(Array("Welcome to Amazon S3!".utf8))
        #expect(s3Error { () throws(S3AuthError) in try bad.finish() }?.code == "XAmzContentSHA256Mismatch")
    }

    @Test("the GET Object canonical request is AWS's")
    func canonicalRequest() {
        let example = Self.examples[0]
        let canonical = S3SigV4.canonicalRequest(method: "GET", rawPath: "/test.txt", rawQuery: "",
                                                 headers: SignatureHeaders(example.headers),
                                                 signedHeaders: ["host", "range", "x-amz-content-sha256", "x-amz-date"],
                                                 payloadHash: Self.emptySHA, presigned: false)
        #expect(canonical == """
        GET
        /test.txt

        host:examplebucket.s3.amazonaws.com
        range:bytes=0-9
        x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
        x-amz-date:20130524T000000Z

        host;range;x-amz-content-sha256;x-amz-date
        e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
        """)
        #expect(S3SigV4.stringToSign(timestamp: "20130524T000000Z", scope: "20130524/us-east-1/s3/aws4_request", canonicalRequest: canonical) == """
        AWS4-HMAC-SHA256
        20130524T000000Z
        20130524/us-east-1/s3/aws4_request
        7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
        """)
    }

    @Test("the presigned example expires after 86400 seconds")
    func presignedExpiry() {
        let example = Self.examples[4]
        let late = SignatureRequest(method: "GET", target: example.target, headers: SignatureHeaders(example.headers),
                                    now: Self.now.addingTimeInterval(86401))
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(late, lookup: Self.lookup()) }
        #expect(error?.message == "Request has expired")
        #expect(error?.details.first { $0.name == "Expires" }?.value == "2013-05-25T00:00:00Z")
    }

    // MARK: aws-chunked example (sigv4-streaming): 64 KiB + 1 KiB of 'a', three chunk signatures.

    static let chunkSignatures = [
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ]

    static func chunkedRequest() -> SignatureRequest {
        SignatureRequest(method: "PUT", rawPath: "/examplebucket/chunkObject.txt", headers: SignatureHeaders([
            ("Host", "s3.amazonaws.com"),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("Authorization", authorization("content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class", "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9")),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("Content-Encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("Content-Length", "66824"),
        ]), now: now)
    }

    static func chunkedBody(signatures: [String] = chunkSignatures) -> [UInt8] {
        var body: [UInt8] = []
        body += Array("10000;chunk-signature=\(signatures[0])\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 65536) + Array("\r\n".utf8)
        body += Array("400;chunk-signature=\(signatures[1])\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 1024) + Array("\r\n".utf8)
        body += Array("0;chunk-signature=\(signatures[2])\r\n\r\n".utf8)
        return body
    }

    @Test("the aws-chunked example decodes")
    func chunkedExample() throws {
        let verified = try S3SigV4.verify(Self.chunkedRequest(), lookup: Self.lookup())
        #expect(verified.payload == .streamingSigned)
        #expect(verified.decodedContentLength == 66560)
        let body = Self.chunkedBody()
        #expect(body.count == 66824)
        let decoder = try #require(try verified.makeChunkedDecoder())
        var out: [UInt8] = []
        // Feed in 1000-byte slices: chunk headers straddle feeds.
        var start = 0
        while start < body.count {
            let end = min(body.count, start + 1000)
            out += try decoder.decode(body[start..<end])
            start = end
        }
        try decoder.finish()
        let same = out == [UInt8](repeating: UInt8(ascii: "a"), count: 66560)
        #expect(same)
    }

    @Test("each published chunk signature is checked", arguments: 0..<3)
    func chunkedExampleWrongSignature(_ index: Int) throws {
        let verified = try S3SigV4.verify(Self.chunkedRequest(), lookup: Self.lookup())
        var signatures = Self.chunkSignatures
        signatures[index] = flipLastHex(signatures[index])
        let decoder = try #require(try verified.makeChunkedDecoder())
        var emitted = 0
        let error = s3Error { () throws(S3AuthError) in
            let body = Self.chunkedBody(signatures: signatures)
            var output: [UInt8] = []
            try decoder.decode(body, into: &output)
            emitted = output.count
            return try decoder.finish()
        }
        #expect(isSignatureMismatch(error))
        #expect(emitted == 0 || index > 0)
    }

    /// Chunks stream (memory does not grow with the announced chunk size), so an altered chunk's
    /// bytes may come out; the decoder throws when that chunk ends, before anything after it and
    /// long before `finish()`, which is what the store waits for before it commits.
    @Test("a chunk whose data was altered fails at its own end")
    func alteredChunkFailsAtItsEnd() throws {
        let verified = try S3SigV4.verify(Self.chunkedRequest(), lookup: Self.lookup())
        let decoder = try #require(try verified.makeChunkedDecoder())
        var body = Self.chunkedBody()
        body[100] = UInt8(ascii: "b")
        let firstChunkSize = 65536
        var output: [UInt8] = []
        let error = s3Error { () throws(S3AuthError) in
            try decoder.decode(body, into: &output)
        }
        #expect(isSignatureMismatch(error))
        #expect(output.count == firstChunkSize, "nothing after the altered chunk")
    }
}

@Suite("SigV4 signing")
struct SigV4SigningTests {
    /// The signer reproduces AWS's published "GET Object with Range" signature, and what it
    /// signs verifies.
    @Test func signsThePublishedExample() throws {
        let headers: SignatureHeaders = [
            "Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9",
            "x-amz-content-sha256": AWSPublishedExampleTests.emptySHA, "x-amz-date": "20130524T000000Z",
        ]
        let authorization = try S3SigV4.authorization(
            method: "GET", rawPath: "/test.txt", rawQuery: "", headers: headers, payloadHash: AWSPublishedExampleTests.emptySHA,
            accessKeyId: AWSPublishedExampleTests.accessKeyId, secret: AWSPublishedExampleTests.secret, region: "us-east-1",
            timestamp: "20130524T000000Z"
        )
        #expect(authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }
}

extension SignatureRequest {
    /// Splits a request target (`/bucket/key?acl`) into path and query, as the HTTP layer does.
    init(method: String, target: String, headers: SignatureHeaders, now: Date) {
        let mark = target.firstIndex(of: "?")
        self.init(method: method, rawPath: String(target[..<(mark ?? target.endIndex)]),
                  rawQuery: mark.map { String(target[target.index(after: $0)...]) } ?? "", headers: headers, now: now)
    }
}
