import Foundation
import Testing
import TollgatePolicy
import TollgateUpstream

// MARK: Session names

/// (subject, limit, the name, or its readable part before `-` and 12 hex digits of the subject's SHA-256)
@Test(arguments: [
    (nil, 32, "tollgate", false),
    ("alice", 32, "alice", false),
    ("alice@example.com", 32, "alice@example.com", false),
    ("a", 32, "a", true),
    ("Zoë Müller", 32, "Zo___M__ller", true),
    ("user:with:colons", 64, "user_with_colons", true),
    (String(repeating: "x", count: 40), 32, String(repeating: "x", count: 19), true),
    (String(repeating: "x", count: 40), 64, String(repeating: "x", count: 40), false),
] as [(String?, Int, String, Bool)])
func sessionNamesComeFromTheSubject(subject: String?, maxLength: Int, readable: String, hashed: Bool) {
    let name = SessionName.derive(subject: subject, maxLength: maxLength)
    if hashed {
        #expect(name.hasPrefix(readable + "-"))
        #expect(name.utf8.count == readable.utf8.count + 13)
        #expect(name.suffix(12).allSatisfy { $0.isHexDigit })
    } else {
        #expect(name == readable)
    }
    #expect((2...maxLength).contains(name.utf8.count))
    #expect(name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".@-_".unicodeScalars.contains($0)) })
}

@Test func subjectsThatCleanTheSameGetDifferentNames() {
    #expect(SessionName.derive(subject: "a:b", maxLength: 32) != SessionName.derive(subject: "a;b", maxLength: 32))
}

// MARK: Retry

@Test func retriesAreBoundedJitteredAndOnlyForRetryableFailures() {
    let policy = RetryPolicy(maxAttempts: 3, baseDelay: 100, maxDelay: 1000)
    let throttled = UpstreamFailure.answered(upstream: "u", status: 400, code: "Throttling", message: nil)
    let denied = UpstreamFailure.answered(upstream: "u", status: 403, code: "AccessDenied", message: nil)
    #expect(policy.pause(after: 1, failure: throttled, remaining: 5000, random: 1) == 100)
    #expect(policy.pause(after: 2, failure: throttled, remaining: 5000, random: 1) == 200)
    #expect(policy.pause(after: 2, failure: throttled, remaining: 5000, random: 0.5) == 100)
    #expect(policy.pause(after: 3, failure: throttled, remaining: 5000, random: 1) == nil, "three attempts at most")
    #expect(policy.pause(after: 1, failure: denied, remaining: 5000, random: 1) == nil, "a refusal is not retried")
    #expect(policy.pause(after: 1, failure: .timeout(upstream: "u", milliseconds: 10), remaining: 5000, random: 1) == nil)
    #expect(policy.pause(after: 1, failure: throttled, remaining: 120, random: 1) == nil, "no retry past the deadline")
    #expect(RetryPolicy(maxAttempts: 10, baseDelay: 100, maxDelay: 1000).ceiling(after: 9) == 1000)
}

// MARK: Reuse

private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

private func credentials(_ id: String, expiresIn seconds: Double) -> UpstreamCredentials {
    UpstreamCredentials(accessKeyId: id, accessKeySecret: "secret-\(id)", securityToken: "token-\(id)",
                        expiration: t0.addingTimeInterval(seconds))
}

private func key(_ subject: String, policy: String? = "p") -> CredentialCache.Key {
    CredentialCache.Key(upstream: "u", role: "r", subject: subject, policy: policy, durationSeconds: 900)
}

