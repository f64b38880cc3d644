import Foundation
import Testing
@testable import TollgatePolicy

/// One row: a condition block on an Allow statement, the request's values for the key
/// (nil = key absent) and whether the request is allowed.
struct CondCase: CustomTestStringConvertible, Sendable {
    var op: String
    var key: String
    var values: String
    var request: [String]?
    var allowed: Bool
    var contextKey: String?

    init(_ op: String, _ key: String, _ values: String, _ request: [String]?, _ allowed: Bool, contextKey: String? = nil) {
        self.op = op
        self.key = key
        self.values = values
        self.request = request
        self.allowed = allowed
        self.contextKey = contextKey
    }

    var testDescription: String {
        "\(op) \(key) \(values) with \(request.map { "\($0)" } ?? "missing key") → \(allowed ? "allow" : "deny")"
    }
}

func conditionPolicy(_ op: String, _ key: String, _ values: String, effect: String = "Allow") throws -> Policy {
    let text = #"{"Version":"2012-10-17","Statement":[{"Effect":"\#(effect)","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"\#(op)":{"\#(key)":\#(values)}}}]}"#
    return try Policy.load(text: text, file: "cond.json")
}

let conditionCases: [CondCase] = [
    // StringEquals: case-sensitive, values ORed, `*` literal, missing key false.
    CondCase("StringEquals", "aws:username", #""alice""#, ["alice"], true),
    CondCase("StringEquals", "aws:username", #""alice""#, ["bob"], false),
    CondCase("StringEquals", "aws:username", #""alice""#, ["Alice"], false),
    CondCase("StringEquals", "aws:username", #""alice""#, nil, false),
    CondCase("StringEquals", "aws:username", #"["bob","alice"]"#, ["alice"], true),
    CondCase("StringEquals", "aws:username", #""a*""#, ["abc"], false),
    CondCase("StringEquals", "aws:username", #""a*""#, ["a*"], true),
    CondCase("StringEquals", "aws:username", #""${aws:userid}""#, ["u1"], true, contextKey: "both"),
    // StringNotEquals: true when the value matches none; true when missing.
    CondCase("StringNotEquals", "aws:username", #""alice""#, ["bob"], true),
    CondCase("StringNotEquals", "aws:username", #""alice""#, ["alice"], false),
    CondCase("StringNotEquals", "aws:username", #""alice""#, nil, true),
    CondCase("StringNotEquals", "aws:username", #"["alice","bob"]"#, ["bob"], false),
    CondCase("StringNotEquals", "aws:username", #"["alice","bob"]"#, ["carol"], true),
    // IgnoreCase variants.
    CondCase("StringEqualsIgnoreCase", "aws:username", #""ALICE""#, ["alice"], true),
    CondCase("StringEqualsIgnoreCase", "aws:username", #""ALICE""#, ["bob"], false),
    CondCase("StringEqualsIgnoreCase", "aws:username", #""ALICE""#, nil, false),
    CondCase("StringNotEqualsIgnoreCase", "aws:username", #""ALICE""#, ["Alice"], false),
    CondCase("StringNotEqualsIgnoreCase", "aws:username", #""ALICE""#, ["bob"], true),
    CondCase("StringNotEqualsIgnoreCase", "aws:username", #""ALICE""#, nil, true),
    // StringLike / StringNotLike with * and ?, escapes.
    CondCase("StringLike", "aws:username", #""al*""#, ["alice"], true),
    CondCase("StringLike", "aws:username", #""al*""#, ["bob"], false),
    CondCase("StringLike", "aws:username", #""al*""#, ["Alice"], false),
    CondCase("StringLike", "aws:username", #""al*""#, nil, false),
    CondCase("StringLike", "aws:username", #""a?ice""#, ["alice"], true),
    CondCase("StringLike", "aws:username", #""a?ice""#, ["aliice"], false),
    CondCase("StringLike", "aws:username", #""${*}x""#, ["*x"], true),
    CondCase("StringLike", "aws:username", #""${*}x""#, ["ax"], false),
    CondCase("StringLike", "aws:username", #""${?}${$}""#, ["?$"], true),
    CondCase("StringLike", "aws:username", #""${?}${$}""#, ["a$"], false),
    CondCase("StringNotLike", "aws:username", #""al*""#, ["alice"], false),
    CondCase("StringNotLike", "aws:username", #""al*""#, ["bob"], true),
    CondCase("StringNotLike", "aws:username", #""al*""#, nil, true),
    // …IfExists: a missing key passes; a present key is tested.
    CondCase("StringEqualsIfExists", "aws:username", #""alice""#, nil, true),
    CondCase("StringEqualsIfExists", "aws:username", #""alice""#, ["bob"], false),
    CondCase("StringEqualsIfExists", "aws:username", #""alice""#, ["alice"], true),
    CondCase("StringLikeIfExists", "aws:useragent", #""aws-cli/*""#, nil, true),
    CondCase("StringLikeIfExists", "aws:useragent", #""aws-cli/*""#, ["curl/8"], false),
    // Numeric on s3:max-keys.
    CondCase("NumericEquals", "s3:max-keys", #""10""#, ["10"], true),
    CondCase("NumericEquals", "s3:max-keys", "10", ["10.0"], true),
    CondCase("NumericEquals", "s3:max-keys", "10", ["11"], false),
    CondCase("NumericEquals", "s3:max-keys", "10", nil, false),
    CondCase("NumericNotEquals", "s3:max-keys", "10", ["10"], false),
    CondCase("NumericNotEquals", "s3:max-keys", "10", ["11"], true),
    CondCase("NumericNotEquals", "s3:max-keys", "10", nil, true),
    CondCase("NumericLessThan", "s3:max-keys", "100", ["99"], true),
    CondCase("NumericLessThan", "s3:max-keys", "100", ["100"], false),
    CondCase("NumericLessThan", "s3:max-keys", "100", nil, false),
    CondCase("NumericLessThan", "s3:max-keys", "100", ["abc"], false),
    CondCase("NumericLessThanEquals", "s3:max-keys", "100", ["100"], true),
    CondCase("NumericLessThanEquals", "s3:max-keys", "100", ["101"], false),
    CondCase("NumericGreaterThan", "s3:max-keys", "10", ["11"], true),
    CondCase("NumericGreaterThan", "s3:max-keys", "10", ["10"], false),
    CondCase("NumericGreaterThanEquals", "s3:max-keys", "10", ["10"], true),
    CondCase("NumericGreaterThanEquals", "s3:max-keys", "10", ["9"], false),
    CondCase("NumericGreaterThanEquals", "s3:max-keys", "10", nil, false),
    CondCase("NumericLessThanIfExists", "s3:max-keys", "100", nil, true),
    CondCase("NumericLessThanIfExists", "s3:max-keys", "100", ["1000"], false),
    // Date on aws:CurrentTime: ISO 8601 (with offsets) and epoch seconds on either side.
    CondCase("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2025-12-31T23:59:59Z"], true),
    CondCase("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2026-01-01T00:00:00Z"], false),
    CondCase("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["1767225599"], true),
    CondCase("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["1767225600"], false),
    CondCase("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, nil, false),
    CondCase("DateLessThanEquals", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2026-01-01T00:00:00Z"], true),
    CondCase("DateLessThanEquals", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2026-01-01T00:00:01Z"], false),
    CondCase("DateGreaterThan", "aws:CurrentTime", #""2026-01-01""#, ["2026-01-02T00:00:00Z"], true),
    CondCase("DateGreaterThan", "aws:CurrentTime", #""2026-01-01""#, ["2025-06-01T00:00:00Z"], false),
    CondCase("DateGreaterThan", "aws:CurrentTime", #""2026-01-01""#, nil, false),
    CondCase("DateGreaterThanEquals", "aws:CurrentTime", "1767225600", ["2026-01-01T00:00:00Z"], true),
    CondCase("DateGreaterThanEquals", "aws:CurrentTime", "1767225600", ["2025-12-31T23:59:59.5Z"], false),
    CondCase("DateEquals", "aws:CurrentTime", #""2026-01-01T08:00:00+08:00""#, ["2026-01-01T00:00:00Z"], true),
    CondCase("DateEquals", "aws:CurrentTime", #""2026-01-01T08:00:00+08:00""#, ["2026-01-01T08:00:00Z"], false),
    CondCase("DateNotEquals", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2026-01-02T00:00:00Z"], true),
    CondCase("DateNotEquals", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, ["1767225600"], false),
    CondCase("DateNotEquals", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, nil, true),
    CondCase("DateLessThanIfExists", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#, nil, true),
    CondCase("NumericGreaterThan", "aws:EpochTime", "1767225600", ["1767225601"], true),
    CondCase("DateGreaterThan", "aws:EpochTime", "1767225600", ["1767225600"], false),
    // Bool on aws:SecureTransport.
    CondCase("Bool", "aws:SecureTransport", #""true""#, ["true"], true),
    CondCase("Bool", "aws:SecureTransport", "true", ["false"], false),
    CondCase("Bool", "aws:SecureTransport", "true", nil, false),
    CondCase("Bool", "aws:SecureTransport", #""false""#, ["false"], true),
    CondCase("Bool", "aws:SecureTransport", #""false""#, ["TRUE"], false),
    CondCase("BoolIfExists", "aws:SecureTransport", "true", nil, true),
    CondCase("BoolIfExists", "aws:SecureTransport", "true", ["false"], false),
    // IpAddress / NotIpAddress, IPv4 and IPv6 CIDR.
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["10.1.2.3"], true),
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["11.0.0.1"], false),
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, nil, false),
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["::1"], false),
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["::ffff:10.0.0.1"], true),
    CondCase("IpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["not-an-ip"], false),
    CondCase("IpAddress", "aws:SourceIp", #""192.168.1.10""#, ["192.168.1.10"], true),
    CondCase("IpAddress", "aws:SourceIp", #""192.168.1.10""#, ["192.168.1.11"], false),
    CondCase("IpAddress", "aws:SourceIp", #""203.0.113.0/25""#, ["203.0.113.127"], true),
    CondCase("IpAddress", "aws:SourceIp", #""203.0.113.0/25""#, ["203.0.113.128"], false),
    CondCase("IpAddress", "aws:SourceIp", #"["10.0.0.0/8","192.168.0.0/16"]"#, ["192.168.5.5"], true),
    CondCase("IpAddress", "aws:SourceIp", #""0.0.0.0/0""#, ["8.8.8.8"], true),
    CondCase("IpAddress", "aws:SourceIp", #""2001:db8::/32""#, ["2001:db8::1"], true),
    CondCase("IpAddress", "aws:SourceIp", #""2001:db8::/32""#, ["2001:db9::1"], false),
    CondCase("IpAddress", "aws:SourceIp", #""2001:db8::/32""#, ["10.0.0.1"], false),
    CondCase("IpAddress", "aws:SourceIp", #""2001:db8:0:0:8000::/65""#, ["2001:db8::8000:0:0:1"], true),
    CondCase("IpAddress", "aws:SourceIp", #""2001:db8:0:0:8000::/65""#, ["2001:db8::1"], false),
    CondCase("NotIpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["10.1.1.1"], false),
    CondCase("NotIpAddress", "aws:SourceIp", #""10.0.0.0/8""#, ["8.8.8.8"], true),
    CondCase("NotIpAddress", "aws:SourceIp", #""10.0.0.0/8""#, nil, true),
    CondCase("IpAddressIfExists", "aws:SourceIp", #""10.0.0.0/8""#, nil, true),
    CondCase("IpAddressIfExists", "aws:SourceIp", #""10.0.0.0/8""#, ["8.8.8.8"], false),
    // Null: true means "key absent", false "key present".
    CondCase("Null", "aws:username", "true", nil, true),
    CondCase("Null", "aws:username", "true", ["alice"], false),
    CondCase("Null", "aws:username", #""false""#, ["alice"], true),
    CondCase("Null", "aws:username", #""false""#, nil, false),
    // Set qualifiers on a multi-valued key.
    CondCase("ForAnyValue:StringEquals", "jwt:groups", #"["admin"]"#, ["dev", "admin"], true),
    CondCase("ForAnyValue:StringEquals", "jwt:groups", #"["admin"]"#, ["dev"], false),
    CondCase("ForAnyValue:StringEquals", "jwt:groups", #"["admin"]"#, nil, false),
    CondCase("ForAnyValue:StringEquals", "jwt:groups", #"["admin"]"#, [], false),
    CondCase("ForAnyValue:StringLike", "jwt:groups", #"["ad*"]"#, ["dev", "admins"], true),
    CondCase("ForAnyValue:StringNotEquals", "jwt:groups", #"["admin"]"#, ["admin", "dev"], true),
    CondCase("ForAnyValue:StringNotEquals", "jwt:groups", #"["admin"]"#, ["admin"], false),
    CondCase("ForAnyValue:StringEqualsIfExists", "jwt:groups", #"["admin"]"#, nil, true),
    CondCase("ForAllValues:StringEquals", "jwt:groups", #"["dev","ops"]"#, ["dev", "ops"], true),
    CondCase("ForAllValues:StringEquals", "jwt:groups", #"["dev","ops"]"#, ["dev", "admin"], false),
    CondCase("ForAllValues:StringEquals", "jwt:groups", #"["dev","ops"]"#, nil, true),
    CondCase("ForAllValues:StringEquals", "jwt:groups", #"["dev","ops"]"#, [], true),
    CondCase("ForAllValues:StringNotEquals", "jwt:groups", #"["admin"]"#, ["dev", "ops"], true),
    CondCase("ForAllValues:StringNotEquals", "jwt:groups", #"["admin"]"#, ["dev", "admin"], false),
    CondCase("ForAllValues:StringLike", "jwt:groups", #"["team-*"]"#, ["team-a", "team-b"], true),
    CondCase("ForAllValues:StringLike", "jwt:groups", #"["team-*"]"#, ["team-a", "ops"], false),
    CondCase("ForAnyValue:NumericGreaterThan", "jwt:levels", "5", ["1", "7"], true),
    CondCase("ForAllValues:NumericGreaterThan", "jwt:levels", "5", ["1", "7"], false),
    // Without a qualifier a negated operator must hold for every value of a multi-valued key.
    CondCase("StringNotEquals", "jwt:groups", #""admin""#, ["dev", "admin"], false),
    CondCase("StringEquals", "jwt:groups", #""admin""#, ["dev", "admin"], true),
    // Keys are case-insensitive and take both spellings (policy key vs request key).
    CondCase("IpAddress", "acs:SourceIp", #""10.0.0.0/8""#, ["10.0.0.1"], true, contextKey: "aws:sourceip"),
    CondCase("IpAddress", "AWS:SOURCEIP", #""10.0.0.0/8""#, ["10.0.0.1"], true, contextKey: "acs:SourceIp"),
    CondCase("Bool", "acs:SecureTransport", "true", ["true"], true, contextKey: "aws:SecureTransport"),
    CondCase("DateLessThan", "acs:CurrentTime", #""2026-01-01T00:00:00Z""#, ["2025-01-01T00:00:00Z"], true, contextKey: "aws:CurrentTime"),
    CondCase("StringLike", "acs:UserAgent", #""aliyun-sdk-*""#, ["aliyun-sdk-android/2.9"], true, contextKey: "aws:UserAgent"),
    CondCase("StringLike", "aws:Referer", #""https://app.example.com/*""#, ["https://app.example.com/x"], true, contextKey: "acs:Referer"),
    CondCase("StringLike", "oss:Prefix", #""alice/*""#, ["alice/photos/"], true, contextKey: "s3:prefix"),
    CondCase("StringEquals", "s3:prefix", #""alice/""#, ["alice/"], true, contextKey: "oss:Prefix"),
    CondCase("StringEquals", "oss:Delimiter", #""/""#, ["/"], true, contextKey: "s3:delimiter"),
    CondCase("NumericLessThanEquals", "oss:MaxKeys", "100", ["100"], true, contextKey: "s3:max-keys"),
    CondCase("NumericLessThanEquals", "s3:max-keys", "100", ["101"], false, contextKey: "oss:MaxKeys"),
    CondCase("StringEquals", "aws:userid", #""u-1""#, ["u-1"], true, contextKey: "AWS:UserId"),
    CondCase("StringEquals", "jwt:sub", #""alice""#, ["alice"], true, contextKey: "JWT:SUB"),
]

@Suite("Condition operators")
struct ConditionTests {
    @Test("operator table", arguments: conditionCases)
    func operatorRow(_ c: CondCase) throws {
        let policy = try conditionPolicy(c.op, c.key, c.values)
        var context = PolicyContext()
        if let values = c.request {
            if c.contextKey == "both" {
                context.set(c.key, values: values)
                context.set("aws:userid", "u1")
                context.set("aws:username", "u1")
            } else {
                context.set(c.contextKey ?? c.key, values: values)
            }
        }
        let decision = policy.evaluate(.getObject, bucket: "b", key: "k", context: context)
        #expect(decision.isAllowed == c.allowed, "\(decision)")
    }

    @Test func keysAndOperatorsAreANDed() throws {
        let text = #"{"Version":"1","Statement":{"Effect":"Allow","Action":"oss:GetObject","Resource":"*","Condition":{"IpAddress":{"acs:SourceIp":"10.0.0.0/8"},"Bool":{"acs:SecureTransport":"true"},"StringEquals":{"aws:username":"alice","jwt:aud":"app"}}}}"#
        let p = try Policy.load(text: text, file: "p")
        let all = PolicyContext(["aws:SourceIp": "10.0.0.1", "aws:SecureTransport": "true", "aws:username": "alice", "jwt:aud": "app"])
        #expect(p.evaluate(.getObject, bucket: "b", key: "k", context: all).isAllowed)
        for dropped in ["aws:SourceIp", "aws:SecureTransport", "aws:username", "jwt:aud"] {
            var partial = PolicyContext()
            for (k, v) in ["aws:SourceIp": "10.0.0.1", "aws:SecureTransport": "true", "aws:username": "alice", "jwt:aud": "app"] where k != dropped {
                partial.set(k, v)
            }
            #expect(!p.evaluate(.getObject, bucket: "b", key: "k", context: partial).isAllowed, "without \(dropped)")
        }
    }

    @Test func contextTimeFromDate() throws {
        let p = try conditionPolicy("DateLessThan", "aws:CurrentTime", #""2026-01-01T00:00:00Z""#)
        let before = PolicyContext(now: Date(timeIntervalSince1970: 1_767_225_599))
        let after = PolicyContext(now: Date(timeIntervalSince1970: 1_767_225_600))
        #expect(p.evaluate(.getObject, bucket: "b", key: "k", context: before).isAllowed)
        #expect(!p.evaluate(.getObject, bucket: "b", key: "k", context: after).isAllowed)
    }

    @Test(arguments: [
        ("StringEquals", "aws:username", "\"a\"", true), ("NumericLessThan", "aws:SourceIp", "\"1\"", false),
        ("IpAddress", "jwt:ip", "\"10.0.0.0/8\"", false), ("DateLessThan", "aws:SourceIp", "\"2026-01-01\"", false),
        ("NumericEquals", "s3:max-keys", "\"1e2\"", true), ("NumericEquals", "s3:max-keys", "\"0x10\"", false),
        ("DateEquals", "aws:CurrentTime", "\"yesterday\"", false), ("IpAddress", "aws:SourceIp", "\"::1/129\"", false),
        ("ForAnyValue:Null", "aws:username", "\"true\"", false), ("StringLike", "jwt:sub", "[]", false),
        ("StringEquals", "aws:username", "null", false), ("StringLikeIfExists", "aws:username", "\"${jwt:sub}\"", true),
    ])
    func conditionLoadValidation(_ op: String, _ key: String, _ values: String, _ valid: Bool) {
        let text = #"{"Version":"1","Statement":{"Effect":"Allow","Action":"oss:*","Resource":"*","Condition":{"\#(op)":{"\#(key)":\#(values)}}}}"#
        #expect(diagnostics(text).isEmpty == valid, "\(diagnostics(text))")
    }
}
