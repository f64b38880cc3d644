import Foundation
import Testing
@testable import TollgatePolicy

/// The repository root, found from this file's path (Tests/TollgatePolicyTests/…).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

func shippedPolicy(_ name: String, variables: [String: String] = ["BUCKET_NAME": "photos"]) throws -> Policy {
    let url = repositoryRoot.appendingPathComponent("policy").appendingPathComponent(name)
    return try Policy.load(text: String(contentsOf: url, encoding: .utf8), file: "policy/\(name)", variables: variables)
}

struct RefCase: CustomTestStringConvertible, Sendable {
    var file: String
    var operation: GatewayOperation
    var bucket: String?
    var key: String?
    var context: [String: String]
    var allowed: Bool
    init(_ file: String, _ operation: GatewayOperation, _ bucket: String?, _ key: String?, _ allowed: Bool, _ context: [String: String] = [:]) {
        self.file = file
        self.operation = operation
        self.bucket = bucket
        self.key = key
        self.context = context
        self.allowed = allowed
    }
    var testDescription: String { "\(file): \(operation) \(bucket ?? "-")/\(key ?? "-") \(context) → \(allowed ? "allow" : "refuse")" }
}

let read = "bucket_read_policy.txt", readWrite = "bucket_read_write_policy.txt", isolated = "user_isolated_policy.txt"

let referenceCases: [RefCase] = GatewayOperation.allCases.map { op in
    // all_policy allows every operation on every bucket.
    RefCase("all_policy.txt", op, op.resourceLevel == .service ? nil : "any-bucket", op.resourceLevel == .object ? "a/b" : nil, true)
} + [
    RefCase(read, .getObject, "photos", "a.jpg", true),
    RefCase(read, .headObject, "photos", "a.jpg", true),
    RefCase(read, .getObjectMeta, "photos", "dir/a.jpg", true),
    RefCase(read, .listObjects, "photos", nil, true),
    RefCase(read, .listObjectsV2, "photos", nil, true),
    RefCase(read, .getObject, "other", "a.jpg", false),
    RefCase(read, .listObjects, "other", nil, false),
    RefCase(read, .putObject, "photos", "a.jpg", false),
    RefCase(read, .appendObject, "photos", "a.jpg", false),
    RefCase(read, .deleteObject, "photos", "a.jpg", false),
    RefCase(read, .createMultipartUpload, "photos", "a.jpg", false),
    RefCase(read, .listBuckets, nil, nil, false),
    RefCase(read, .createBucket, "photos", nil, false),
    RefCase(read, .deleteBucket, "photos", nil, false),
    RefCase(read, .headBucket, "photos", nil, true),
    RefCase(read, .getBucketInfo, "photos", nil, false),
    RefCase(readWrite, .getObject, "photos", "a.jpg", true),
    RefCase(readWrite, .putObject, "photos", "a.jpg", true),
    RefCase(readWrite, .appendObject, "photos", "log.txt", true),
    RefCase(readWrite, .deleteObject, "photos", "a.jpg", true),
    RefCase(readWrite, .deleteObjects, "photos", "a.jpg", true),
    RefCase(readWrite, .createMultipartUpload, "photos", "big.bin", true),
    RefCase(readWrite, .uploadPart, "photos", "big.bin", true),
    RefCase(readWrite, .completeMultipartUpload, "photos", "big.bin", true),
    RefCase(readWrite, .abortMultipartUpload, "photos", "big.bin", true),
    RefCase(readWrite, .listParts, "photos", "big.bin", true),
    RefCase(readWrite, .listObjectsV2, "photos", nil, true),
    RefCase(readWrite, .listMultipartUploads, "photos", nil, false),
    RefCase(readWrite, .putObject, "other", "a.jpg", false),
    RefCase(readWrite, .deleteBucket, "photos", nil, false),
    RefCase(readWrite, .createBucket, "photos", nil, false),
    RefCase(readWrite, .listBuckets, nil, nil, false),
    RefCase(readWrite, .getBucketLocation, "photos", nil, false),
    RefCase(isolated, .getObject, "photos", "alice/a.jpg", true, ["aws:username": "alice"]),
    RefCase(isolated, .putObject, "photos", "alice/dir/a.jpg", true, ["aws:username": "alice"]),
    RefCase(isolated, .uploadPart, "photos", "alice/big.bin", true, ["aws:username": "alice"]),
    RefCase(isolated, .deleteObject, "photos", "alice/a.jpg", true, ["aws:username": "alice"]),
    RefCase(isolated, .listObjects, "photos", nil, true, ["aws:username": "alice", "oss:Prefix": "alice/"]),
    RefCase(isolated, .listObjectsV2, "photos", nil, true, ["aws:username": "alice", "s3:prefix": "alice/2026/"]),
    RefCase(isolated, .listMultipartUploads, "photos", nil, true, ["aws:username": "alice", "s3:prefix": "alice/"]),
    RefCase(isolated, .getObject, "photos", "bob/a.jpg", false, ["aws:username": "alice"]),
    RefCase(isolated, .putObject, "photos", "bob/a.jpg", false, ["aws:username": "alice"]),
    RefCase(isolated, .putObject, "photos", "alice", false, ["aws:username": "alice"]),
    RefCase(isolated, .putObject, "photos", "alicex/a.jpg", false, ["aws:username": "alice"]),
    RefCase(isolated, .getObject, "other", "alice/a.jpg", false, ["aws:username": "alice"]),
    RefCase(isolated, .listObjects, "photos", nil, false, ["aws:username": "alice", "oss:Prefix": "bob/"]),
    RefCase(isolated, .listObjects, "photos", nil, false, ["aws:username": "alice", "oss:Prefix": "alice"]),
    RefCase(isolated, .listObjects, "photos", nil, false, ["aws:username": "alice", "oss:Prefix": ""]),
    RefCase(isolated, .listObjects, "photos", nil, false, ["aws:username": "alice"]),
    RefCase(isolated, .getObject, "photos", "alice/a.jpg", false),
    RefCase(isolated, .listObjects, "photos", nil, false, ["oss:Prefix": "/"]),
    RefCase(isolated, .getObject, "photos", "bob/a.jpg", false, ["aws:username": "*"]),
    RefCase(isolated, .listObjects, "photos", nil, false, ["aws:username": "*", "oss:Prefix": "bob/"]),
    RefCase(isolated, .deleteBucket, "photos", nil, false, ["aws:username": "alice"]),
]

