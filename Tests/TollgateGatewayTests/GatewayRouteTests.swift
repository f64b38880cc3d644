import Foundation
import Testing
@testable import TollgateGateway
import TollgatePolicy
import TollgateSignature
import TollgateStore
@testable import TollgateTokenService

struct RouteCase: Sendable, CustomStringConvertible {
    let method: String
    let bucket: String?
    let key: String?
    let query: [String: String]
    var copySource: String? = nil
    let operation: GatewayOperation
    var description: String { "\(method) \(bucket ?? "-")/\(key ?? "-") \(query.keys.sorted())" }
}

let routeCases: [RouteCase] = [
    RouteCase(method: "GET", bucket: nil, key: nil, query: [:], operation: .listBuckets),
    RouteCase(method: "PUT", bucket: "b", key: nil, query: [:], operation: .createBucket),
    RouteCase(method: "HEAD", bucket: "b", key: nil, query: [:], operation: .headBucket),
    RouteCase(method: "DELETE", bucket: "b", key: nil, query: [:], operation: .deleteBucket),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["location": ""], operation: .getBucketLocation),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["bucketInfo": ""], operation: .getBucketInfo),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["stat": ""], operation: .getBucketStat),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["versions": ""], operation: .listObjectVersions),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["versioning": ""], operation: .getBucketVersioning),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["acl": ""], operation: .getBucketAcl),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["lifecycle": ""], operation: .getBucketLifecycle),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["policy": ""], operation: .getBucketPolicy),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["encryption": ""], operation: .getBucketEncryption),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["cors": ""], operation: .getBucketCors),
    RouteCase(method: "PUT", bucket: "b", key: nil, query: ["cors": ""], operation: .putBucketCors),
    RouteCase(method: "DELETE", bucket: "b", key: nil, query: ["cors": ""], operation: .deleteBucketCors),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["tagging": ""], operation: .getBucketTagging),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["website": ""], operation: .getBucketWebsite),
    RouteCase(method: "GET", bucket: "b", key: "k", query: ["acl": ""], operation: .getObjectAcl),
    RouteCase(method: "GET", bucket: "b", key: "k", query: ["tagging": ""], operation: .getObjectTagging),
    RouteCase(method: "PUT", bucket: "b", key: "k", query: ["tagging": ""], operation: .putObjectTagging),
    RouteCase(method: "DELETE", bucket: "b", key: "k", query: ["tagging": ""], operation: .deleteObjectTagging),
    RouteCase(method: "GET", bucket: "b", key: nil, query: [:], operation: .listObjects),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["list-type": "2"], operation: .listObjectsV2),
    RouteCase(method: "GET", bucket: "b", key: nil, query: ["uploads": ""], operation: .listMultipartUploads),
    RouteCase(method: "POST", bucket: "b", key: nil, query: ["delete": ""], operation: .deleteObjects),
    RouteCase(method: "GET", bucket: "b", key: "k", query: [:], operation: .getObject),
    RouteCase(method: "HEAD", bucket: "b", key: "k", query: [:], operation: .headObject),
    RouteCase(method: "GET", bucket: "b", key: "k", query: ["objectMeta": ""], operation: .getObjectMeta),
    RouteCase(method: "HEAD", bucket: "b", key: "k", query: ["objectMeta": ""], operation: .getObjectMeta),
    RouteCase(method: "PUT", bucket: "b", key: "k", query: [:], operation: .putObject),
    RouteCase(method: "PUT", bucket: "b", key: "k", query: [:], copySource: "/s/k", operation: .copyObject),
    RouteCase(method: "POST", bucket: "b", key: "k", query: ["append": "", "position": "0"], operation: .appendObject),
    RouteCase(method: "DELETE", bucket: "b", key: "k", query: [:], operation: .deleteObject),
    RouteCase(method: "POST", bucket: "b", key: "k", query: ["uploads": ""], operation: .createMultipartUpload),
    RouteCase(method: "PUT", bucket: "b", key: "k", query: ["uploadId": "u", "partNumber": "1"], operation: .uploadPart),
    RouteCase(method: "PUT", bucket: "b", key: "k", query: ["uploadId": "u", "partNumber": "1"], copySource: "s/k", operation: .uploadPartCopy),
    RouteCase(method: "POST", bucket: "b", key: "k", query: ["uploadId": "u"], operation: .completeMultipartUpload),
    RouteCase(method: "DELETE", bucket: "b", key: "k", query: ["uploadId": "u"], operation: .abortMultipartUpload),
    RouteCase(method: "GET", bucket: "b", key: "k", query: ["uploadId": "u"], operation: .listParts),
]

