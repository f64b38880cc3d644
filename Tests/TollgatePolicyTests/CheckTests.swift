import Testing
@testable import TollgatePolicy

/// What `policy check` reports: errors (the policy does not load) and warnings (it loads but
/// cannot work as written), each at a position found by searching the text for `needle`
/// (independently of the parser).
struct FindingCase: CustomTestStringConvertible, Sendable {
    var name: String
    var text: String
    var severity: PolicyDiagnostic.Severity
    var needle: String
    var message: String
    var testDescription: String { name }
}

/// The errors of a policy that does not load, else its warnings.
func findings(_ text: String) -> [PolicyDiagnostic] {
    do { return try Policy.load(text: text, file: "p.json").warnings } catch { return error.diagnostics }
}

/// 1-based line and column of the first occurrence of `needle`.
func position(of needle: String, in text: String) -> (line: Int, column: Int) {
    let before = text[..<text.range(of: needle)!.lowerBound]
    let line = before.count { $0 == "\n" } + 1
    let column = (before.lastIndex(of: "\n").map { before[before.index(after: $0)...] } ?? before).unicodeScalars.count + 1
    return (line, column)
}

/// A policy of the given statements, one per line.
func policy(_ statements: String...) -> String {
    "{\n  \"Version\": \"1\",\n  \"Statement\": [\n    " + statements.joined(separator: ",\n    ") + "\n  ]\n}\n"
}