@Suite("Shipped reference policies")
struct ReferencePolicyTests {
    @Test("must allow / must refuse", arguments: referenceCases)
    func reference(_ c: RefCase) throws {
        let policy = try shippedPolicy(c.file)
        let d = policy.evaluate(c.operation, bucket: c.bucket, key: c.key, context: PolicyContext(c.context))
        #expect(d.isAllowed == c.allowed, "\(d)")
    }

    @Test(arguments: ["bucket_read_policy.txt", "bucket_read_write_policy.txt", "user_isolated_policy.txt"])
    func placeholderLeftUnfilledIsALoadError(_ file: String) throws {
        let error = try #require(throws: PolicyLoadError.self) { try shippedPolicy(file, variables: [:]) }
        #expect(!error.diagnostics.isEmpty)
        #expect(error.diagnostics.allSatisfy { $0.file == "policy/\(file)" && $0.message.contains("$BUCKET_NAME") })
        #expect(error.diagnostics.first?.line == (file == "user_isolated_policy.txt" ? 13 : file == read ? 9 : 13))
    }

    @Test func referenceFilesAreTheSampleShape() throws {
        let all = try String(contentsOf: repositoryRoot.appendingPathComponent("policy/all_policy.txt"), encoding: .utf8)
        let compact = all.filter { !$0.isWhitespace }
        #expect(compact == #"{"Statement":[{"Action":["oss:*"],"Effect":"Allow","Resource":["acs:oss:*:*:*"]}],"Version":"1"}"#)
    }
}

