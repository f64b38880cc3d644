import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto

@Suite("S3 SigV4 against botocore-signed requests")
struct S3SigV4VectorTests {
    @Test("verifies", arguments: generatedS3Vectors)
    func verifies(_ vector: S3Vector) throws {
        let verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        #expect(verified.identity.accessKeyId == vector.accessKeyId)
        #expect(verified.identity.dialect == .s3SigV4)
        #expect(verified.identity.presigned == vector.presigned)
        #expect(verified.identity.region == vector.region)
        #expect(verified.identity.securityToken == vector.token)
        #expect(verified.identity.signedHeaders.contains("host"))
        switch (vector.mode, verified.payload) {
        case (.sha256, .sha256), (.unsigned, .unsigned), (.streamingSigned, .streamingSigned),
             (.streamingSignedTrailer, .streamingSignedTrailer), (.streamingUnsignedTrailer, .streamingUnsignedTrailer):
            break
        default:
            Issue.record("payload mode \(verified.payload) for expected \(vector.mode)")
        }

        // The body verifies too, and decodes to what the SDK sent.
        if verified.payload.isChunked {
            let decoder = try #require(try verified.makeChunkedDecoder())
            var out: [UInt8] = []
            let body = vector.bodyBytes
            // Cut the body into uneven slices.
            var start = 0
            var step = 1
            while start < body.count {
                let end = min(body.count, start + step)
                out += try decoder.decode(body[start..<end])
                start = end
                step = step * 3 + 1
            }
            try decoder.finish()
            let same = out == vector.decodedBytes
            #expect(same)
        } else {
            let verifier = try verified.makePayloadVerifier()
            try verifier.update(vector.bodyBytes)
            try verifier.finish()
        }
    }

    @Test("a changed signature fails", arguments: generatedS3Vectors)
    func changedSignature(_ vector: S3Vector) {
        var request = vector.request()
        if vector.presigned {
            request.rawQuery = replacingQueryValue(request.rawQuery, "X-Amz-Signature", flipLastHex)
        } else {
            request.headers = SignatureHeaders(vector.headers.replacing("Authorization", with: flipLastHex))
        }
        #expect(isSignatureMismatch(s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }))
    }

