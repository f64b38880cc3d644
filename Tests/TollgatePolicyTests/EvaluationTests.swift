import Foundation
import Testing
@testable import TollgatePolicy

/// A request against a policy, with its expected outcome.
struct EvalCase: CustomTestStringConvertible, Sendable {
    var name: String
    var policy: String
    var operation: GatewayOperation
    var bucket: String?
    var key: String?
    var context: [String: String]
    var outcome: PolicyDecision.Outcome

    init(_ name: String, _ policy: String, _ operation: GatewayOperation, _ bucket: String?, _ key: String?,
         _ context: [String: String], _ outcome: PolicyDecision.Outcome) {
        self.name = name
        self.policy = policy
        self.operation = operation
        self.bucket = bucket
        self.key = key
        self.context = context
        self.outcome = outcome
    }

    init(_ name: String, _ policy: String, _ operation: GatewayOperation, _ bucket: String?, _ key: String?,
         _ outcome: PolicyDecision.Outcome) {
        self.init(name, policy, operation, bucket, key, [:], outcome)
    }

    var testDescription: String { name }
}

/// One Allow statement with the given Action and Resource JSON.
func allow(_ action: String, _ resource: String, notAction: Bool = false, notResource: Bool = false) -> String {
    #"{"Version":"1","Statement":[{"Effect":"Allow","\#(notAction ? "NotAction" : "Action")":\#(action),"\#(notResource ? "NotResource" : "Resource")":\#(resource)}]}"#
}