@Test func credentialsAreReusedForTheirShareAndNeverPastTheMargin() {
    let cache = CredentialCache(rule: CacheRule(share: 0.5, marginSeconds: 300, maxEntries: 100))
    cache.store(credentials("A", expiresIn: 900), for: key("alice"), now: t0)
    #expect(cache.lookup(key("alice"), now: t0.addingTimeInterval(449))?.credentials.accessKeyId == "A")
    #expect(cache.lookup(key("alice"), now: t0.addingTimeInterval(450)) == nil, "half of 900 s")
    #expect(cache.lookup(key("bob"), now: t0) == nil)
    #expect(cache.lookup(key("alice", policy: "other"), now: t0) == nil, "another session policy is another key")

    let late = CredentialCache(rule: CacheRule(share: 0.9, marginSeconds: 300, maxEntries: 100))
    late.store(credentials("B", expiresIn: 900), for: key("alice"), now: t0)
    #expect(late.lookup(key("alice"), now: t0.addingTimeInterval(599)) != nil)
    #expect(late.lookup(key("alice"), now: t0.addingTimeInterval(600)) == nil, "Expiration minus 300 s comes first")

    let short = CredentialCache(rule: CacheRule(share: 0.5, marginSeconds: 300, maxEntries: 100))
    short.store(credentials("C", expiresIn: 200), for: key("alice"), now: t0)
    #expect(short.lookup(key("alice"), now: t0) == nil, "credentials shorter than the margin are not kept")
}

@Test func reuseCanBeTurnedOff() {
    let cache = CredentialCache(rule: CacheRule(share: 0, marginSeconds: 300, maxEntries: 100))
    cache.store(credentials("A", expiresIn: 900), for: key("alice"), now: t0)
    #expect(cache.lookup(key("alice"), now: t0) == nil)
    #expect(cache.count == 0)
}

@Test func theCacheIsBounded() {
    let cache = CredentialCache(rule: CacheRule(share: 0.5, marginSeconds: 60, maxEntries: 50))
    for i in 0..<500 {
        cache.store(credentials("K\(i)", expiresIn: 900 + Double(i)), for: key("user\(i)"), now: t0)
        #expect(cache.count <= 50)
    }
    #expect(cache.lookup(key("user499"), now: t0) != nil, "the newest entry stays")
    #expect(cache.lookup(key("user0"), now: t0) == nil, "the one nearest to its end went first")
}

@Test func entriesCanBeForgotten() {
    let cache = CredentialCache(rule: CacheRule())
    cache.store(credentials("A", expiresIn: 900), for: key("alice"), now: t0)
    cache.store(credentials("B", expiresIn: 900), for: key("bob"), now: t0)
    cache.remove { key, _ in key.subject == "alice" }
    #expect(cache.lookup(key("alice"), now: t0) == nil)
    #expect(cache.lookup(key("bob"), now: t0) != nil)
}

// MARK: Secrets are never printed

@Test func secretsNeverAppearInDescriptions() {
    let keys = UpstreamKeys(accessKeyID: "LTAIexample", accessKeySecret: "TOP-SECRET-KEY-0123456789")
    let minted = UpstreamCredentials(accessKeyId: "STS.abc", accessKeySecret: "MINTED-SECRET-987", securityToken: "MINTED-TOKEN-654",
                                     expiration: t0)
    for text in [String(describing: keys), String(reflecting: keys), "\(keys)", dumped(keys)] {
        #expect(!text.contains("TOP-SECRET"))
        #expect(text.contains("LTAIexample"))
    }
    for text in [String(describing: minted), String(reflecting: minted), dumped(minted)] {
        #expect(!text.contains("MINTED-SECRET"))
        #expect(!text.contains("MINTED-TOKEN"))
    }
}

private func dumped(_ value: some Any) -> String {
    var text = ""
    dump(value, to: &text)
    return text
}

// MARK: Session policies

private let isolated = """
{
  "Statement": [
    {
      "Sid": "ReadWriteOwnSpace",
      "Action": ["oss:GetObject", "oss:PutObject"],
      "Effect": "Allow",
      "Resource": ["acs:oss:*:*:$BUCKET_NAME/${user}/*"]
    },
    {
      "Action": ["oss:ListObjects"],
      "Effect": "Allow",
      "Resource": ["acs:oss:*:*:$BUCKET_NAME"],
      "Condition": {"StringLike": {"oss:Prefix": ["${user}/*", "${jwt:team}/shared/*"]}, "StringEquals": {"acs:Referer": "${aws:UserAgent}"}}
    }
  ],
  "Version": "1"
}
"""

