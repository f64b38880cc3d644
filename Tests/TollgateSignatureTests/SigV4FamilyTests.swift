import Testing
import TollgateCrypto
@testable import TollgateSignature

/// The pieces S3 SigV4 and OSS V4 share: the Authorization field parser, the credential parser
/// and the signing key.
@Suite("SigV4 family core")
struct SigV4FamilyTests {
    static let fields: [(String, [String: String]?)] = [
        ("Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
         ["Credential": "AK/20130524/us-east-1/s3/aws4_request", "SignedHeaders": "host;x-amz-date", "Signature": "abc"]),
        ("Credential=a,SignedHeaders=host,Signature=b", ["Credential": "a", "SignedHeaders": "host", "Signature": "b"]),
        ("Credential=a, Signature=b, AdditionalHeaders=host", ["Credential": "a", "Signature": "b", "AdditionalHeaders": "host"]),
        ("  Credential=a ,\tSignature=b\t", ["Credential": "a", "Signature": "b"]),
        ("Credential=a,, Signature=b", ["Credential": "a", "Signature": "b"]),
        ("Credential=a=b", ["Credential": "a=b"]),
        ("Credential=", ["Credential": ""]),
        ("", [:]),
        ("Credential=a, Credential=a", nil),
        ("Credential=a, Signature=b, Signature=b", nil),
        ("Credential=a, Signature", nil),
        ("Credential a", nil),
    ]

    @Test("Authorization fields: one parser, duplicates and bare names refused", arguments: fields.indices)
    func authorizationFields(_ index: Int) {
        let (text, expected) = Self.fields[index]
        #expect(SigV4Flavor.parseAuthorizationFields(text[...]) == expected, "\(text)")
    }

    static let credentials: [(SigV4Flavor, String, SigV4Credential?)] = [
        (.aws, "AK/20130524/us-east-1/s3/aws4_request",
         SigV4Credential(accessKeyId: "AK", date: "20130524", region: "us-east-1", service: "s3", scope: "20130524/us-east-1/s3/aws4_request")),
        (.aws, "STS.a/b/20130524/us-east-1/sts/aws4_request",
         SigV4Credential(accessKeyId: "STS.a/b", date: "20130524", region: "us-east-1", service: "sts", scope: "20130524/us-east-1/sts/aws4_request")),
        (.oss, "AK/20130524/cn-hangzhou/oss/aliyun_v4_request",
         SigV4Credential(accessKeyId: "AK", date: "20130524", region: "cn-hangzhou", service: "oss", scope: "20130524/cn-hangzhou/oss/aliyun_v4_request")),
        (.aws, "AK/20130524//s3/aws4_request",
         SigV4Credential(accessKeyId: "AK", date: "20130524", region: "", service: "s3", scope: "20130524//s3/aws4_request")),
        (.aws, "AK/20130524/us-east-1/s3/aliyun_v4_request", nil),
        (.oss, "AK/20130524/cn-hangzhou/oss/aws4_request", nil),
        (.aws, "/20130524/us-east-1/s3/aws4_request", nil),
        (.aws, "AK/2013052/us-east-1/s3/aws4_request", nil),
        (.aws, "AK/2013052x/us-east-1/s3/aws4_request", nil),
        (.aws, "20130524/us-east-1/s3/aws4_request", nil),
        (.aws, "", nil),
        (.aws, "/", nil),
        (.aws, "AK/us-east-1/s3/aws4_request", nil),
        (.aws, "AK/20130524/us-east-1/s3/", nil),
        (.aws, "////", nil),
        (.aws, "/////", nil),
        (.aws, "AK/20130524/us-east-1/s3/aws4_request/", nil),
    ]

    @Test("credentials: four fixed parts from the end, the flavor's terminator", arguments: credentials.indices)
    func credential(_ index: Int) {
        let (flavor, text, expected) = Self.credentials[index]
        #expect(flavor.parseCredential(text) == expected, "\(text)")
    }

