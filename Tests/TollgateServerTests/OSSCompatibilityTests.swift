import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import TollgateCrypto
@testable import TollgateGateway
import TollgateSignature
import TollgateStore
import TollgateToken
@testable import TollgateTokenService

// What the OSS SDKs expect of OSS (issue 39), through the gateway's front door with signed
// requests (see SignedGatewayTests.swift): ETags, bodiless errors, copied parts, append tags,
// complete-all, DeleteObjects' encoding, bucket info and stat, CORS; and S3 ListObjects (v1)'s
// encoding; and OSS signature V2.

private func xml(_ response: TestResponse) -> String { String(buffer: response.body) }

/// The text of the first `<name>` element of `xml`.
private func element(_ name: String, in xml: String) -> String? {
    guard let start = xml.range(of: "<\(name)>"), let end = xml.range(of: "</\(name)>", range: start.upperBound..<xml.endIndex) else {
        return xml.contains("<\(name)/>") ? "" : nil
    }
    return String(xml[start.upperBound..<end.lowerBound])
}

private func elements(_ name: String, in xml: String) -> [String] {
    var found: [String] = []
    var rest = xml[...]
    while let start = rest.range(of: "<\(name)>"), let end = rest.range(of: "</\(name)>", range: start.upperBound..<rest.endIndex) {
        found.append(String(rest[start.upperBound..<end.lowerBound]))
        rest = rest[end.upperBound...]
    }
    return found
}

/// `"<md5 hex>"` of `text`, in `dialect`'s case.
private func quotedMD5(_ text: String, _ dialect: Dialect) throws -> String {
    let hex = Hex.encode(try Crypto.md5(Array(text.utf8)))
    return "\"" + (dialect == .oss ? hex.uppercased() : hex) + "\""
}

// MARK: ETags

@Test("ETags are upper-case hex in every OSS answer (GET, HEAD, PUT, Copy, Append, multipart, listings) and lower-case in S3's",
      arguments: [Dialect.s3, .oss])
func etagsInTheDialectsCase(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials(role: "all")
        let expected = try quotedMD5("hello etag", dialect)
        func send(_ request: Unsigned) async throws -> TestResponse { try await gateway.send(request, dialect, credentials) }

        let put = try await send(Unsigned(.put, "tollgate", "e/a.txt", body: "hello etag"))
        #expect(put.headers[.eTag] == expected)
        #expect(try await send(Unsigned(.get, "tollgate", "e/a.txt")).headers[.eTag] == expected)
        #expect(try await send(Unsigned(.head, "tollgate", "e/a.txt")).headers[.eTag] == expected)
        if dialect == .oss {
            #expect(try await send(Unsigned(.head, "tollgate", "e/a.txt", query: "objectMeta")).headers[.eTag] == expected)
            let append = try await send(Unsigned(.post, "tollgate", "e/log", query: "append&position=0", body: "x"))
            #expect(append.headers[.eTag] == append.headers[.eTag]?.uppercased() && append.headers[.eTag]?.contains(where: \.isLetter) == true)
        }
        let copy = try await send(Unsigned(.put, "tollgate", "e/copy.txt",
                                           headers: [dialect == .s3 ? "x-amz-copy-source" : "x-oss-copy-source": "/tollgate/e/a.txt"]))
        #expect(copy.headers[.eTag] == expected)
        #expect(element("ETag", in: xml(copy)) == expected.replacingOccurrences(of: "\"", with: "&quot;"))
        for query in ["prefix=e/a", "list-type=2&prefix=e/a"] {
            let listing = try await send(Unsigned(.get, "tollgate", query: query))
            #expect(elements("ETag", in: xml(listing)) == [expected.replacingOccurrences(of: "\"", with: "&quot;")], "\(xml(listing))")
        }

        // Multipart: the part, the list of parts, the object, each in the dialect's case; the part
        // list may name its parts in either case.
        let initiated = try await send(Unsigned(.post, "tollgate", "e/mp", query: "uploads"))
        let uploadID = try #require(element("UploadId", in: xml(initiated)))
        let part = try await send(Unsigned(.put, "tollgate", "e/mp", query: "partNumber=1&uploadId=\(uploadID)", body: "hello etag"))
        #expect(part.headers[.eTag] == expected)
        let parts = try await send(Unsigned(.get, "tollgate", "e/mp", query: "uploadId=\(uploadID)"))
        #expect(elements("ETag", in: xml(parts)) == [expected.replacingOccurrences(of: "\"", with: "&quot;")])
        let otherCase = dialect == .oss ? expected.lowercased() : expected.uppercased()
        let complete = try await send(Unsigned(.post, "tollgate", "e/mp", query: "uploadId=\(uploadID)",
                                               body: "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\(otherCase)</ETag></Part></CompleteMultipartUpload>"))
        #expect(complete.status == .ok, "\(xml(complete))")
        let completed = try #require(complete.headers[.eTag])
        #expect(completed.hasSuffix("-1\"") && completed == (dialect == .oss ? completed.uppercased() : completed.lowercased()))
        #expect(element("ETag", in: xml(complete)) == completed.replacingOccurrences(of: "\"", with: "&quot;"))

        // Conditions compare without case.
        let conditional = try await send(Unsigned(.get, "tollgate", "e/a.txt", headers: ["if-none-match": otherCase]))
        #expect(conditional.status == .notModified)
        #expect(conditional.headers[.eTag] == expected)
        #expect(try await send(Unsigned(.get, "tollgate", "e/a.txt", headers: ["if-match": otherCase])).status == .ok)
    }
}