let evaluationCases: [EvalCase] = [
    // Action patterns: case-insensitive, own namespace only, * and ?.
    EvalCase("oss:Get* allows GetObject", allow(#""oss:Get*""#, #""*""#), .getObject, "b", "k", .allow),
    EvalCase("oss:Get* allows HeadObject", allow(#""oss:Get*""#, #""*""#), .headObject, "b", "k", .allow),
    EvalCase("oss:Get* refuses PutObject", allow(#""oss:Get*""#, #""*""#), .putObject, "b", "k", .implicitDeny),
    EvalCase("oss:*Object allows PutObject", allow(#""oss:*Object""#, #""*""#), .putObject, "b", "k", .allow),
    EvalCase("oss:?etObject allows GetObject", allow(#""oss:?etObject""#, #""*""#), .getObject, "b", "k", .allow),
    EvalCase("OSS:getobject is case-insensitive", allow(#""OSS:getobject""#, #""*""#), .getObject, "b", "k", .allow),
    EvalCase("s3:GetObject allows GetObjectMeta", allow(#""s3:GetObject""#, #""*""#), .getObjectMeta, "b", "k", .allow),
    EvalCase("s3:ListBucket allows ListObjectsV2", allow(#""s3:ListBucket""#, #""arn:aws:s3:::b""#), .listObjectsV2, "b", nil, .allow),
    EvalCase("s3:ListBucket allows HeadBucket", allow(#""s3:ListBucket""#, #""arn:aws:s3:::b""#), .headBucket, "b", nil, .allow),
    EvalCase("oss:ListObjects allows HeadBucket (as s3:ListBucket does)", allow(#""oss:ListObjects""#, #""acs:oss:*:*:b""#), .headBucket, "b", nil, .allow),
    EvalCase("oss:GetBucketInfo does not allow HeadBucket", allow(#""oss:GetBucketInfo""#, #""acs:oss:*:*:b""#), .headBucket, "b", nil, .implicitDeny),
    EvalCase("oss:GetBucketInfo allows GetBucketInfo", allow(#""oss:GetBucketInfo""#, #""acs:oss:*:*:b""#), .getBucketInfo, "b", nil, .allow),
    EvalCase("s3:ListBucket allows GetBucketInfo", allow(#""s3:ListBucket""#, #""arn:aws:s3:::b""#), .getBucketInfo, "b", nil, .allow),
    EvalCase("s3:List* covers ListParts", allow(#""s3:List*""#, #""*""#), .listParts, "b", "k", .allow),
    EvalCase("oss:PutObject covers UploadPart", allow(#""oss:PutObject""#, #""*""#), .uploadPart, "b", "k", .allow),
    EvalCase("oss:PutObject covers CompleteMultipartUpload", allow(#""oss:PutObject""#, #""*""#), .completeMultipartUpload, "b", "k", .allow),
    EvalCase("oss:PutObject covers CreateMultipartUpload", allow(#""oss:PutObject""#, #""*""#), .createMultipartUpload, "b", "k", .allow),
    EvalCase("oss:PutObject covers AppendObject", allow(#""oss:PutObject""#, #""*""#), .appendObject, "b", "k", .allow),
    EvalCase("oss:PutObject does not cover Abort", allow(#""oss:PutObject""#, #""*""#), .abortMultipartUpload, "b", "k", .implicitDeny),
    EvalCase("* alone allows ListBuckets", allow(#""*""#, #""*""#), .listBuckets, nil, nil, .allow),
    EvalCase("s3:ListAllMyBuckets allows ListBuckets", allow(#""s3:ListAllMyBuckets""#, #""arn:aws:s3:::*""#), .listBuckets, nil, nil, .allow),
    EvalCase("oss:PutBucket allows CreateBucket", allow(#""oss:PutBucket""#, #""acs:oss:*:*:b""#), .createBucket, "b", nil, .allow),
    EvalCase("s3:CreateBucket allows CreateBucket", allow(#""s3:CreateBucket""#, #""arn:aws:s3:::b""#), .createBucket, "b", nil, .allow),
    EvalCase("action list ORed", allow(#"["oss:PutObject","oss:GetObject"]"#, #""*""#), .getObject, "b", "k", .allow),
    // Resources.
    EvalCase("bucket/* matches object", allow(#""oss:*""#, #""acs:oss:*:*:b/*""#), .getObject, "b", "dir/k", .allow),
    EvalCase("bucket/* refuses other bucket", allow(#""oss:*""#, #""acs:oss:*:*:b/*""#), .getObject, "b2", "k", .implicitDeny),
    EvalCase("bucket/* does not cover the bucket", allow(#""oss:*""#, #""acs:oss:*:*:b/*""#), .listObjects, "b", nil, .implicitDeny),
    EvalCase("bucket resource allows listing", allow(#""oss:*""#, #""acs:oss:*:*:b""#), .listObjects, "b", nil, .allow),
    EvalCase("bucket resource does not cover objects", allow(#""oss:*""#, #""acs:oss:*:*:b""#), .getObject, "b", "k", .implicitDeny),
    EvalCase("acs:oss:*:*:* covers the service", allow(#""oss:*""#, #""acs:oss:*:*:*""#), .listBuckets, nil, nil, .allow),
    EvalCase("acs:oss:*:*:* covers buckets", allow(#""oss:*""#, #""acs:oss:*:*:*""#), .deleteBucket, "b", nil, .allow),
    EvalCase("acs:oss:*:*:* covers objects", allow(#""oss:*""#, #""acs:oss:*:*:*""#), .deleteObject, "b", "a/b", .allow),
    EvalCase("bucket/* does not cover the service", allow(#""oss:*""#, #""acs:oss:*:*:b/*""#), .listBuckets, nil, nil, .implicitDeny),
    EvalCase("arn form matches objects", allow(#""s3:*""#, #""arn:aws:s3:::b/*""#), .putObject, "b", "k", .allow),
    EvalCase("arn resource governs oss action names", allow(#""oss:GetObject""#, #""arn:aws:s3:::b/*""#), .getObject, "b", "k", .allow),
    EvalCase("region and account accepted", allow(#""oss:*""#, #""acs:oss:cn-hangzhou:1234567890:b/*""#), .getObject, "b", "k", .allow),
    EvalCase("resources are case-sensitive", allow(#""oss:*""#, #""acs:oss:*:*:B/*""#), .getObject, "b", "k", .implicitDeny),
    EvalCase("? matches one character", allow(#""oss:*""#, #""acs:oss:*:*:b/file?.txt""#), .getObject, "b", "file1.txt", .allow),
    EvalCase("? does not match two", allow(#""oss:*""#, #""acs:oss:*:*:b/file?.txt""#), .getObject, "b", "file12.txt", .implicitDeny),
    EvalCase("? matches one non-ASCII character", allow(#""oss:*""#, #""acs:oss:*:*:b/?.txt""#), .getObject, "b", "é.txt", .allow),
    EvalCase("b* covers other buckets", allow(#""oss:*""#, #""acs:oss:*:*:b*""#), .listObjects, "b2", nil, .allow),
    EvalCase("middle * backtracks", allow(#""oss:*""#, #""acs:oss:*:*:b/*/x/*.jpg""#), .getObject, "b", "a/x/y/x/z.jpg", .allow),
    EvalCase("middle * needs the suffix", allow(#""oss:*""#, #""acs:oss:*:*:b/*/x/*.jpg""#), .getObject, "b", "a/x/y.png", .implicitDeny),
    EvalCase("escaped * is literal", allow(#""oss:*""#, #""acs:oss:*:*:b/${*}""#), .getObject, "b", "*", .allow),
    EvalCase("escaped * is not a wildcard", allow(#""oss:*""#, #""acs:oss:*:*:b/${*}""#), .getObject, "b", "x", .implicitDeny),
    EvalCase("escaped $ is literal", allow(#""oss:*""#, #""acs:oss:*:*:b/${$}x""#), .getObject, "b", "$x", .allow),
    // NotAction / NotResource.
    EvalCase("NotAction allows the rest", allow(#""oss:DeleteObject""#, #""*""#, notAction: true), .getObject, "b", "k", .allow),
    EvalCase("NotAction excludes its action", allow(#""oss:DeleteObject""#, #""*""#, notAction: true), .deleteObject, "b", "k", .implicitDeny),
    EvalCase("NotAction matches across namespaces", allow(#""s3:DeleteObject""#, #""*""#, notAction: true), .deleteObjects, "b", "k", .implicitDeny),
    EvalCase("NotResource allows elsewhere", allow(#""oss:*""#, #""acs:oss:*:*:b/secret/*""#, notResource: true), .getObject, "b", "public/k", .allow),
    EvalCase("NotResource excludes its resource", allow(#""oss:*""#, #""acs:oss:*:*:b/secret/*""#, notResource: true), .getObject, "b", "secret/k", .implicitDeny),
    EvalCase("NotResource with unresolved variable never widens",
             allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#, notResource: true), .getObject, "b", "x/k", .implicitDeny),
    // Variables.
    EvalCase("${aws:username} home", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "alice/k", ["aws:username": "alice"], .allow),
    EvalCase("${aws:username} other home", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "bob/k", ["aws:username": "alice"], .implicitDeny),
    EvalCase("${aws:username} missing matches nothing", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "/k", .implicitDeny),
    EvalCase("${user} is aws:username", allow(#""oss:*""#, #""acs:oss:*:*:b/${user}/*""#), .getObject, "b", "alice/k", ["aws:username": "alice"], .allow),
    EvalCase("${aws:userid}", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:userid}/*""#), .getObject, "b", "u-7/k", ["aws:userid": "u-7"], .allow),
    EvalCase("${jwt:sub}", allow(#""oss:*""#, #""acs:oss:*:*:b/${jwt:sub}/*""#), .getObject, "b", "sub-1/k", ["jwt:sub": "sub-1"], .allow),
    EvalCase("any jwt claim", allow(#""oss:*""#, #""acs:oss:*:*:${jwt:tenant}/*""#), .getObject, "t1", "k", ["jwt:tenant": "t1"], .allow),
    EvalCase("a value with * is literal", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "alice/k", ["aws:username": "*"], .implicitDeny),
    EvalCase("a value with ? is literal", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "a/k", ["aws:username": "?"], .implicitDeny),
    EvalCase("empty value stays narrow", allow(#""oss:*""#, #""acs:oss:*:*:b/${aws:username}/*""#), .getObject, "b", "alice/k", ["aws:username": ""], .implicitDeny),
]

let denyOnDelete = #"""
{"Version":"1","Statement":[
  {"Effect":"Allow","Action":"oss:*","Resource":"*"},
  {"Sid":"NoDelete","Effect":"Deny","Action":["oss:DeleteObject","oss:DeleteBucket"],"Resource":"*"}
]}
"""#
let denyFirst = #"""
{"Version":"1","Statement":[
  {"Effect":"Deny","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/keep/*"},
  {"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::b/*"}
]}
"""#
let denyWithVariable = #"""
{"Version":"1","Statement":[
  {"Effect":"Allow","Action":"oss:*","Resource":"*"},
  {"Effect":"Deny","Action":"oss:*","Resource":"acs:oss:*:*:b/${jwt:sub}/*"},
  {"Effect":"Deny","Action":"oss:PutObject","Resource":"*","Condition":{"StringNotEquals":{"jwt:aud":"${jwt:expected}"}}}
]}
"""#

let precedenceCases: [EvalCase] = [
    EvalCase("deny beats allow", denyOnDelete, .deleteObject, "b", "k", .explicitDeny),
    EvalCase("deny covers DeleteObjects per key", denyOnDelete, .deleteObjects, "b", "k", .explicitDeny),
    EvalCase("allow elsewhere", denyOnDelete, .getObject, "b", "k", .allow),
    EvalCase("deny before allow", denyFirst, .deleteObject, "b", "keep/x", .explicitDeny),
    EvalCase("allow outside the deny", denyFirst, .deleteObject, "b", "tmp/x", .allow),
    EvalCase("neither: implicit deny", denyFirst, .deleteObject, "c", "keep/x", .implicitDeny),
    EvalCase("deny with unresolved resource variable still denies", denyWithVariable, .getObject, "b", "x/k", .explicitDeny),
    EvalCase("deny with resolved variable applies to its prefix only", denyWithVariable, .getObject, "b", "x/k", ["jwt:sub": "y"], .allow),
    EvalCase("deny with resolved variable", denyWithVariable, .getObject, "b", "y/k", ["jwt:sub": "y"], .explicitDeny),
    EvalCase("deny condition with unresolved variable still denies", denyWithVariable, .putObject, "b", "x/k", ["jwt:sub": "y", "jwt:aud": "app"], .explicitDeny),
    EvalCase("deny condition resolved and equal", denyWithVariable, .putObject, "b", "x/k", ["jwt:sub": "y", "jwt:aud": "app", "jwt:expected": "app"], .allow),
]

@Suite("Evaluation")
struct EvaluationTests {
    @Test("actions, resources, wildcards, NotAction/NotResource, variables", arguments: evaluationCases)
    func evaluation(_ c: EvalCase) throws {
        try check(c)
    }

    @Test("deny precedence", arguments: precedenceCases)
    func precedence(_ c: EvalCase) throws {
        try check(c)
    }

    func check(_ c: EvalCase) throws {
        let policy = try Policy.load(text: c.policy, file: "p.json")
        let d = policy.evaluate(c.operation, bucket: c.bucket, key: c.key, context: PolicyContext(c.context))
        #expect(d.outcome == c.outcome, "\(d)")
    }

    /// Every operation has its own bit in a statement's mask; more operations than the mask's
    /// width would silently share (or lose) bits, and a policy would grant what it does not name.
    @Test func everyOperationHasItsOwnBit() {
        let bits = GatewayOperation.allCases.map(\.bit)
        #expect(!bits.contains(0))
        #expect(Set(bits).count == GatewayOperation.allCases.count)
    }

    @Test func decisionNamesTheDecidingStatement() throws {
        let p = try Policy.load(text: denyOnDelete, file: "policy/p.txt")
        let deny = p.evaluate(.deleteObject, bucket: "b", key: "k", context: PolicyContext())
        #expect(deny.statement == StatementReference(file: "policy/p.txt", line: 3, column: 3, index: 2, sid: "NoDelete"))
        #expect(deny.description == #"Deny (explicit) by policy/p.txt:3 (statement 2 "NoDelete")"#)
        let allow = p.evaluate(.getObject, bucket: "b", key: "k", context: PolicyContext())
        #expect(allow.statement?.index == 1)
        #expect(allow.statement?.line == 2)
        #expect(allow.description == "Allow by policy/p.txt:2 (statement 1)")
        let none = try Policy.load(text: denyFirst, file: "q").evaluate(.getObject, bucket: "z", key: "k", context: PolicyContext())
        #expect(none.statement == nil)
        #expect(none.description == "Deny (implicit): no statement in q allows the request")
    }

    @Test func objectOperationWithoutKeyIsDenied() throws {
        let p = try Policy.load(text: allow(#""*""#, #""*""#), file: "p")
        #expect(!p.evaluate(.getObject, bucket: "b", key: nil, context: PolicyContext()).isAllowed)
        #expect(!p.evaluate(.listObjects, bucket: nil, key: nil, context: PolicyContext()).isAllowed)
    }
}

// MARK: - Session policies

let readOnly = allow(#"["oss:GetObject","oss:ListObjects"]"#, #"["acs:oss:*:*:b","acs:oss:*:*:b/*"]"#)
let everything = allow(#""oss:*""#, #""*""#)
let sessionDeny = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:*","Resource":"*"},{"Effect":"Deny","Action":"oss:GetObject","Resource":"acs:oss:*:*:b/private/*"}]}"#

struct SessionCase: CustomTestStringConvertible, Sendable {
    var name: String
    var role: String
    var session: String?
    var operation: GatewayOperation
    var key: String?
    var outcome: PolicyDecision.Outcome
    var decidedBy: String?
    var testDescription: String { name }
}

let sessionCases: [SessionCase] = [
    SessionCase(name: "both allow", role: everything, session: readOnly, operation: .getObject, key: "k", outcome: .allow, decidedBy: "role.json"),
    SessionCase(name: "session narrows the role", role: everything, session: readOnly, operation: .putObject, key: "k", outcome: .implicitDeny, decidedBy: "session.json"),
    SessionCase(name: "session cannot widen the role", role: readOnly, session: everything, operation: .putObject, key: "k", outcome: .implicitDeny, decidedBy: "role.json"),
    SessionCase(name: "session deny wins", role: everything, session: sessionDeny, operation: .getObject, key: "private/x", outcome: .explicitDeny, decidedBy: "session.json"),
    SessionCase(name: "role deny wins", role: sessionDeny, session: everything, operation: .getObject, key: "private/x", outcome: .explicitDeny, decidedBy: "role.json"),
    SessionCase(name: "no session: role decides", role: readOnly, session: nil, operation: .getObject, key: "k", outcome: .allow, decidedBy: "role.json"),
    SessionCase(name: "no session: role refuses", role: readOnly, session: nil, operation: .deleteObject, key: "k", outcome: .implicitDeny, decidedBy: "role.json"),
    SessionCase(name: "listing allowed by both", role: everything, session: readOnly, operation: .listObjects, key: nil, outcome: .allow, decidedBy: "role.json"),
]

@Suite("Session policies")
struct SessionPolicyTests {
    @Test("role ∩ session", arguments: sessionCases)
    func intersection(_ c: SessionCase) throws {
        let role = try Policy.load(text: c.role, file: "role.json")
        let session = try c.session.map { try Policy.load(text: $0, file: "session.json") }
        let d = EffectivePolicy(role: role, session: session).evaluate(c.operation, bucket: "b", key: c.key, context: PolicyContext())
        #expect(d.outcome == c.outcome)
        #expect((d.statement?.file ?? d.policyFile) == c.decidedBy)
    }

    @Test func sessionPoliciesAreValidatedLikeRolePolicies() {
        #expect(throws: PolicyLoadError.self) {
            try Policy.load(text: #"{"Version":"1","Statement":{"Effect":"Allow","Action":"oss:*","Resource":"acs:ecs:*:*:x"}}"#, file: "session")
        }
    }

    @Test func copyNeedsReadOnSourceAndWriteOnTarget() throws {
        let role = try Policy.load(text: #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetObject","Resource":"acs:oss:*:*:src/*"},{"Effect":"Allow","Action":"oss:PutObject","Resource":"acs:oss:*:*:dst/*"}]}"#, file: "r")
        let effective = EffectivePolicy(role: role)
        let ok = GatewayOperation.copyObject.requiredChecks(bucket: "dst", key: "k", sourceBucket: "src", sourceKey: "k")
        #expect(ok.map(\.operation) == [.putObject, .getObject])
        #expect(effective.evaluate(ok, context: PolicyContext()).isAllowed)
        let reversed = GatewayOperation.copyObject.requiredChecks(bucket: "src", key: "k", sourceBucket: "dst", sourceKey: "k")
        #expect(!effective.evaluate(reversed, context: PolicyContext()).isAllowed)
        let partCopy = GatewayOperation.uploadPartCopy.requiredChecks(bucket: "dst", key: "k", sourceBucket: "other", sourceKey: "k")
        #expect(!effective.evaluate(partCopy, context: PolicyContext()).isAllowed)
        #expect(GatewayOperation.deleteObjects.requiredChecks(bucket: "b", key: "k").map(\.operation) == [.deleteObject])
    }
}

/// The coarse check DeleteObjects makes before reading its body: could any key in the bucket
/// be deleted? Deny statements are left to the exact decision per key.
@Test(arguments: [
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b/*""#), "b", true),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b/alice/*""#), "b", true),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b/${user}/*""#), "b", true),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b/${jwt:missing}/*""#), "b", false),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:other/*""#), "b", false),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b""#), "b", false),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:bb/*""#), "b", false),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:?/*""#), "b", true),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b*""#), "b", true),
    (allow(#""oss:DeleteObject""#, #""*""#), "b", true),
    (allow(#""s3:DeleteObject""#, #""arn:aws:s3:::b/x""#), "b", true),
    (allow(#""oss:GetObject""#, #""*""#), "b", false),
    (allow(#""oss:DeleteObject""#, #""*""#, notAction: true), "b", false),
    (allow(#""oss:GetObject""#, #""*""#, notAction: true), "b", true),
    (allow(#""oss:DeleteObject""#, #""acs:oss:*:*:b/*""#, notResource: true), "b", true),
    (#"{"Version":"1","Statement":[{"Effect":"Deny","Action":"oss:DeleteObject","Resource":"*"}]}"#, "b", false),
    (#"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:DeleteObject","Resource":"*","Condition":{"IpAddress":{"acs:SourceIp":"10.0.0.0/8"}}}]}"#, "b", false),
])
func mayAllowSomeObject(_ policy: String, _ bucket: String, _ expected: Bool) throws {
    let loaded = try Policy.load(text: policy, file: "p.json")
    let context = PolicyContext(["aws:username": "alice", "acs:SourceIp": "192.0.2.1"])
    #expect(loaded.mayAllowSomeObject(.deleteObject, bucket: bucket, context: context) == expected)
}

@Test(arguments: [
    ("abc", "ab", true), ("abc", "abc", true), ("abc", "abcd", false), ("a*c", "axxxxc", true), ("a*c", "b", false),
    ("a?c", "aZ", true), ("a?c", "aZd", false), ("*", "anything", true), ("", "", true), ("", "x", false),
    ("a*b*c", "aXbYb", true), ("ab", "b", false),
])
func globPrefixFeasibility(_ pattern: String, _ prefix: String, _ expected: Bool) throws {
    let compiled = try PatternCompiler.compile(pattern, wildcards: true, variables: false)
    #expect(globCanMatchPrefix(compiled.tokens, Array(prefix.utf8)) == expected)
}
