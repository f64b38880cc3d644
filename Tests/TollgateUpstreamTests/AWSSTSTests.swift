import Foundation
import Testing
import TollgateUpstream

// Signatures computed by botocore's own `SigV4Auth(credentials, "sts", "us-east-1")` for the
// same request at the same time, not by us.

private let request = AssumeRoleParameters(
    roleArn: "arn:aws:iam::123456789012:role/app-upload", sessionName: "alice",
    policy: #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::photos/alice/*"}]}"#,
    durationSeconds: 900)
private let keys = UpstreamKeys(accessKeyID: "AKIDEXAMPLE", accessKeySecret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
private let at = Date(timeIntervalSince1970: 1_795_827_723)  // 2026-11-28T01:02:03Z

@Test(arguments: [
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "cd4065569cdda2a115046a8961d40dad685a42b2bcdc0c7c56a7ca505724bd77"),
    ("https://sts.us-east-1.example.com/", "sts.us-east-1.example.com", "87af47ea97f37033437cf201639d07ba4604e8a724bed71a44d2e8d78442f065"),
])
func assumeRoleIsSignedAsBotocoreSignsIt(endpoint: String, host: String, signature: String) throws {
    let endpoint = try #require(UpstreamEndpoint(endpoint))
    let signed = try AWSSTS.assumeRole(request, endpoint: endpoint, region: "us-east-1", keys: keys, timestamp: at)
    #expect(String(decoding: signed.body, as: UTF8.self) == "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fapp-upload&RoleSessionName=alice&DurationSeconds=900&Policy=%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22s3%3A%2A%22%2C%22Resource%22%3A%22arn%3Aaws%3As3%3A%3A%3Aphotos%2Falice%2F%2A%22%7D%5D%7D")
    #expect(signed.headers.first { $0.name == "Host" }?.value == host)
    #expect(signed.headers.first { $0.name == "X-Amz-Date" }?.value == "20261128T010203Z")
    #expect(signed.headers.first { $0.name == "Authorization" }?.value
        == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261128/us-east-1/sts/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=\(signature)")
}

@Test func documentedAnswerGivesItsCredentials() throws {
    let body = """
    <AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
      <AssumeRoleResult>
        <SourceIdentity>DevUser123</SourceIdentity>
        <AssumedRoleUser>
          <Arn>arn:aws:sts::123456789012:assumed-role/demo/John</Arn>
          <AssumedRoleId>ARO123EXAMPLE123:John</AssumedRoleId>
        </AssumedRoleUser>
        <Credentials>
          <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW</SessionToken>
          <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
          <Expiration>2019-11-09T13:34:41Z</Expiration>
          <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
        </Credentials>
        <PackedPolicySize>8</PackedPolicySize>
      </AssumeRoleResult>
      <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
    </AssumeRoleResponse>
    """
    let credentials = try AWSSTS.parseAssumeRole(status: 200, body: Array(body.utf8), upstream: "aws").get()
    #expect(credentials.accessKeyId == "ASIAIOSFODNN7EXAMPLE")
    #expect(credentials.accessKeySecret == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY")
    #expect(credentials.securityToken == "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW")
    #expect(credentials.expiration == Date(timeIntervalSince1970: 1_573_306_481))
}

@Test func fractionalExpirationsAreRoundedDown() throws {
    let body = "<?xml version=\"1.0\"?><AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2019-11-09T13:34:41.999Z</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>"
    #expect(try AWSSTS.parseAssumeRole(status: 200, body: Array(body.utf8), upstream: "aws").get().expiration
        == Date(timeIntervalSince1970: 1_573_306_481))
}

@Test(arguments: [
    (400, "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>x</RequestId></ErrorResponse>",
     UpstreamFailure.Kind.throttled, "Throttling", 503),
    (403, "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User is not authorized to perform: sts:AssumeRole</Message></Error></ErrorResponse>",
     .refused, "AccessDenied", 502),
    (403, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><RequestId>tx0</RequestId><HostId>h</HostId></Error>",
     .refused, "AccessDenied", 502),
    (403, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message><Type>Sender</Type></Error></Errors></ErrorResponse>",
     .refused, "SignatureDoesNotMatch", 502),
    (400, "<ErrorResponse><Error><Code>PackedPolicyTooLarge</Code><Message>too big</Message></Error></ErrorResponse>",
     .refused, "PackedPolicyTooLarge", 502),
    (500, "oops", .refused, "UpstreamHTTP500", 502),
    (200, "<AssumeRoleResponse><AssumeRoleResult/></AssumeRoleResponse>", .malformed, "UpstreamMalformedAnswer", 502),
    (200, "<!DOCTYPE x [<!ENTITY a \"b\">]><x>&a;</x>", .malformed, "UpstreamMalformedAnswer", 502),
])
func errorAnswersKeepTheUpstreamsCode(status: Int, body: String, kind: UpstreamFailure.Kind, code: String, httpStatus: Int) {
    guard case .failure(let failure) = AWSSTS.parseAssumeRole(status: status, body: Array(body.utf8), upstream: "aws") else {
        Issue.record("expected a failure")
        return
    }
    #expect(failure.kind == kind)
    #expect(failure.code == code)
    #expect(failure.httpStatus == httpStatus)
}

@Test func anAnswerWithTooManyElementsIsNotRead() {
    let body = "<AssumeRoleResponse>" + String(repeating: "<x/>", count: 100) + "</AssumeRoleResponse>"
    guard case .failure(let failure) = AWSSTS.parseAssumeRole(status: 200, body: Array(body.utf8), upstream: "aws") else {
        Issue.record("expected a failure")
        return
    }
    #expect(failure.kind == .malformed)
}

@Test(arguments: [
    ("http://127.0.0.1:8000", "http", "127.0.0.1", 8000, "127.0.0.1:8000"),
    ("https://STS.example.com/", "https", "sts.example.com", nil, "sts.example.com"),
    ("https://sts.example.com:443", "https", "sts.example.com", 443, "sts.example.com"),
    ("http://[::1]:9000", "http", "[::1]", 9000, "[::1]:9000"),
] as [(String, String, String, Int?, String)])
func endpointsParse(text: String, scheme: String, host: String, port: Int?, hostHeader: String) throws {
    let endpoint = try #require(UpstreamEndpoint(text))
    #expect(endpoint.scheme == scheme)
    #expect(endpoint.host == host)
    #expect(endpoint.port == port)
    #expect(endpoint.hostHeader == hostHeader)
}

@Test(arguments: ["ftp://x", "http://", "http://host/path", "https://user@host", "http://host:0", "http://host:99999", "host:80",
                  "http://host?x=1"])
func badEndpointsAreRefused(text: String) {
    #expect(UpstreamEndpoint(text) == nil)
}