@Test("UploadPartCopy answers its part's ETag in a header as well as in its body", arguments: [Dialect.s3, .oss])
func uploadPartCopyAnswersTheETagHeader(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials(role: "all")
        try await gateway.seed("tollgate", "pc/source", "copied part")
        let initiated = try await gateway.send(Unsigned(.post, "tollgate", "pc/target", query: "uploads"), dialect, credentials)
        let uploadID = try #require(element("UploadId", in: xml(initiated)))
        let copied = try await gateway.send(
            Unsigned(.put, "tollgate", "pc/target", query: "partNumber=1&uploadId=\(uploadID)",
                     headers: [dialect == .s3 ? "x-amz-copy-source" : "x-oss-copy-source": "/tollgate/pc/source"]),
            dialect, credentials)
        #expect(copied.status == .ok, "\(xml(copied))")
        let etag = try quotedMD5("copied part", dialect)
        #expect(copied.headers[.eTag] == etag)
        #expect(element("ETag", in: xml(copied)) == etag.replacingOccurrences(of: "\"", with: "&quot;"))
    }
}

// MARK: Errors without a body

@Test("an OSS error without a body carries its document in x-oss-err (base64), so SDKs read its code; S3's does not",
      arguments: [Dialect.s3, .oss])
func bodilessErrorsCarryXOSSErr(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials(role: "all")
        let cases: [(Unsigned, HTTPResponse.Status, String)] = [
            (Unsigned(.head, "tollgate", "no/such/key"), .notFound, "NoSuchKey"),
            (Unsigned(.head, "missing", "k"), .notFound, "NoSuchBucket"),
            (Unsigned(.head, "missing", "k", query: "objectMeta"), .notFound, "NoSuchBucket"),
            (Unsigned(.head, "tollgate", "no/such/key", query: "objectMeta"), .notFound, "NoSuchKey"),
        ]
        for (request, status, code) in cases {
            let response = try await gateway.send(request, dialect, credentials)
            expectError(response, dialect, status: status, code: code, head: true)
            #expect(response.headers[.contentLength] == "0")
            let header = response.headers[HTTPField.Name("x-oss-err")!]
            guard dialect == .oss else {
                #expect(header == nil)
                continue
            }
            let document = try #require(header.flatMap { Base64.decode($0) }.map { String(decoding: $0, as: UTF8.self) })
            #expect(element("Code", in: document) == code, "\(document)")
            #expect(element("RequestId", in: document) == response.headers[.ossRequestID])
            #expect(document.hasPrefix("<?xml"))
        }
        // A refused HEAD says why too (a tampered signature).
        let tampered = try await gateway.send(Unsigned(.head, "tollgate", "k"), dialect, credentials, tamper: true)
        if dialect == .oss {
            let document = try #require(tampered.headers[HTTPField.Name("x-oss-err")!].flatMap { Base64.decode($0) })
            #expect(element("Code", in: String(decoding: document, as: UTF8.self)) == "SignatureDoesNotMatch")
        }
    }
}