    /// The signature is compared as the 32 bytes its hex spells: either case is the same
    /// signature; a digit short, one more byte or a non-hex digit is none.
    @Test("the signature is 64 hex digits of either case", arguments: generatedS3Vectors)
    func signatureHexForms(_ vector: S3Vector) {
        func verify(_ transform: (String) -> String) -> S3AuthError? {
            var request = vector.request()
            if vector.presigned {
                request.rawQuery = replacingQueryValue(request.rawQuery, "X-Amz-Signature", transform)
            } else {
                request.headers = SignatureHeaders(vector.headers.replacing("Authorization", with: transform))
            }
            return s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }
        }
        #expect(verify { $0.dropLast(64) + $0.suffix(64).uppercased() } == nil)
        #expect(isSignatureMismatch(verify { String($0.dropLast()) }))
        #expect(isSignatureMismatch(verify { $0 + "00" }))
        #expect(isSignatureMismatch(verify { String($0.dropLast()) + "g" }))
    }

    @Test("a changed Host header fails", arguments: generatedS3Vectors)
    func changedHeader(_ vector: S3Vector) {
        var request = vector.request()
        request.headers = SignatureHeaders(vector.headers.replacing("Host", with: { $0 + "0" }))
        #expect(isSignatureMismatch(s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }))
    }

    @Test("a changed path fails", arguments: generatedS3Vectors)
    func changedPath(_ vector: S3Vector) {
        var request = vector.request()
        request.rawPath += "x"
        #expect(isSignatureMismatch(s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }))
    }

    @Test("a different secret fails", arguments: generatedS3Vectors)
    func changedSecret(_ vector: S3Vector) {
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(vector.request(), lookup: vector.lookup(secretSuffix: "x")) }
        guard case .signatureDoesNotMatch(let mismatch) = error else {
            Issue.record("expected SignatureDoesNotMatch, got \(String(describing: error))")
            return
        }
        #expect(mismatch.accessKeyId == vector.accessKeyId)
        #expect(mismatch.stringToSign.hasPrefix("AWS4-HMAC-SHA256\n"))
        #expect(mismatch.canonicalRequest.hasPrefix(vector.method + "\n"))
        #expect(!mismatch.stringToSign.contains(vector.secret))
    }

    @Test("an unknown access key is InvalidAccessKeyId")
    func unknownKey() {
        let vector = generatedS3Vectors[0]
        let error = s3Error { () throws(S3AuthError) in
            try S3SigV4.verify(vector.request(), lookup: { _ throws(CredentialLookupError) in throw .unknownAccessKey })
        }
        #expect(error == .invalidAccessKeyId(vector.accessKeyId))
        #expect(error?.code == "InvalidAccessKeyId")
        #expect(error?.httpStatus == 403)
    }

    @Test("the security token reaches the lookup; token errors map to S3 codes")
    func tokenErrors() throws {
        let vector = try #require(generatedS3Vectors.first { $0.token != nil && !$0.presigned })
        var seen: String?
        _ = try S3SigV4.verify(vector.request(), lookup: { q throws(CredentialLookupError) in
            seen = q.securityToken
            return vector.secret
        })
        #expect(seen == vector.token)
        let expired = s3Error { () throws(S3AuthError) in
            try S3SigV4.verify(vector.request(), lookup: { _ throws(CredentialLookupError) in throw .expiredSecurityToken })
        }
        #expect(expired?.code == "ExpiredToken")
        let invalid = s3Error { () throws(S3AuthError) in
            try S3SigV4.verify(vector.request(), lookup: { _ throws(CredentialLookupError) in throw .invalidSecurityToken })
        }
        #expect(invalid?.code == "InvalidToken")
    }

    @Test("header-signed requests outside 15 minutes are RequestTimeTooSkewed", arguments: [-901.0, 901.0])
    func skew(_ offset: Double) throws {
        let vector = try #require(generatedS3Vectors.first { !$0.presigned })
        let now = Date(timeIntervalSince1970: generatedNow + offset)
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(vector.request(now: now), lookup: vector.lookup()) }
        #expect(error?.code == "RequestTimeTooSkewed")
        #expect(error?.details.contains { $0.name == "MaxAllowedSkewMilliseconds" && $0.value == "900000" } == true)
        // Inside the window it passes.
        let inside = Date(timeIntervalSince1970: generatedNow + (offset > 0 ? 899 : -899))
        _ = try S3SigV4.verify(vector.request(now: inside), lookup: vector.lookup())
    }

    @Test("presigned URLs expire; the error says Request has expired")
    func presignedExpiry() throws {
        let vector = try #require(generatedS3Vectors.first { $0.presigned && $0.query.contains("X-Amz-Expires=3600") })
        _ = try S3SigV4.verify(vector.request(now: Date(timeIntervalSince1970: generatedNow + 3600)), lookup: vector.lookup())
        let error = s3Error { () throws(S3AuthError) in
            try S3SigV4.verify(vector.request(now: Date(timeIntervalSince1970: generatedNow + 3601)), lookup: vector.lookup())
        }
        #expect(error?.code == "AccessDenied")
        #expect(error?.message == "Request has expired")
        #expect(error?.httpStatus == 403)
        // Presigned requests are not subject to the header skew rule: a day-old URL valid for a week works.
        let week = try #require(generatedS3Vectors.first { $0.query.contains("X-Amz-Expires=604800") })
        _ = try S3SigV4.verify(week.request(now: Date(timeIntervalSince1970: generatedNow + 86400)), lookup: week.lookup())
    }

    @Test("X-Amz-Expires outside 1...604800 is AuthorizationQueryParametersError", arguments: ["0", "604801", "-5", "abc"])
    func presignedExpiresRange(_ value: String) throws {
        let vector = try #require(generatedS3Vectors.first { $0.presigned })
        var request = vector.request()
        request.rawQuery = replacingQueryValue(request.rawQuery, "X-Amz-Expires", { _ in value })
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }
        #expect(error?.code == "AuthorizationQueryParametersError")
    }

    @Test("unsigned x-amz-* headers are refused")
    func unsignedAmzHeader() throws {
        let vector = try #require(generatedS3Vectors.first { !$0.presigned })
        var request = vector.request()
        request.headers.add(name: "x-amz-meta-sneaky", value: "1")
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }
        #expect(error?.code == "AccessDenied")
        #expect(error?.message.contains("x-amz-meta-sneaky") == true)
    }

    @Test("a presigned URL cannot gain unsigned x-amz-* headers: a presigned PUT never becomes a copy",
          arguments: ["x-amz-copy-source", "x-amz-copy-source-range", "x-amz-metadata-directive", "x-amz-tagging",
                      "x-amz-acl", "x-amz-checksum-crc32", "x-amz-server-side-encryption", "x-amz-meta-sneaky"])
    func presignedUnsignedAmzHeader(_ name: String) throws {
        let vector = try #require(generatedS3Vectors.first { $0.presigned })
        _ = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        var request = vector.request()
        request.headers.add(name: name, value: "other-bucket/secret")
        let error = s3Error { () throws(S3AuthError) in try S3SigV4.verify(request, lookup: vector.lookup()) }
        #expect(error?.code == "AccessDenied")
        #expect(error?.message.contains(name) == true)
        // The payload hash header is the canonical request's last line: covered either way.
        var hashed = vector.request()
        hashed.headers.add(name: "x-amz-content-sha256", value: "UNSIGNED-PAYLOAD")
        _ = try S3SigV4.verify(hashed, lookup: vector.lookup())
    }

    @Test("a changed body fails its signed SHA-256")
    func changedBody() throws {
        let vector = try #require(generatedS3Vectors.first { $0.mode == .sha256 && !$0.bodyBytes.isEmpty })
        let verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        let verifier = try verified.makePayloadVerifier()
        var body = vector.bodyBytes
        body[0] ^= 1
        try verifier.update(body)
        let error = s3Error { () throws(S3AuthError) in try verifier.finish() }
        #expect(error?.code == "XAmzContentSHA256Mismatch")
    }

    @Test("a changed aws-chunked payload byte fails", arguments: generatedS3Vectors.filter { $0.mode != .sha256 && $0.mode != .unsigned && $0.decodedBytes.count > 0 })
    func changedChunkedPayload(_ vector: S3Vector) throws {
        let verified = try S3SigV4.verify(vector.request(), lookup: vector.lookup())
        let decoder = try #require(try verified.makeChunkedDecoder())
        var body = vector.bodyBytes
        // Flip a byte of payload data: the first data byte after the first CRLF.
        let firstCRLF = try #require(body.firstIndex(of: UInt8(ascii: "\n")))
        body[firstCRLF + 1] ^= 0x20
        let error = s3Error { () throws(S3AuthError) in
            _ = try decoder.decode(body)
            return try decoder.finish()
        }
        if vector.mode == .streamingUnsignedTrailer {
            #expect(error?.code == "BadDigest")
        } else {
            #expect(isSignatureMismatch(error))
        }
    }
}