let findingCases: [FindingCase] = [
    FindingCase(name: "unknown OSS action", text: policy(#"{"Effect": "Allow", "Action": ["oss:GetObject", "oss:GetObjekt"], "Resource": "*"}"#),
                severity: .error, needle: #""oss:GetObjekt""#, message: #"unknown action "oss:GetObjekt" (did you mean oss:GetObject?)"#),
    FindingCase(name: "unknown S3 action", text: policy(#"{"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}"#),
                severity: .error, needle: #""s3:GetObjekt""#, message: #"unknown action "s3:GetObjekt" (did you mean s3:GetObject?)"#),
    FindingCase(name: "an S3 name in the oss: namespace", text: policy(#"{"Effect": "Allow", "Action": "oss:ListBucket", "Resource": "*"}"#),
                severity: .error, needle: #""oss:ListBucket""#,
                message: #"unknown action "oss:ListBucket" (did you mean oss:ListObjects or oss:GetBucketInfo or oss:GetBucketStat?)"#),
    FindingCase(name: "an action the gateway does not serve", text: policy(#"{"Effect": "Allow", "Action": "oss:PutBucketAcl", "Resource": "*"}"#),
                severity: .error, needle: #""oss:PutBucketAcl""#, message: #"unknown action "oss:PutBucketAcl" (did you mean oss:GetBucketAcl?)"#),
    FindingCase(name: "a wildcard that matches nothing", text: policy(#"{"Effect": "Allow", "Action": "oss:Frob*", "Resource": "*"}"#),
                severity: .error, needle: #""oss:Frob*""#, message: #"action "oss:Frob*" matches no action the gateway serves (oss: actions: oss:ListBuckets, oss:PutBucket, oss:ListObjects, oss:GetBucketInfo, oss:GetBucketStat, oss:ListObjectVersions, oss:GetBucketVersioning, oss:GetBucketAcl, oss:GetBucketLifecycle, oss:GetBucketPolicy, oss:GetBucketEncryption, oss:GetBucketCors, oss:PutBucketCors, oss:DeleteBucketCors, oss:GetBucketTagging, oss:GetBucketWebsite, oss:GetObjectAcl, oss:GetObjectTagging, oss:PutObjectTagging, oss:DeleteObjectTagging, oss:DeleteBucket, oss:GetBucketLocation, oss:ListMultipartUploads, oss:GetObject, oss:PutObject, oss:DeleteObject, oss:AbortMultipartUpload, oss:ListParts)"#),
    FindingCase(name: "misspelt operator", text: policy(#"{"Effect": "Allow", "Action": "oss:*", "Resource": "*", "Condition": {"StringEqual": {"aws:username": "a"}}}"#),
                severity: .error, needle: #""StringEqual""#, message: #"unknown condition operator "StringEqual" (did you mean StringEquals?)"#),
    FindingCase(name: "unknown condition key", text: policy(#"{"Effect": "Allow", "Action": "oss:*", "Resource": "*", "Condition": {"StringLike": {"acs:SourceIpp": "10.*"}}}"#),
                severity: .warning, needle: #""acs:SourceIpp""#,
                message: #"condition key "acs:SourceIpp" is never set by Tollgate, so the condition never sees a value (did you mean acs:sourceip?)"#),
    FindingCase(name: "unknown key without a likely name", text: policy(#"{"Effect": "Allow", "Action": "oss:*", "Resource": "*", "Condition": {"StringEquals": {"oss:BucketTag": "x"}}}"#),
                severity: .warning, needle: #""oss:BucketTag""#,
                message: #"condition key "oss:BucketTag" is never set by Tollgate, so the condition never sees a value"#),
    FindingCase(name: "unknown policy variable", text: policy(#"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:b/${aws:usrname}/*"}"#),
                severity: .warning, needle: #""acs:oss:*:*:b/${"#,
                message: "policy variable ${aws:usrname} is never set by Tollgate, so an Allow using it never matches (did you mean ${aws:username}?)"),
    FindingCase(name: "object action on a bucket", text: policy(#"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:photos"}"#),
                severity: .warning, needle: #""oss:GetObject""#,
                message: "oss:GetObject acts on an object: a resource like acs:oss:*:*:BUCKET/* (a bucket alone never matches); no Resource of this statement (acs:oss:*:*:photos) can match it"),
    FindingCase(name: "bucket action on objects only", text: policy(#"{"Effect": "Allow", "Action": ["oss:ListObjects"], "Resource": ["arn:aws:s3:::photos/*"]}"#),
                severity: .warning, needle: #""oss:ListObjects""#,
                message: "oss:ListObjects acts on a bucket: a resource like acs:oss:*:*:BUCKET (BUCKET/* names objects, never the bucket); no Resource of this statement (arn:aws:s3:::photos/*) can match it"),
    FindingCase(name: "service action on a bucket", text: policy(#"{"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "arn:aws:s3:::photos"}"#),
                severity: .warning, needle: #""s3:ListAllMyBuckets""#,
                message: "s3:ListAllMyBuckets acts on the whole service: the resource * or acs:oss:*:*:*; no Resource of this statement (arn:aws:s3:::photos) can match it"),
    FindingCase(name: "Allow always beaten by a Deny", text: policy(
                    #"{"Effect": "Deny", "Action": "oss:*", "Resource": "acs:oss:*:*:photos/*"}"#,
                    #"{"Sid": "Read", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::photos/public/*"}"#),
                severity: .warning, needle: #"{"Sid": "Read""#,
                message: "statement 2 (Allow) never takes effect: statement 1 (Deny, line 4) has no condition and denies every action on every resource it allows"),
    FindingCase(name: "Allow beaten by a Deny of the same resource", text: policy(
                    #"{"Effect": "Allow", "Action": ["oss:GetObject", "oss:PutObject"], "Resource": ["acs:oss:*:*:b/${aws:username}/*"]}"#,
                    #"{"Effect": "Deny", "Action": ["oss:GetObject", "oss:PutObject", "oss:DeleteObject"], "Resource": "acs:oss:*:*:b/${aws:username}/*"}"#),
                severity: .warning, needle: #"{"Effect": "Allow""#,
                message: "statement 1 (Allow) never takes effect: statement 2 (Deny, line 5) has no condition and denies every action on every resource it allows"),
]

/// Policies that must load without any finding.
let cleanPolicies: [(String, String)] = [
    ("lower-case action names match", policy(#"{"Effect": "Allow", "Action": ["oss:getobject", "S3:PUTOBJECT"], "Resource": "acs:oss:*:*:b/*"}"#)),
    ("wildcards that match", policy(#"{"Effect": "Allow", "Action": ["oss:Get*", "s3:List*", "oss:?utObject"], "Resource": "*"}"#)),
    ("bucket and object resources for bucket and object actions",
     policy(#"{"Effect": "Allow", "Action": ["oss:GetObject", "oss:ListObjects"], "Resource": ["acs:oss:*:*:b/*", "acs:oss:*:*:b"]}"#)),
    ("keys the gateway and login tokens supply", policy(
        #"{"Effect": "Allow", "Action": "oss:ListObjects", "Resource": "acs:oss:*:*:b", "Condition": {"StringLike": {"oss:Prefix": "${user}/*", "jwt:groups": "a", "aws:PrincipalTag/team": "x", "acs:UserAgent": "*"}, "IpAddress": {"acs:SourceIp": "10.0.0.0/8"}, "Bool": {"aws:SecureTransport": "false"}}}"#)),
    ("a Deny with a condition does not always win", policy(
        #"{"Effect": "Deny", "Action": "oss:*", "Resource": "*", "Condition": {"NotIpAddress": {"acs:SourceIp": "10.0.0.0/8"}}}"#,
        #"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:b/*"}"#)),
    ("a Deny of narrower resources", policy(
        #"{"Effect": "Deny", "Action": "oss:*", "Resource": "acs:oss:*:*:b/private/*"}"#,
        #"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:b/*"}"#)),
    ("a Deny of fewer actions", policy(
        #"{"Effect": "Deny", "Action": "oss:PutObject", "Resource": "*"}"#,
        #"{"Effect": "Allow", "Action": ["oss:GetObject", "oss:PutObject"], "Resource": "acs:oss:*:*:b/*"}"#)),
    ("a Deny covering only some resources", policy(
        #"{"Effect": "Deny", "Action": "oss:*", "Resource": "acs:oss:*:*:b/*"}"#,
        #"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": ["acs:oss:*:*:b/*", "acs:oss:*:*:c/*"]}"#)),
    ("a Deny with NotResource", policy(
        #"{"Effect": "Deny", "Action": "oss:*", "NotResource": "acs:oss:*:*:b/*"}"#,
        #"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:c/*"}"#)),
    ("a Deny whose variable differs", policy(
        #"{"Effect": "Deny", "Action": "oss:*", "Resource": "acs:oss:*:*:b/${aws:userid}/*"}"#,
        #"{"Effect": "Allow", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:b/${aws:username}/*"}"#)),
]

@Suite("policy check findings")
struct CheckTests {
    @Test("each finding is reported once, at its line and column", arguments: findingCases)
    func finding(_ c: FindingCase) {
        let found = findings(c.text)
        #expect(found.count == 1, "\(found)")
        guard let d = found.first else { return }
        let at = position(of: c.needle, in: c.text)
        #expect(d.severity == c.severity)
        #expect((d.line, d.column) == (at.line, at.column), "\(d)")
        #expect(d.message == c.message)
        #expect(d.description == "p.json:\(at.line):\(at.column): \(c.severity == .warning ? "warning: " : "")\(c.message)")
    }

    @Test("no finding", arguments: cleanPolicies.map(\.0))
    func clean(_ name: String) throws {
        let text = cleanPolicies.first { $0.0 == name }!.1
        #expect(try Policy.load(text: text, file: "p.json").warnings == [])
    }

    @Test func warningsComeWithErrorsWhenThePolicyDoesNotLoad() {
        let text = policy(
            #"{"Effect": "Allow", "Action": "oss:GetObjekt", "Resource": "*"}"#,
            #"{"Effect": "Allow", "Action": "oss:*", "Resource": "*", "Condition": {"StringEquals": {"aws:Foo": "x"}}}"#)
        let found = findings(text)
        #expect(found.map(\.severity) == [.error, .warning])
    }

    @Test func shippedPoliciesHaveNoFindings() throws {
        for name in ["all_policy.txt", "bucket_read_policy.txt", "bucket_read_write_policy.txt", "user_isolated_policy.txt"] {
            #expect(try shippedPolicy(name).warnings == [], "\(name)")
        }
    }

    @Test func spellingSuggestsOnlyCloseNames() {
        #expect(Spelling.closest(to: "GetObjekt", among: ["GetObject", "PutObject"]) == "GetObject")
        #expect(Spelling.closest(to: "Frobnicate", among: ["GetObject", "PutObject"]) == nil)
        #expect(Spelling.distance(Array("kitten".unicodeScalars), Array("sitting".unicodeScalars)) == 3)
    }
}