// MARK: Tags

@Test("an append after the first ignores its tags: neither checked nor stored, nor needing PutObjectTagging")
func laterAppendsIgnoreTags() async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        let first = try await gateway.send(Unsigned(.post, "tollgate", "tags/log", query: "append&position=0",
                                                    headers: ["x-oss-tagging": "stage=first"], body: "one"), .oss, all)
        #expect(first.status == .ok, "\(xml(first))")
        for (position, tagging) in [("3", "stage=later&bad=100%25"), ("6", (0..<12).map { "k\($0)=v" }.joined(separator: "&"))] {
            let later = try await gateway.send(Unsigned(.post, "tollgate", "tags/log", query: "append&position=\(position)",
                                                        headers: ["x-oss-tagging": tagging], body: "two"), .oss, all)
            #expect(later.status == .ok, "\(xml(later))")
        }
        let info = try await gateway.store.headObject(bucket: "tollgate", key: "tags/log")
        #expect(info.metadata.tags == ["stage": "first"])
        #expect(try await gateway.content("tollgate", "tags/log") == "onetwotwo")
        // The writer role may not tag: a first append with tags is refused, a later one is not.
        let writer = try gateway.credentials()
        expectError(try await gateway.send(Unsigned(.post, "tollgate", "tags/w", query: "append&position=0",
                                                    headers: ["x-oss-tagging": "a=b"], body: "x"), .oss, writer),
                    .oss, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.send(Unsigned(.post, "tollgate", "tags/w", query: "append&position=0", body: "x"), .oss, writer).status == .ok)
        #expect(try await gateway.send(Unsigned(.post, "tollgate", "tags/w", query: "append&position=1",
                                                headers: ["x-oss-tagging": "a=b"], body: "y"), .oss, writer).status == .ok)
        // The first append's tags are checked.
        expectError(try await gateway.send(Unsigned(.post, "tollgate", "tags/bad", query: "append&position=0",
                                                    headers: ["x-oss-tagging": "a=100%25"], body: "x"), .oss, all),
                    .oss, status: .badRequest, code: "InvalidTag")
        #expect(try await gateway.keys("tollgate").contains("tags/bad") == false)
    }
}

@Test("OSS refuses tag keys and values outside letters, digits, spaces and + - = . _ : / (InvalidTag); S3 keeps its own rules",
      arguments: [
          ("a=100%25", false), ("k%25=v", false), ("a=x%26y", false), ("a%40=b", false), ("a=b!", false), ("a=%28b%29", false),
          ("a=b%3F", false), ("a=b%0A", false), ("Project%20Name=a+b-c.d_e:f/g%3Dh", true), ("%E9%A1%B9%E7%9B%AE=%E5%80%BC1", true),
      ] as [(String, Bool)])
func ossTagCharacters(tagging: String, accepted: Bool) async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        let oss = try await gateway.send(Unsigned(.put, "tollgate", "tagged", headers: ["x-oss-tagging": tagging], body: "x"), .oss, all)
        if accepted {
            #expect(oss.status == .ok, "\(xml(oss))")
        } else {
            expectError(oss, .oss, status: .badRequest, code: "InvalidTag")
            #expect(try await gateway.keys("tollgate").contains("tagged") == false)
            // The same tag set by PutObjectTagging.
            try await gateway.seed("tollgate", "tagged", "x")
            let pair = RawQuery(tagging).items[0]
            let body = "<Tagging><TagSet><Tag><Key>\(escaped(pair.name))</Key><Value>\(escaped(pair.value))</Value></Tag></TagSet></Tagging>"
            expectError(try await gateway.send(Unsigned(.put, "tollgate", "tagged", query: "tagging", body: body), .oss, all),
                        .oss, status: .badRequest, code: "InvalidTag")
            #expect(try await gateway.store.headObject(bucket: "tollgate", key: "tagged").metadata.tags.isEmpty)
        }
        let s3 = try await gateway.send(Unsigned(.put, "tollgate", "tagged-s3", headers: ["x-amz-tagging": tagging], body: "x"), .s3, all)
        #expect(s3.status == .ok, "\(xml(s3))")
    }
}

