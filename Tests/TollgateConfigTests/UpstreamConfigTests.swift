import Foundation
import Testing
@testable import TollgateConfig
import TollgateUpstream

private func parse(_ json: String, environment: [String: String] = [:]) throws -> TollgateConfig {
    try TollgateConfig.parse(Data(json.utf8), path: "/etc/tollgate/config.json", environment: environment)
}

private func keyFiles() throws -> (directory: String, id: String, secret: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-upstream-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try "LTAI5tExample\n".write(toFile: directory + "/ak", atomically: true, encoding: .utf8)
    try "upstream-secret-value\n".write(toFile: directory + "/sk", atomically: true, encoding: .utf8)
    return (directory, directory + "/ak", directory + "/sk")
}

@Test func upstreamRolesAreReadWithTheirKeysFromFilesAndTheEnvironment() throws {
    let files = try keyFiles()
    defer { try? FileManager.default.removeItem(atPath: files.directory) }
    let config = try parse("""
        {"PolicyFile": "p.txt",
         "Upstreams": {"aliyun": {"Type": "aliyun-sts", "Endpoint": "https://sts.example.com", "Region": "cn-hangzhou",
                                  "AccessKeyIDFile": "\(files.id)", "AccessKeySecretFile": "\(files.secret)", "CacheShare": 0.25},
                       "aws": {"Type": "aws-sts", "Endpoint": "http://127.0.0.1:9999", "AccessKeyIDEnv": "UP_AK", "AccessKeySecretEnv": "UP_SK",
                               "TimeoutMs": 1500, "MaxAttempts": 2, "MaxPolicyBytes": 4096}},
         "Roles": {"photos": {"PolicyFile": "u.txt", "Upstream": "aliyun", "RoleArn": "acs:ram::1234567890:role/app-upload", "MaxSessionSeconds": 3600},
                   "archive": {"PolicyFile": "a.txt", "Upstream": "aws", "RoleArn": "arn:aws:iam::123456789012:role/app"},
                   "rgw": {"PolicyFile": "a.txt", "Upstream": "aws", "RoleArn": "arn:aws:iam:::role/tollgate-app"},
                   "local": "l.txt"}}
        """, environment: ["UP_AK": "AKIDEXAMPLE", "UP_SK": "env-secret"])
    let aliyun = try #require(config.upstream.upstreams["aliyun"])
    #expect(aliyun.kind == .aliyunSTS)
    #expect(aliyun.keys == UpstreamKeys(accessKeyID: "LTAI5tExample", accessKeySecret: "upstream-secret-value"))
    #expect(aliyun.cache.share == 0.25)
    #expect(aliyun.timeoutMilliseconds == 5000)
    #expect(aliyun.maxPolicyBytes == 2048)
    let aws = try #require(config.upstream.upstreams["aws"])
    #expect(aws.keys == UpstreamKeys(accessKeyID: "AKIDEXAMPLE", accessKeySecret: "env-secret"))
    #expect(aws.signingRegion == "us-east-1")
    #expect(aws.retry.maxAttempts == 2 && aws.timeoutMilliseconds == 1500 && aws.maxPolicyBytes == 4096)
    #expect(config.upstream.roles["photos"] == UpstreamRole(upstream: "aliyun", roleArn: "acs:ram::1234567890:role/app-upload"))
    #expect(config.upstream.roles["rgw"]?.roleArn == "arn:aws:iam:::role/tollgate-app")
    #expect(config.upstream.roles["local"] == nil, "roles mix: local stays Tollgate's")
    #expect(config.roleMaxSessionSeconds["photos"] == 3600)
    #expect(config.upstream.keyFiles.sorted() == [files.id, files.secret].sorted())
    #expect(config.unknownKeys.isEmpty)
    // Keys never print.
    #expect(!"\(config.upstream)".contains("upstream-secret-value"))
    #expect(!"\(config.upstream)".contains("env-secret"))
}