    @Test("signing keys: AWS's published derivation; flavors never share a cached key")
    func signingKeys() throws {
        // docs.aws.amazon.com, "Examples of how to derive a signing key for Signature Version 4".
        let aws = try SigV4Flavor.aws.deriveSigningKey(secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", date: "20120215",
                                                       region: "us-east-1", service: "iam")
        #expect(Hex.encode(aws) == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d")
        for flavor in [SigV4Flavor.aws, .oss] {
            let cached = try flavor.signingKey(secret: "s", date: "20260314", region: "r", service: "x")
            #expect(cached.bytes == (try flavor.deriveSigningKey(secret: "s", date: "20260314", region: "r", service: "x")))
        }
        let awsKey = try SigV4Flavor.aws.signingKey(secret: "s", date: "20260314", region: "r", service: "x")
        let ossKey = try SigV4Flavor.oss.signingKey(secret: "s", date: "20260314", region: "r", service: "x")
        #expect(awsKey.bytes != ossKey.bytes)
    }

    @Test("a field sent twice is refused by S3 (AuthorizationHeaderMalformed) and OSS V4 (InvalidArgument) alike")
    func duplicateFields() throws {
        let s3 = try #require(generatedS3Vectors.first { $0.headers.contains { $0.0 == "Authorization" } })
        _ = try S3SigV4.verify(s3.request(), lookup: s3.lookup())
        var twice = s3
        twice.headers = s3.headers.replacing("Authorization") { $0 + ", Signature=" + $0.components(separatedBy: "Signature=")[1] }
        #expect(s3Error { () throws(S3AuthError) in try S3SigV4.verify(twice.request(), lookup: s3.lookup()) }?.code == "AuthorizationHeaderMalformed")

        let oss = try #require(generatedOSSVectors.first { $0.version == .v4 && !$0.presigned })
        _ = try OSSSignature.verify(oss.request(), bucket: oss.bucket, key: oss.key, lookup: oss.lookup())
        var ossTwice = oss
        ossTwice.headers = oss.headers.replacing("Authorization") { $0 + ", Signature=" + $0.components(separatedBy: "Signature=")[1] }
        let error = ossError { () throws(OSSAuthError) in
            try OSSSignature.verify(ossTwice.request(), bucket: oss.bucket, key: oss.key, lookup: oss.lookup())
        }
        #expect(error?.code == "InvalidArgument")
    }

    /// Both dialects write the same header block, each with its own trimming rule.
    static let headerValues: [(sent: [String], s3: String, oss: String)] = [
        (["plain"], "plain", "plain"),
        (["  a  b\t "], "a b", "a  b"),
        (["\ta\t\tb"], "a b", "a\t\tb"),
        (["one ", " two"], "one,two", "one,two"),
        (["", "x"], ",x", ",x"),
    ]

    @Test("canonical header lines: values joined by commas; S3 trims and collapses whitespace, OSS V4 trims the ends only",
          arguments: headerValues.indices)
    func canonicalHeaderValues(_ index: Int) {
        let row = Self.headerValues[index]
        var headers: SignatureHeaders = ["Host": "h"]
        for value in row.sent { headers.add(name: "X-Oss-Meta-A", value: value) }
        func line(_ canonical: String) -> String? {
            canonical.split(separator: "\n", omittingEmptySubsequences: false).first { $0.hasPrefix("x-oss-meta-a:") }.map(String.init)
        }
        let s3 = S3SigV4.canonicalRequest(method: "GET", rawPath: "/", rawQuery: "", headers: headers,
                                          signedHeaders: ["host", "x-oss-meta-a"], payloadHash: "UNSIGNED-PAYLOAD", presigned: false)
        let oss = OSSSignature.canonicalRequestV4(method: "GET", bucket: "b", key: "k", rawQuery: "", headers: headers,
                                                  additionalHeaders: [], presigned: false)
        #expect(line(s3) == "x-oss-meta-a:" + row.s3)
        #expect(line(oss) == "x-oss-meta-a:" + row.oss)
    }
}