private func escaped(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: "\n", with: "&#10;")
}

// MARK: CompleteMultipartUpload with x-oss-complete-all

@Test("x-oss-complete-all: yes completes with every uploaded part in part-number order; with a body it is InvalidArgument; S3 ignores it")
func completeAll() async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        let initiated = try await gateway.send(Unsigned(.post, "tollgate", "ca/object", query: "uploads"), .oss, all)
        let uploadID = try #require(element("UploadId", in: xml(initiated)))
        let big = String(repeating: "b", count: 100 * 1024), first = String(repeating: "a", count: 100 * 1024)
        var etags: [Int: String] = [:]
        for (number, body) in [(2, big), (1, first), (7, "tail")] {
            let part = try await gateway.send(Unsigned(.put, "tollgate", "ca/object", query: "partNumber=\(number)&uploadId=\(uploadID)", body: body), .oss, all)
            etags[number] = part.headers[.eTag]
        }
        let listed = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\(etags[1]!)</ETag></Part></CompleteMultipartUpload>"
        let both = try await gateway.send(Unsigned(.post, "tollgate", "ca/object", query: "uploadId=\(uploadID)",
                                                   headers: ["x-oss-complete-all": "yes"], body: listed), .oss, all)
        expectError(both, .oss, status: .badRequest, code: "InvalidArgument")
        #expect(element("ArgumentName", in: xml(both)) == "x-oss-complete-all")
        #expect(try await gateway.keys("tollgate").contains("ca/object") == false)
        // S3 does not know the header: its body is still required.
        expectError(try await gateway.send(Unsigned(.post, "tollgate", "ca/object", query: "uploadId=\(uploadID)",
                                                     headers: ["x-oss-complete-all": "yes"]), .s3, all),
                    .s3, status: .badRequest, code: "MalformedXML")

        let done = try await gateway.send(Unsigned(.post, "tollgate", "ca/object", query: "uploadId=\(uploadID)",
                                                   headers: ["x-oss-complete-all": "yes"]), .oss, all)
        #expect(done.status == .ok, "\(xml(done))")
        #expect(done.headers[.eTag]?.hasSuffix("-3\"") == true)
        #expect(try await gateway.content("tollgate", "ca/object") == first + big + "tail")

        // An upload without parts: nothing to complete.
        let empty = try await gateway.send(Unsigned(.post, "tollgate", "ca/empty", query: "uploads"), .oss, all)
        let emptyID = try #require(element("UploadId", in: xml(empty)))
        expectError(try await gateway.send(Unsigned(.post, "tollgate", "ca/empty", query: "uploadId=\(emptyID)",
                                                     headers: ["x-oss-complete-all": "yes"]), .oss, all),
                    .oss, status: .badRequest, code: "InvalidArgument")
    }
}

// MARK: DeleteObjects with encoding-type=url

