import Foundation
import Testing
import TollgateUpstream

// Vectors: Alibaba's documented RPC signature example (DescribeRegions, key "testsecret"), and
// AssumeRole requests whose signatures were computed by Alibaba's own Python code
// (`alibabacloud_openapi_util.client.Client.get_rpcsignature`, from PyPI), not by us.

private let documented: [(name: String, value: String)] = [
    ("Timestamp", "2016-02-23T12:46:24Z"), ("Format", "XML"), ("AccessKeyId", "testid"), ("Action", "DescribeRegions"),
    ("SignatureMethod", "HMAC-SHA1"), ("SignatureNonce", "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf"), ("Version", "2014-05-26"),
    ("SignatureVersion", "1.0"),
]

@Test func documentedExampleStringToSignAndSignature() throws {
    let canonical = AliyunSTS.canonicalizedQuery(documented)
    #expect(canonical == "AccessKeyId=testid&Action=DescribeRegions&Format=XML&SignatureMethod=HMAC-SHA1&SignatureNonce=3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf&SignatureVersion=1.0&Timestamp=2016-02-23T12%3A46%3A24Z&Version=2014-05-26")
    let toSign = AliyunSTS.stringToSign(method: "GET", canonicalizedQuery: canonical)
    #expect(toSign == "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf%26SignatureVersion%3D1.0%26Timestamp%3D2016-02-23T12%253A46%253A24Z%26Version%3D2014-05-26")
    #expect(try AliyunSTS.signature(stringToSign: toSign, secret: "testsecret") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY=")
    // The same parameters POSTed, as Tollgate sends them (Alibaba's Python util: MxbnVAM4…).
    let post = AliyunSTS.stringToSign(method: "POST", canonicalizedQuery: canonical)
    #expect(try AliyunSTS.signature(stringToSign: post, secret: "testsecret") == "MxbnVAM4w6sft9xjVpe/GCKueuk=")
}

@Test(arguments: [
    ("abcXYZ019-_.~", "abcXYZ019-_.~"),
    ("a b", "a%20b"),
    ("a*b", "a%2Ab"),
    ("a+b", "a%2Bb"),
    ("/", "%2F"),
    ("é", "%C3%A9"),
    ("acs:ram::1:role/x", "acs%3Aram%3A%3A1%3Arole%2Fx"),
])
func percentEncodingIsAlibabas(input: String, expected: String) {
    #expect(AliyunSTS.canonicalizedQuery([("k", input)]) == "k=" + expected)
}

@Test func parametersAreSortedByName() {
    #expect(AliyunSTS.canonicalizedQuery([("b", "2"), ("B", "1"), ("a", "3"), ("A_b", "4")]) == "A_b=4&B=1&a=3&b=2")
}

private let assumeRole = AssumeRoleParameters(
    roleArn: "acs:ram::1234567890123456:role/app-upload", sessionName: "alice",
    policy: #"{"Version":"1","Statement":[{"Effect":"Allow","Action":["oss:PutObject","oss:GetObject"],"Resource":["acs:oss:*:*:photos/alice/*"]}]}"#,
    durationSeconds: 900)
private let keys = UpstreamKeys(accessKeyID: "LTAI5tExampleKeyId", accessKeySecret: "ExampleSecret0123456789abcdefghij")
private let at = Date(timeIntervalSince1970: 1_795_827_723)  // 2026-11-28T01:02:03Z

@Test func assumeRoleRequestIsSignedAsAlibabasSDKSignsIt() throws {
    let endpoint = try #require(UpstreamEndpoint("http://127.0.0.1:8080"))
    let request = try AliyunSTS.assumeRole(assumeRole, endpoint: endpoint, regionID: "cn-hangzhou", keys: keys, timestamp: at,
                                           nonce: "0123456789abcdef0123456789abcdef")
    #expect(request.method == "POST")
    #expect(request.url == "http://127.0.0.1:8080/")
    #expect(request.headers.first { $0.name == "Host" }?.value == "127.0.0.1:8080")
    let fields = Dictionary(uniqueKeysWithValues: request.formFields.map { ($0.name, $0.value) })
    #expect(fields["Action"] == "AssumeRole")
    #expect(fields["Version"] == "2015-04-01")
    #expect(fields["Format"] == "JSON")
    #expect(fields["SignatureMethod"] == "HMAC-SHA1")
    #expect(fields["SignatureVersion"] == "1.0")
    #expect(fields["Timestamp"] == "2026-11-28T01:02:03Z")
    #expect(fields["RoleArn"] == assumeRole.roleArn)
    #expect(fields["RoleSessionName"] == "alice")
    #expect(fields["Policy"] == assumeRole.policy)
    #expect(fields["DurationSeconds"] == "900")
    #expect(fields["RegionId"] == "cn-hangzhou")
    #expect(fields["Signature"] == "QaHAvqFmHx6rxdgzjA4Mn9twDe0=")
    #expect(!String(decoding: request.body, as: UTF8.self).contains(keys.accessKeySecret), "the secret never travels")
}