@Test func aRolePolicyIsRenderedPerCallerAndMinified() throws {
    let template = try SessionPolicyTemplate.make(text: isolated, file: "isolated.txt", variables: ["BUCKET_NAME": "photos"])
    #expect(template.variables == ["aws:username", "jwt:team"])
    let alice = try template.render(["aws:username": "alice", "jwt:team": "red"])
    #expect(alice == #"{"Statement":[{"Sid":"ReadWriteOwnSpace","Action":["oss:GetObject","oss:PutObject"],"Effect":"Allow","Resource":["acs:oss:*:*:photos/alice/*"]},{"Action":["oss:ListObjects"],"Effect":"Allow","Resource":["acs:oss:*:*:photos"],"Condition":{"StringLike":{"oss:Prefix":["alice/*","red/shared/*"]},"StringEquals":{"acs:Referer":"${aws:UserAgent}"}}}],"Version":"1"}"#)
    #expect(template.fixedByteCount == alice.utf8.count - "alice".count * 2 - "red".count)
    // The rendering is the policy Tollgate's own engine reads, for the same user.
    _ = try Policy.load(text: alice, file: "rendered")
}

@Test func valuesAreEscapedIntoTheirStrings() throws {
    let template = try SessionPolicyTemplate.make(text: #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetObject","Resource":"acs:oss:*:*:b/${user}"}]}"#, file: "f")
    #expect(try template.render(["aws:username": #"a"b"#]) == #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetObject","Resource":"acs:oss:*:*:b/a\"b"}]}"#)
}

@Test func aMissingVariableIsRefusedNotSentUnfilled() throws {
    let template = try SessionPolicyTemplate.make(text: isolated, file: "isolated.txt", variables: ["BUCKET_NAME": "photos"])
    #expect(throws: SessionPolicyRenderError.missingVariable("jwt:team")) {
        try template.render(["aws:username": "alice"])
    }
}

@Test func variablesOutsideResourcesAndConditionsStayAsWritten() throws {
    let text = #"{"Version":"1","Statement":[{"Sid":"${user}","Effect":"Allow","Action":"oss:GetObject","Resource":"*"}]}"#
    let template = try SessionPolicyTemplate.make(text: text, file: "f")
    #expect(template.variables.isEmpty)
    #expect(try template.render([:]) == text)
}

// MARK: policy check for upstreams

@Test func policyCheckWarnsOfTheOtherDialectAndOfSize() throws {
    let iam = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","oss:PutObject"],"Resource":["arn:aws:s3:::b/*","acs:oss:*:*:b/*"]}]}"#
    let template = try SessionPolicyTemplate.make(text: iam, file: "p.json")
    let forAliyun = UpstreamPolicyCheck.warnings(template, file: "p.json", upstream: "aliyun", kind: .aliyunSTS, maxPolicyBytes: 2048)
    #expect(forAliyun.map(\.message).count == 3)
    #expect(forAliyun.allSatisfy { $0.severity == .warning })
    #expect(forAliyun.contains { $0.message.hasPrefix("Version \"2012-10-17\"") })
    #expect(forAliyun.contains { $0.message.hasPrefix("action \"s3:GetObject\"") && $0.message.contains("aliyun (aliyun-sts)") })
    #expect(forAliyun.contains { $0.message.hasPrefix("resource \"arn:aws:s3:::b/*\"") })
    let forAWS = UpstreamPolicyCheck.warnings(template, file: "p.json", upstream: "aws", kind: .awsSTS, maxPolicyBytes: 2048)
    #expect(forAWS.count == 2)
    #expect(forAWS.contains { $0.message.hasPrefix("action \"oss:PutObject\"") && $0.line == 1 })
    let tooSmall = UpstreamPolicyCheck.warnings(template, file: "p.json", upstream: "aws", kind: .awsSTS, maxPolicyBytes: 64)
    #expect(tooSmall.contains { $0.message.contains("takes at most 64") })
}