@Test("DeleteObjects with encoding-type=url encodes the keys of its answer (control characters too) and says so", arguments: [Dialect.s3, .oss])
func deleteObjectsEncodesKeys(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        let keys = ["ctl/a\u{01}b", "ctl/line\nbreak", "ctl/amp & ✓"]
        for key in keys { try await gateway.seed("tollgate", key, "x") }
        let body = "<Delete><Quiet>false</Quiet>" + keys.map { "<Object><Key>\(escaped($0))</Key></Object>" }.joined() + "</Delete>"
        let response = try await gateway.send(Unsigned(.post, "tollgate", query: "delete&encoding-type=url",
                                                       headers: ["content-md5": try contentMD5(body)], body: body), dialect, all)
        #expect(response.status == .ok, "\(xml(response))")
        #expect(element("EncodingType", in: xml(response)) == "url")
        #expect(elements("Key", in: xml(response)).sorted() == keys.map { PercentEncoding.encode($0, keepSlash: true) }.sorted())
        #expect(try await gateway.keys("tollgate").filter { $0.hasPrefix("ctl/") }.isEmpty)
        // Without it, keys as they are (XML-escaped).
        try await gateway.seed("tollgate", "ctl/plain key", "x")
        let plainBody = "<Delete><Object><Key>ctl/plain key</Key></Object></Delete>"
        let plain = try await gateway.send(Unsigned(.post, "tollgate", query: "delete", headers: ["content-md5": try contentMD5(plainBody)], body: plainBody),
                                           dialect, all)
        #expect(elements("Key", in: xml(plain)) == ["ctl/plain key"])
        #expect(element("EncodingType", in: xml(plain)) == nil)
    }
}

// MARK: Bucket info, stat, CORS

@Test("GetBucketInfo has an empty Comment; GetBucketStat every storage class's counters, zero but Standard's")
func bucketInfoAndStat() async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        try await gateway.seed("tollgate", "stat/a", "12345")
        let info = try await gateway.send(Unsigned(.get, "tollgate", query: "bucketInfo"), .oss, all)
        #expect(element("Comment", in: xml(info)) == "", "\(xml(info))")
        let stat = xml(try await gateway.send(Unsigned(.get, "tollgate", query: "stat"), .oss, all))
        #expect(element("StandardStorage", in: stat) == "5" && element("StandardObjectCount", in: stat) == "1", "\(stat)")
        for storageClass in ["InfrequentAccess", "Archive", "ColdArchive", "DeepColdArchive"] {
            for counter in ["Storage", "RealStorage", "ObjectCount"] {
                #expect(element(storageClass + counter, in: stat) == "0", "\(storageClass + counter): \(stat)")
            }
        }
        #expect(element("DeleteMarkerCount", in: stat) == "0")
    }
}

@Test("OSS's GetBucketCors always states ResponseVary (false unless set)")
func corsResponseVaryIsAlwaysStated() async throws {
    try await withSignedGateway { gateway in
        let cors = try gateway.credentials(role: "cors")
        let body = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>"
        for dialect in [Dialect.s3, .oss] {
            #expect(try await gateway.send(Unsigned(.put, "tollgate", query: "cors", body: body), dialect, cors).status == .ok)
            let got = xml(try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, cors))
            #expect(element("ResponseVary", in: got) == (dialect == .oss ? "false" : nil), "\(got)")
        }
    }
}

// MARK: S3 ListObjects (v1) encoding

@Test("ListObjects v1 with encoding-type=url: S3 leaves Prefix as given (botocore does not decode it), OSS encodes it; both encode the rest",
      arguments: [Dialect.s3, .oss])
func listV1PrefixEncoding(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let all = try gateway.credentials(role: "all")
        try await gateway.seed("tollgate", "\nline/a b", "x")
        try await gateway.seed("tollgate", "\nline/c\nd/e", "x")
        let v1 = xml(try await gateway.send(Unsigned(.get, "tollgate", query: "prefix=%0Aline%2F&delimiter=%0A&marker=%0Aline%2F0&encoding-type=url"),
                                            dialect, all))
        #expect(element("Prefix", in: v1) == (dialect == .s3 ? "&#10;line/" : "%0Aline/"), "\(v1)")
        #expect(element("Marker", in: v1) == "%0Aline/0")
        #expect(element("Delimiter", in: v1) == "%0A")
        #expect(elements("Key", in: v1) == ["%0Aline/a%20b"])
        #expect(elements("Prefix", in: v1).dropFirst() == ["%0Aline/c%0A"])
        let v2 = xml(try await gateway.send(Unsigned(.get, "tollgate", query: "list-type=2&prefix=%0Aline%2F&encoding-type=url"), dialect, all))
        #expect(element("Prefix", in: v2) == "%0Aline/")
    }
}