@Test func unicodeAndReservedCharactersSignAsAlibabasSDKSignsThem() throws {
    var parameters = AliyunSTS.assumeRoleParameters(assumeRole, accessKeyID: keys.accessKeyID, regionID: "cn-hangzhou", timestamp: at,
                                                    nonce: "0123456789abcdef0123456789abcdef")
    parameters = parameters.map { p in
        switch p.name {
        case "RoleSessionName": ("RoleSessionName", "z_e.r@o-~")
        case "Policy": ("Policy", #"{"a b":"é ü 日本 +&=%~*"}"#)
        default: p
        }
    }
    let toSign = AliyunSTS.stringToSign(method: "POST", canonicalizedQuery: AliyunSTS.canonicalizedQuery(parameters))
    #expect(try AliyunSTS.signature(stringToSign: toSign, secret: "s&cret with space") == "osSX8d3BXQGMUeS1HCxQ40ZYtS4=")
}

@Test func noncesAreFreshAndLongEnough() throws {
    let a = try AliyunSTS.newNonce(), b = try AliyunSTS.newNonce()
    #expect(a != b)
    #expect(a.count == 32)
}

// MARK: Answers

@Test func documentedAnswerGivesItsCredentialsFieldForField() throws {
    let body = #"""
    {"RequestId":"6894B13B-6D71-4EF5-88FA-F32781734A7F","AssumedRoleUser":{"Arn":"acs:ram::123456789012****:role/adminrole/alice","AssumedRoleId":"34458433936495****:alice"},
     "Credentials":{"SecurityToken":"CAES+wMIARKAAZhjH0EUOIhJMQBMjRywXq7MQ/cjLYg80Aho1ek0Jm63XMhr9Oc5s=","Expiration":"2015-04-09T11:52:19Z","AccessKeySecret":"wyLTSmsyPGP1ohvvw8xYgB29dlGI8KMiH2pK","AccessKeyId":"STS.L4aBSCSJVMuKg5U1"}}
    """#
    let credentials = try AliyunSTS.parseAssumeRole(status: 200, body: Array(body.utf8), upstream: "aliyun").get()
    #expect(credentials.accessKeyId == "STS.L4aBSCSJVMuKg5U1")
    #expect(credentials.accessKeySecret == "wyLTSmsyPGP1ohvvw8xYgB29dlGI8KMiH2pK")
    #expect(credentials.securityToken == "CAES+wMIARKAAZhjH0EUOIhJMQBMjRywXq7MQ/cjLYg80Aho1ek0Jm63XMhr9Oc5s=")
    #expect(credentials.expiration == Date(timeIntervalSince1970: 1_428_580_339))
}

@Test(arguments: [
    (400, #"{"RequestId":"r","HostId":"sts.example.com","Code":"Throttling.User","Message":"Request was denied due to user flow control."}"#,
     UpstreamFailure.Kind.throttled, "Throttling.User", 503, true),
    (404, #"{"RequestId":"r","Code":"InvalidAccessKeyId.NotFound","Message":"Specified access key is not found."}"#,
     .refused, "InvalidAccessKeyId.NotFound", 502, false),
    (400, #"{"RequestId":"r","Code":"SignatureDoesNotMatch","Message":"Specified signature is not matched with our calculation."}"#,
     .refused, "SignatureDoesNotMatch", 502, false),
    (500, #"{"RequestId":"r","Code":"InternalError","Message":"The request processing has failed due to some unknown error."}"#,
     .refused, "InternalError", 502, true),
    (503, #"{"Code":"ServiceUnavailable","Message":"down"}"#, .unavailable, "ServiceUnavailable", 503, true),
    (502, "<html>bad gateway</html>", .refused, "UpstreamHTTP502", 502, true),
    (200, "not json", .malformed, "UpstreamMalformedAnswer", 502, false),
    (200, #"{"Credentials":{"AccessKeyId":"STS.x"}}"#, .malformed, "UpstreamMalformedAnswer", 502, false),
    (200, #"{"Credentials":{"AccessKeyId":"STS.x","AccessKeySecret":"s","SecurityToken":"t","Expiration":"yesterday"}}"#,
     .malformed, "UpstreamMalformedAnswer", 502, false),
])
func errorAnswersKeepTheUpstreamsCode(status: Int, body: String, kind: UpstreamFailure.Kind, code: String, httpStatus: Int, retryable: Bool) {
    guard case .failure(let failure) = AliyunSTS.parseAssumeRole(status: status, body: Array(body.utf8), upstream: "aliyun") else {
        Issue.record("expected a failure")
        return
    }
    #expect(failure.kind == kind)
    #expect(failure.code == code)
    #expect(failure.httpStatus == httpStatus)
    #expect(failure.isRetryable == retryable)
    #expect(failure.message.contains("aliyun"), "the message names the upstream")
}

@Test func anOversizedAnswerIsNotRead() {
    let body = [UInt8](repeating: UInt8(ascii: " "), count: maxUpstreamAnswerBytes + 1)
    guard case .failure(let failure) = AliyunSTS.parseAssumeRole(status: 200, body: body, upstream: "aliyun") else {
        Issue.record("expected a failure")
        return
    }
    #expect(failure.kind == .malformed)
}

@Test func upstreamMessagesAreCleanedAndCut() {
    let failure = UpstreamFailure.answered(upstream: "u", status: 400, code: "Bad\nCode\u{1b}[31m", message: String(repeating: "x", count: 1000) + "\n")
    #expect(failure.code == "BadCode31m")
    #expect(!failure.message.contains("\n"))
    #expect(failure.message.utf8.count < 400)
}