@Test("every gateway operation is routed", arguments: routeCases)
func routes(testCase: RouteCase) throws {
    let route = try GatewayRoute.route(method: testCase.method, bucket: testCase.bucket, key: testCase.key,
                                       query: testCase.query, copySource: testCase.copySource)
    #expect(route.operation == testCase.operation)
    #expect(route.bucket == testCase.bucket)
    #expect(route.key == testCase.key)
}

@Test func everyPolicyOperationHasARoute() {
    let routed = Set(routeCases.map(\.operation))
    #expect(routed == Set(GatewayOperation.allCases))
}

@Test("refused routes", arguments: [
    ("POST", "b", nil as String?, [:] as [String: String], "MethodNotAllowed"),
    ("PATCH", "b", "k", [:], "MethodNotAllowed"),
    ("PUT", nil, nil, [:], "MethodNotAllowed"),
    ("PUT", "b", "k" as String?, ["acl": ""] as [String: String], "NotImplemented"),
    ("PUT", "b", nil as String?, ["acl": ""] as [String: String], "NotImplemented"),
    ("PUT", "b", nil as String?, ["versioning": ""] as [String: String], "NotImplemented"),
    ("DELETE", "b", nil as String?, ["policy": ""] as [String: String], "NotImplemented"),
    ("POST", "b", "k" as String?, ["tagging": ""] as [String: String], "NotImplemented"),
    ("PUT", "b", nil, ["versioning": ""], "NotImplemented"),
    ("POST", "b", nil as String?, ["cors": ""] as [String: String], "NotImplemented"),
    ("PUT", "b", "k" as String?, ["cors": ""] as [String: String], "NotImplemented"),
    ("GET", "b", nil, ["list-type": "3"], "InvalidArgument"),
    ("PUT", "b", "k", ["uploadId": "u"], "InvalidArgument"),
])
func refusedRoutes(method: String, bucket: String?, key: String?, query: [String: String], code: String) {
    #expect {
        _ = try GatewayRoute.route(method: method, bucket: bucket, key: key, query: query, copySource: nil)
    } throws: { error in
        (error as? GatewayError)?.code == code
    }
}

@Test("addressing keeps keys exactly, traversal included", arguments: [
    ("/", nil as String?, nil as String?),
    ("/bucket", "bucket", nil),
    ("/bucket/", "bucket", nil),
    ("/bucket/a/b/c.txt", "bucket", "a/b/c.txt"),
    ("/bucket/a%20b+c", "bucket", "a b+c"),
    ("/bucket/..%2F..%2Fetc%2Fpasswd", "bucket", "../../etc/passwd"),
    ("/bucket/%2e%2e/%2e%2e/x", "bucket", "../../x"),
    ("/bucket//abs", "bucket", "/abs"),
    ("/bucket/%E4%BD%A0%E5%A5%BD", "bucket", "你好"),
    ("/bucket/100%25", "bucket", "100%"),
])
func pathStyle(rawPath: String, bucket: String?, key: String?) throws {
    let address = try Gateway.address(host: "127.0.0.1:9000", rawPath: rawPath, baseDomain: nil)
    #expect(address.bucket == bucket)
    #expect(address.key == key)
}

@Test func virtualHostStyle() throws {
    let virtual = try Gateway.address(host: "photos.s3.example.test:9000", rawPath: "/a/b.jpg", baseDomain: "s3.example.test")
    #expect(virtual.bucket == "photos")
    #expect(virtual.key == "a/b.jpg")
    let path = try Gateway.address(host: "s3.example.test", rawPath: "/photos/a/b.jpg", baseDomain: "s3.example.test")
    #expect(path.bucket == "photos")
    #expect(path.key == "a/b.jpg")
}

@Test func invalidUTF8KeyIsRefused() throws {
    #expect(throws: GatewayError.self) { try Gateway.address(host: nil, rawPath: "/bucket/%FF%FE", baseDomain: nil) }
}