// MARK: Signature V2

/// OSS V2 as oss2's ProviderAuthV2 signs (Date, x-oss-* headers, the security token), the
/// string from `OSSSignature.stringToSignV2`.
private func signOSSV2(_ request: Unsigned, _ credentials: IssuedCredentials, additional: [String] = []) throws -> HTTPFields {
    var signed: SignatureHeaders = ["host": "localhost", "date": signedGatewayHTTPDate, "x-oss-security-token": credentials.securityToken]
    for (name, value) in request.headers { signed.add(name: name, value: value) }
    let stringToSign = OSSSignature.stringToSignV2(method: request.method.rawValue, headers: signed, date: signedGatewayHTTPDate,
                                                   additionalHeaders: additional, bucket: request.bucket, key: request.key,
                                                   query: RawQuery(request.query), presigned: false)
    let signature = Base64.encode(try Crypto.hmacSHA256(key: Array(credentials.accessKeySecret.utf8), data: Array(stringToSign.utf8)))
    let additionalField = additional.isEmpty ? "" : "AdditionalHeaders:\(additional.joined(separator: ";")),"
    return fields(signed, authorization: "OSS2 AccessKeyId:\(credentials.accessKeyId),\(additionalField)Signature:\(signature)")
}

@Test("OSS V2 through the gateway: authorized by the token's policy, answered in OSS; every query parameter signed")
func signatureV2ThroughTheGateway() async throws {
    try await withSignedGateway { gateway in
        let writer = try gateway.credentials()
        let put = Unsigned(.put, "tollgate", "v2/a b.txt", headers: ["content-type": "text/plain", "x-oss-meta-a": "1"], body: "signed v2")
        let stored = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt", method: .put, headers: try signOSSV2(put, writer),
                                                      body: ByteBuffer(string: "signed v2"))
        #expect(stored.status == .ok, "\(xml(stored))")
        let etag = try quotedMD5("signed v2", .s3)
        #expect(stored.headers[.ossRequestID] != nil)
        #expect(stored.headers[.eTag]?.lowercased() == etag)
        #expect(try await gateway.content("tollgate", "v2/a b.txt") == "signed v2")

        let get = Unsigned(.get, "tollgate", "v2/a b.txt", query: "response-content-type=text/csv", headers: ["range": "bytes=0-5"])
        let got = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt?response-content-type=text/csv", method: .get,
                                                   headers: try signOSSV2(get, writer, additional: ["range"]))
        #expect(got.status == .partialContent && String(buffer: got.body) == "signed" && got.headers[.contentType] == "text/csv")
        // A parameter added after signing, whatever it is, breaks the signature.
        let added = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt?response-content-type=text/csv&prefix=x", method: .get,
                                                     headers: try signOSSV2(get, writer, additional: ["range"]))
        expectError(added, .oss, status: .forbidden, code: "SignatureDoesNotMatch")
        // The policy decides as for any other signature: the writer may not delete outside tmp/.
        let delete = Unsigned(.delete, "tollgate", "v2/a%20b.txt")
        let refused = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt", method: .delete, headers: try signOSSV2(
            Unsigned(.delete, "tollgate", "v2/a b.txt"), writer))
        expectError(refused, .oss, status: .forbidden, code: "AccessDenied")
        _ = delete
        #expect(try await gateway.keys("tollgate").contains("v2/a b.txt"))
    }
}

@Test("an OSS scheme the gateway does not know is refused in OSS's words, not told to use AWS4")
func unknownOSSSchemeSpeaksOSS() async throws {
    try await withSignedGateway { gateway in
        let response = try await gateway.client.execute(uri: "/tollgate/k", method: .get,
                                                        headers: [.authorization: "OSS3 AccessKeyId:a,Signature:b", .date: signedGatewayHTTPDate])
        expectError(response, .oss, status: .badRequest, code: "InvalidArgument")
        #expect(!xml(response).contains("AWS4"), "\(xml(response))")
    }
}