@Test("upstream mistakes are config errors that name the key", arguments: [
    (#""Roles": {"photos": {"PolicyFile": "u", "Upstream": "alibaba", "RoleArn": "acs:ram::1:role/r"}}"#,
     #"Roles.photos.Upstream names the unknown upstream "alibaba" (configured: aws)"#),
    (#""Roles": {"photos": {"PolicyFile": "u", "RoleArn": "acs:ram::1:role/r"}}"#, "Roles.photos.RoleArn needs Upstream"),
    (#""Roles": {"photos": {"PolicyFile": "u", "Upstream": "aws"}}"#, #"Roles.photos.Upstream "aws" needs RoleArn"#),
    (#""Roles": {"photos": {"PolicyFile": "u", "Upstream": "aws", "RoleArn": "acs:ram::1:role/r"}}"#,
     #"Roles.photos.RoleArn "acs:ram::1:role/r" is not a role ARN for aws-sts"#),
    (#""Upstreams": {"x": {"Type": "gcp-sts", "Endpoint": "https://a"}}"#, "Upstreams.x.Type must be one of aliyun-sts, aws-sts"),
    (#""Upstreams": {"x": {"Type": "aws-sts", "Endpoint": "sts.example.com"}}"#, "Upstreams.x.Endpoint must be an http:// or https:// URL"),
    (#""Upstreams": {"x": {"Type": "aws-sts", "Endpoint": "https://a"}}"#, "Upstreams.x.AccessKeyIDFile or AccessKeyIDEnv is required"),
    (#""Upstreams": {"x": {"Type": "aws-sts", "Endpoint": "https://a", "AccessKeyIDEnv": "NOPE", "AccessKeySecretEnv": "UP_SK"}}"#,
     "Upstreams.x.AccessKeyIDEnv: the environment variable NOPE is not set"),
    (#""Upstreams": {"x": {"Type": "aws-sts", "Endpoint": "https://a", "AccessKeyIDEnv": "UP_AK", "AccessKeySecretEnv": "UP_SK", "AccessKeySecret": "inline"}}"#,
     "Upstreams.x.AccessKeySecret is not a known key"),
    (#""Upstreams": {"x": {"Type": "aws-sts", "Endpoint": "https://a", "AccessKeyIDEnv": "UP_AK", "AccessKeySecretEnv": "UP_SK", "CacheShare": 1}}"#,
     "Upstreams.x.CacheShare must be a number from 0.0 to 0.9"),
    (#""AssumeRoleArn": "yes""#, "AssumeRoleArn must be true"),
    (#""AssumeRoleArn": true"#, "AssumeRoleArn: AccessKeyID and AccessKeySecret must hold the keys"),
])
func upstreamMistakes(member: String, message: String) throws {
    let base = #""Upstreams": {"aws": {"Type": "aws-sts", "Endpoint": "https://sts.example.com", "AccessKeyIDEnv": "UP_AK", "AccessKeySecretEnv": "UP_SK"}}"#
    let json = member.hasPrefix(#""Upstreams""#) ? "{\"PolicyFile\": \"p\", \(member)}" : "{\"PolicyFile\": \"p\", \(base), \(member)}"
    #expect {
        try parse(json, environment: ["UP_AK": "a", "UP_SK": "b"])
    } throws: { error in
        "\(error)".contains(message)
    }
}

@Test func aMissingKeyFileIsAConfigErrorNamingTheFile() throws {
    do {
        _ = try parse(#"{"PolicyFile": "p", "Upstreams": {"a": {"Type": "aliyun-sts", "Endpoint": "https://s", "AccessKeyIDFile": "secrets/ak", "AccessKeySecretFile": "secrets/sk"}}}"#)
        Issue.record("expected a config error")
    } catch let error as ConfigError {
        #expect(error.file == "/etc/tollgate/secrets/ak", "relative to config.json")
        #expect(error.message.hasPrefix("Upstreams.a.AccessKeyIDFile: cannot read the key file"))
    }
}

@Test func theReferenceConfigWithTheOptInAssumesItsRoleArn() throws {
    let config = try parse("""
        {"AccessKeyID": "LTAI5tSeed", "AccessKeySecret": "seedSecretOf30Characters000000", "RoleArn": "acs:ram::1234567890123456:role/app-upload",
         "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt", "AssumeRoleArn": true}
        """)
    let upstream = try #require(config.upstream.upstreams[TollgateConfig.seedUpstreamName])
    #expect(upstream.kind == .aliyunSTS)
    #expect(upstream.endpoint.url == "https://sts.aliyuncs.com/")
    #expect(upstream.region == "cn-hangzhou")
    #expect(upstream.keys == UpstreamKeys(accessKeyID: "LTAI5tSeed", accessKeySecret: "seedSecretOf30Characters000000"))
    #expect(config.upstream.roles["default"] == UpstreamRole(upstream: "default", roleArn: "acs:ram::1234567890123456:role/app-upload"))
    #expect(config.accessKeySecret.isEmpty && config.accessKeyID.isEmpty, "the gateway's root is generated, as for an empty secret")
    #expect(config.tokenExpireTime == 900)

    let endpoint = try parse("""
        {"AccessKeyID": "LTAI5tSeed", "AccessKeySecret": "s", "RoleArn": "acs:ram::1:role/r", "PolicyFile": "p",
         "AssumeRoleArn": {"Endpoint": "http://127.0.0.1:8080"}}
        """)
    #expect(endpoint.upstream.upstreams["default"]?.endpoint.url == "http://127.0.0.1:8080/")

    let fromEnvironment = try parse(#"{"AccessKeyID": "", "AccessKeySecret": "", "RoleArn": "acs:ram::1:role/r", "PolicyFile": "p", "AssumeRoleArn": true}"#,
                                    environment: ["ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAIenv", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "envsecret"])
    #expect(fromEnvironment.upstream.upstreams["default"]?.keys.accessKeyID == "LTAIenv")
}

@Test func withoutTheOptInRoleArnKeepsItsMeaning() throws {
    let config = try parse("""
        {"AccessKeyID": "TGROOT", "AccessKeySecret": "a-root-secret-of-at-least-32-bytes-0123", "RoleArn": "acs:ram::1234567890123456:role/app-upload",
         "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt"}
        """)
    #expect(config.upstream.isEmpty)
    #expect(config.accessKeyID == "TGROOT", "AccessKeyID stays the gateway's root, whatever RoleArn looks like")
    #expect(config.accessKeySecret == "a-root-secret-of-at-least-32-bytes-0123")
    #expect(throws: ConfigError.self) {
        // A 30-character Alibaba secret is not a root secret: never taken for an upstream's without the opt-in.
        try parse(#"{"AccessKeyID": "LTAI5t", "AccessKeySecret": "seedSecretOf30Characters000000", "RoleArn": "acs:ram::1:role/r", "PolicyFile": "p"}"#)
    }
}

@Test func aPolicyTooLargeForItsUpstreamRefusesTheConfig() throws {
    let files = try keyFiles()
    defer { try? FileManager.default.removeItem(atPath: files.directory) }
    let policy = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetObject","Resource":"acs:oss:*:*:bucket-with-a-long-name/${user}/*"}]}"#
    try policy.write(toFile: files.directory + "/p.txt", atomically: true, encoding: .utf8)
    func config(_ limit: Int) -> String {
        """
        {"PolicyFile": "p.txt", "Upstreams": {"a": {"Type": "aliyun-sts", "Endpoint": "https://s", "AccessKeyIDFile": "ak", "AccessKeySecretFile": "sk", "MaxPolicyBytes": \(limit)}},
         "Roles": {"r": {"PolicyFile": "p.txt", "Upstream": "a", "RoleArn": "acs:ram::1:role/r"}}}
        """
    }
    try config(200).write(toFile: files.directory + "/config.json", atomically: true, encoding: .utf8)
    let files200 = try ConfigFiles.read(path: files.directory + "/config.json", environment: [:])
    let template = try #require(files200.sessionPolicies["r"])
    #expect(try template.render(["aws:username": "alice", "aws:userid": "alice"]).contains("bucket-with-a-long-name/alice/*"))
    #expect(files200.contents[files.secret] != nil, "key files are watched for reloads")

    try config(100).write(toFile: files.directory + "/config.json", atomically: true, encoding: .utf8)
    #expect {
        try ConfigFiles.read(path: files.directory + "/config.json", environment: [:])
    } throws: { error in
        "\(error)".contains("p.txt:1:1: the session policy of role r is \(policy.utf8.count - 7) bytes minified; the upstream a (aliyun-sts) takes at most 100")
    }
}