// MARK: - AWS's documented examples

/// IAM User Guide: "Allows IAM users to access their own home directory in Amazon S3".
let awsHomeDirectory = #"""
{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Sid": "AllowRootAndHomeListingOfCompanyBucket",
      "Action": ["s3:ListBucket"],
      "Effect": "Allow",
      "Resource": ["arn:aws:s3:::my-company"],
      "Condition": {"StringEquals": {"s3:prefix": ["", "home/", "home/${aws:username}"], "s3:delimiter": ["/"]}}
    },
    {
      "Sid": "AllowListingOfUserFolder",
      "Action": ["s3:ListBucket"],
      "Effect": "Allow",
      "Resource": ["arn:aws:s3:::my-company"],
      "Condition": {"StringLike": {"s3:prefix": ["home/${aws:username}/*"]}}
    },
    {
      "Sid": "AllowAllS3ActionsInUserFolder",
      "Effect": "Allow",
      "Action": ["s3:*"],
      "Resource": ["arn:aws:s3:::my-company/home/${aws:username}/*"]
    }
  ]
}
"""#

/// S3 User Guide: deny any request that is not sent over HTTPS.
let awsSecureTransport = #"""
{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": "s3:*", "Resource": ["arn:aws:s3:::b", "arn:aws:s3:::b/*"]},
    {"Sid": "AllowSSLRequestsOnly", "Effect": "Deny", "Action": "s3:*",
     "Resource": ["arn:aws:s3:::b", "arn:aws:s3:::b/*"],
     "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
  ]
}
"""#

/// IAM User Guide: "Denies access to AWS based on the source IP".
let awsSourceIp = #"""
{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
    {"Effect": "Deny", "Action": "*", "Resource": "*",
     "Condition": {"NotIpAddress": {"aws:SourceIp": ["192.0.2.0/24", "203.0.113.0/24"]}}}
  ]
}
"""#

struct AWSCase: CustomTestStringConvertible, Sendable {
    var name: String
    var policy: String
    var operation: GatewayOperation
    var bucket: String
    var key: String?
    var context: [String: String]
    var outcome: PolicyDecision.Outcome
    var testDescription: String { name }
}

let awsCases: [AWSCase] = [
    AWSCase(name: "home: David lists the root", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "", "s3:delimiter": "/"], outcome: .allow),
    AWSCase(name: "home: David lists home/", policy: awsHomeDirectory, operation: .listObjectsV2, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "home/", "s3:delimiter": "/"], outcome: .allow),
    AWSCase(name: "home: David lists home/David", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "home/David", "s3:delimiter": "/"], outcome: .allow),
    AWSCase(name: "home: root listing needs the delimiter", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": ""], outcome: .implicitDeny),
    AWSCase(name: "home: no listing of home/Carol", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "home/Carol", "s3:delimiter": "/"], outcome: .implicitDeny),
    AWSCase(name: "home: David lists inside his folder", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "home/David/photos/"], outcome: .allow),
    AWSCase(name: "home: not inside Carol's folder", policy: awsHomeDirectory, operation: .listObjects, bucket: "my-company", key: nil, context: ["aws:username": "David", "s3:prefix": "home/Carol/photos/"], outcome: .implicitDeny),
    AWSCase(name: "home: David writes his folder", policy: awsHomeDirectory, operation: .putObject, bucket: "my-company", key: "home/David/a.txt", context: ["aws:username": "David"], outcome: .allow),
    AWSCase(name: "home: David reads his folder", policy: awsHomeDirectory, operation: .getObject, bucket: "my-company", key: "home/David/a.txt", context: ["aws:username": "David"], outcome: .allow),
    AWSCase(name: "home: David cannot read Carol's folder", policy: awsHomeDirectory, operation: .getObject, bucket: "my-company", key: "home/Carol/a.txt", context: ["aws:username": "David"], outcome: .implicitDeny),
    AWSCase(name: "home: anonymous gets nothing", policy: awsHomeDirectory, operation: .getObject, bucket: "my-company", key: "home//a.txt", context: [:], outcome: .implicitDeny),
    AWSCase(name: "TLS: https allowed", policy: awsSecureTransport, operation: .getObject, bucket: "b", key: "k", context: ["aws:SecureTransport": "true"], outcome: .allow),
    AWSCase(name: "TLS: http denied", policy: awsSecureTransport, operation: .getObject, bucket: "b", key: "k", context: ["aws:SecureTransport": "false"], outcome: .explicitDeny),
    AWSCase(name: "TLS: http listing denied", policy: awsSecureTransport, operation: .listObjects, bucket: "b", key: nil, context: ["acs:SecureTransport": "false"], outcome: .explicitDeny),
    AWSCase(name: "IP: inside the first range", policy: awsSourceIp, operation: .putObject, bucket: "b", key: "k", context: ["aws:SourceIp": "192.0.2.17"], outcome: .allow),
    AWSCase(name: "IP: inside the second range", policy: awsSourceIp, operation: .getObject, bucket: "b", key: "k", context: ["aws:SourceIp": "203.0.113.254"], outcome: .allow),
    AWSCase(name: "IP: outside denied", policy: awsSourceIp, operation: .getObject, bucket: "b", key: "k", context: ["aws:SourceIp": "198.51.100.1"], outcome: .explicitDeny),
    AWSCase(name: "IP: IPv6 client denied", policy: awsSourceIp, operation: .getObject, bucket: "b", key: "k", context: ["aws:SourceIp": "2001:db8::1"], outcome: .explicitDeny),
    AWSCase(name: "IP: unknown source denied", policy: awsSourceIp, operation: .getObject, bucket: "b", key: "k", context: [:], outcome: .explicitDeny),
]

@Suite("AWS documented examples")
struct AWSExampleTests {
    @Test(arguments: awsCases)
    func example(_ c: AWSCase) throws {
        let p = try Policy.load(text: c.policy, file: "aws.json")
        let d = p.evaluate(c.operation, bucket: c.bucket, key: c.key, context: PolicyContext(c.context))
        #expect(d.outcome == c.outcome, "\(d)")
    }
}

// MARK: - Action table

struct ActionRow: Sendable, CustomTestStringConvertible {
    var op: GatewayOperation
    var oss: String
    var s3: String
    var level: ResourceLevel
    var testDescription: String { op.rawValue }
}

let actionRows: [ActionRow] = [
    ActionRow(op: .listBuckets, oss: "oss:ListBuckets", s3: "s3:ListAllMyBuckets", level: .service),
    ActionRow(op: .createBucket, oss: "oss:PutBucket", s3: "s3:CreateBucket", level: .bucket),
    ActionRow(op: .headBucket, oss: "oss:ListObjects", s3: "s3:ListBucket", level: .bucket),
    ActionRow(op: .getBucketInfo, oss: "oss:GetBucketInfo", s3: "s3:ListBucket", level: .bucket),
    ActionRow(op: .getBucketStat, oss: "oss:GetBucketStat", s3: "s3:ListBucket", level: .bucket),
    ActionRow(op: .listObjectVersions, oss: "oss:ListObjectVersions", s3: "s3:ListBucketVersions", level: .bucket),
    ActionRow(op: .getBucketVersioning, oss: "oss:GetBucketVersioning", s3: "s3:GetBucketVersioning", level: .bucket),
    ActionRow(op: .getBucketAcl, oss: "oss:GetBucketAcl", s3: "s3:GetBucketAcl", level: .bucket),
    ActionRow(op: .getBucketLifecycle, oss: "oss:GetBucketLifecycle", s3: "s3:GetLifecycleConfiguration", level: .bucket),
    ActionRow(op: .getBucketPolicy, oss: "oss:GetBucketPolicy", s3: "s3:GetBucketPolicy", level: .bucket),
    ActionRow(op: .getBucketEncryption, oss: "oss:GetBucketEncryption", s3: "s3:GetEncryptionConfiguration", level: .bucket),
    ActionRow(op: .getBucketCors, oss: "oss:GetBucketCors", s3: "s3:GetBucketCORS", level: .bucket),
    ActionRow(op: .putBucketCors, oss: "oss:PutBucketCors", s3: "s3:PutBucketCORS", level: .bucket),
    ActionRow(op: .deleteBucketCors, oss: "oss:DeleteBucketCors", s3: "s3:PutBucketCORS", level: .bucket),
    ActionRow(op: .getBucketTagging, oss: "oss:GetBucketTagging", s3: "s3:GetBucketTagging", level: .bucket),
    ActionRow(op: .getBucketWebsite, oss: "oss:GetBucketWebsite", s3: "s3:GetBucketWebsite", level: .bucket),
    ActionRow(op: .getObjectAcl, oss: "oss:GetObjectAcl", s3: "s3:GetObjectAcl", level: .object),
    ActionRow(op: .getObjectTagging, oss: "oss:GetObjectTagging", s3: "s3:GetObjectTagging", level: .object),
    ActionRow(op: .putObjectTagging, oss: "oss:PutObjectTagging", s3: "s3:PutObjectTagging", level: .object),
    ActionRow(op: .deleteObjectTagging, oss: "oss:DeleteObjectTagging", s3: "s3:DeleteObjectTagging", level: .object),
    ActionRow(op: .deleteBucket, oss: "oss:DeleteBucket", s3: "s3:DeleteBucket", level: .bucket),
    ActionRow(op: .getBucketLocation, oss: "oss:GetBucketLocation", s3: "s3:GetBucketLocation", level: .bucket),
    ActionRow(op: .listObjects, oss: "oss:ListObjects", s3: "s3:ListBucket", level: .bucket),
    ActionRow(op: .listObjectsV2, oss: "oss:ListObjects", s3: "s3:ListBucket", level: .bucket),
    ActionRow(op: .listMultipartUploads, oss: "oss:ListMultipartUploads", s3: "s3:ListBucketMultipartUploads", level: .bucket),
    ActionRow(op: .getObject, oss: "oss:GetObject", s3: "s3:GetObject", level: .object),
    ActionRow(op: .headObject, oss: "oss:GetObject", s3: "s3:GetObject", level: .object),
    ActionRow(op: .getObjectMeta, oss: "oss:GetObject", s3: "s3:GetObject", level: .object),
    ActionRow(op: .putObject, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .appendObject, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .deleteObject, oss: "oss:DeleteObject", s3: "s3:DeleteObject", level: .object),
    ActionRow(op: .deleteObjects, oss: "oss:DeleteObject", s3: "s3:DeleteObject", level: .object),
    ActionRow(op: .copyObject, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .createMultipartUpload, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .uploadPart, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .uploadPartCopy, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .completeMultipartUpload, oss: "oss:PutObject", s3: "s3:PutObject", level: .object),
    ActionRow(op: .abortMultipartUpload, oss: "oss:AbortMultipartUpload", s3: "s3:AbortMultipartUpload", level: .object),
    ActionRow(op: .listParts, oss: "oss:ListParts", s3: "s3:ListMultipartUploadParts", level: .object),
]

@Suite("Action table")
struct ActionTableTests {
    @Test(arguments: actionRows)
    func mapping(_ row: ActionRow) {
        #expect(row.op.ossAction == row.oss)
        #expect(row.op.s3Action == row.s3)
        #expect(row.op.resourceLevel == row.level)
        #expect(GatewayOperation.operations(forAction: row.oss).contains(row.op))
        #expect(GatewayOperation.operations(forAction: row.s3.uppercased()).contains(row.op))
    }

    @Test func everyOperationIsInTheTable() {
        #expect(Set(actionRows.map(\.op)) == Set(GatewayOperation.allCases))
    }

    @Test func readmeActionTableMatchesTheCode() throws {
        let doc = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/policies.md"), encoding: .utf8)
        #expect(doc.contains(GatewayOperation.markdownTable))
    }
}