@Test("copy sources", arguments: [
    ("bucket/key", "bucket", "key"),
    ("/bucket/a/b%20c", "bucket", "a/b c"),
    ("bucket/key?versionId=3", "bucket", "key"),
])
func copySource(value: String, bucket: String, key: String) throws {
    let parsed = try Gateway.parseCopySource(value)
    #expect(parsed.bucket == bucket)
    #expect(parsed.key == key)
}

@Test("bad copy sources", arguments: ["bucket", "/bucket/", "/key-only", ""])
func badCopySource(value: String) {
    #expect(throws: GatewayError.self) { try Gateway.parseCopySource(value) }
}

@Test("conditional headers take an HTTP date (any of its three forms) or ISO 8601")
func conditionDates() throws {
    let date = Date(timeIntervalSince1970: 784_111_777)
    #expect(Gateway.conditionDate("Sun, 06 Nov 1994 08:49:37 GMT") == date)
    #expect(Gateway.conditionDate("Sunday, 06-Nov-94 08:49:37 GMT") == date)
    #expect(Gateway.conditionDate("Sun Nov  6 08:49:37 1994") == date)
    #expect(Gateway.conditionDate("1994-11-06T08:49:37Z") == date)
    #expect(Gateway.conditionDate("yesterday") == nil)
    #expect(Gateway.conditionDate("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
}

@Test func listingEncodingEscapesEverythingButUnreservedAndSlash() {
    #expect(Gateway.urlEncodeForListing("a b+c/d%e~f") == "a%20b%2Bc/d%25e~f")
}

@Test func requestIDsAreUniqueSixteenUpperHexDigits() {
    let ids = (0..<10_000).map { _ in RequestID.next() }
    #expect(Set(ids).count == ids.count)
    #expect(ids.allSatisfy { $0.utf8.count == 16 && $0.utf8.allSatisfy { (48...57).contains($0) || (65...70).contains($0) } })
}

/// A signature that covers only some query parameters must cover every one that selects the
/// operation (S3 SigV2 and OSS V1 sign their sub-resource lists; SigV4 and OSS V2 sign the whole query).
private let coverageCases: [(SignatureScheme, String, String?, [String: String], Bool)] = [
    (.s3SigV2Query, "GET", "k", ["objectMeta": ""], true),
    (.s3SigV2Query, "GET", nil, ["stat": ""], true),
    (.s3SigV2Header, "GET", nil, ["bucketInfo": ""], true),
    (.s3SigV2Query, "GET", nil, ["list-type": "2", "prefix": "a", "max-keys": "3"], false),
    (.s3SigV2Query, "GET", "k", ["uploadId": "u"], false),  // signed by SigV2: the signature checks it
    (.s3SigV2Query, "GET", "k", ["AWSAccessKeyId": "AK", "Signature": "s", "Expires": "1", "x-amz-security-token": "t"], false),
    (.s3SigV2Query, "GET", nil, ["encryption": ""], true),
    (.ossV1Query, "GET", nil, ["uploads": "", "encryption-type": "x"], false),  // OSS V1 signs every parameter that routes
    (.ossV1Query, "GET", "k", ["objectMeta": ""], false),  // signed by OSS V1
    (.ossV1Header, "POST", "k", ["append": "", "position": "0"], false),
    (.s3SigV4Query, "GET", nil, ["stat": ""], false),  // SigV4 signs every parameter
    (.ossV4Header, "GET", "k", ["objectMeta": ""], false),
    (.ossV2Query, "GET", "k", ["objectMeta": ""], false),  // OSS V2 signs every parameter
    (.ossV2Header, "GET", nil, ["stat": "", "prefix": "a"], false),
]

@Test("an unsigned parameter that changes the operation is refused", arguments: coverageCases)
func unsignedOperationParameters(scheme: SignatureScheme, method: String, key: String?, query: [String: String], refused: Bool) throws {
    let route = try GatewayRoute.route(method: method, bucket: "b", key: key, query: query, copySource: nil)
    var error: GatewayError?
    do {
        try Gateway.checkCoverage(route, scheme: scheme, method: method, bucket: "b", key: key, query: query, copySource: nil)
    } catch let refusal {
        error = refusal
    }
    if !refused {
        #expect(error == nil)
    } else {
        #expect(error?.code == "AccessDenied")
        #expect(error?.message.contains(query.keys.first { $0 != "list-type" } ?? "") == true)
    }
}
