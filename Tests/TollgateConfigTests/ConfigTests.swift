import Foundation
import Testing
@testable import TollgateConfig
@testable import TollgateHTTP

private func parse(_ json: String, environment: [String: String] = [:]) throws -> TollgateConfig {
    try TollgateConfig.parse(Data(json.utf8), path: "/etc/tollgate/config.json", environment: environment)
}

private let reference = """
    {
      "AccessKeyID" : "",
      "AccessKeySecret" : "",
      "RoleArn" : "",
      "TokenExpireTime" : "900",
      "PolicyFile": "policy/all_policy.txt"
    }
    """

@Test func referenceConfigWorksUnmodified() throws {
    let config = try parse(reference)
    #expect(config.tokenExpireTime == 900)
    #expect(config.policyFile == "/etc/tollgate/policy/all_policy.txt", "PolicyFile is relative to config.json")
    #expect(config.roles == ["default": "/etc/tollgate/policy/all_policy.txt"])
    #expect(config.accessKeySecret.isEmpty)
    #expect(config.unknownKeys.isEmpty)
    #expect(config.port == 7080)
    #expect(config.gatewayPort == 9000)
    #expect(config.dataDirectory == "/etc/tollgate/data")
}

@Test("TokenExpireTime as string or number", arguments: [
    (#""900""#, 900), ("900", 900), (#""43200""#, 43200), ("3600", 3600), (#"" 1800 ""#, 1800),
])
func tokenExpireTimeForms(value: String, expected: Int) throws {
    let config = try parse(#"{"TokenExpireTime": \#(value), "PolicyFile": "p.txt"}"#)
    #expect(config.tokenExpireTime == expected)
}

@Test("bad configs name the key and the bound", arguments: [
    (#"{"TokenExpireTime": "899", "PolicyFile": "p"}"#, "TokenExpireTime must be at least 900 seconds (got 899)"),
    (#"{"TokenExpireTime": 43201, "PolicyFile": "p"}"#, "TokenExpireTime must be at most 43200 seconds (got 43201)"),
    (#"{"TokenExpireTime": "soon", "PolicyFile": "p"}"#, "TokenExpireTime must be a whole number"),
    (#"{"TokenExpireTime": 900.5, "PolicyFile": "p"}"#, "TokenExpireTime must be a whole number"),
    (#"{"TokenExpireTime": true, "PolicyFile": "p"}"#, "TokenExpireTime must be a whole number"),
    (#"{"TokenExpireTime": "900"}"#, "PolicyFile is required"),
    (#"{"PolicyFile": 3}"#, "PolicyFile must be a string"),
    (#"{"PolicyFile": "p", "Port": 70000}"#, "Port must be a port number"),
    (#"{"PolicyFile": "p", "Variables": {"A": 1}}"#, "Variables.A must be a string"),
    (#"{"PolicyFile": "p", "AccessKeySecret": "short"}"#, "AccessKeySecret must be at least 32 bytes"),
    (#"{"PolicyFile": "p", "DevelopmentMode": "yes"}"#, "DevelopmentMode must be true or false"),
    (#"{"PolicyFile": "p", "Roles": {"a b": "x.txt"}}"#, "role name"),
    (#"{"PolicyFile": "p", "Buckets": ["photos", "Bad_Name"]}"#, #"Buckets: "Bad_Name" is not a valid bucket name"#),
    (#"{"PolicyFile": "p", "Variables": {"BUCKET_NAME": "x"}}"#, #"Buckets (from Variables.BUCKET_NAME): "x" is not a valid bucket name"#),
    (#"{"PolicyFile": "p", "CreatePolicyBuckets": "no"}"#, "CreatePolicyBuckets must be true or false"),
    (#"[1, 2]"#, "the top level must be a JSON object"),
    // Every secret that verifies tokens is as strong as the one that signs them.
    (#"{"PolicyFile": "p", "PreviousAccessKeySecrets": ["x"]}"#, "PreviousAccessKeySecrets[0] must be at least 32 bytes"),
    (#"{"PolicyFile": "p", "PreviousAccessKeySecrets": ["previous-secret-0123456789abcdefghij", "short"]}"#,
     "PreviousAccessKeySecrets[1] must be at least 32 bytes"),
    (#"{"PolicyFile": "p", "PreviousAccessKeySecrets": [""], "DevelopmentMode": true}"#, "PreviousAccessKeySecrets[0] must not be empty"),
    // Both listeners on one port: a config error, not a bind failure.
    (#"{"PolicyFile": "p", "Port": 9000}"#, "Port and GatewayPort must differ"),
    (#"{"PolicyFile": "p", "Port": 8000, "GatewayPort": "8000", "ListenAddress": "127.0.0.1", "GatewayAddress": "127.0.0.1"}"#,
     "Port and GatewayPort must differ"),
    (#"{"PolicyFile": "p", "Port": 8000, "GatewayPort": 8000, "ListenAddress": "127.0.0.1"}"#, "(127.0.0.1:8000) and the gateway (0.0.0.0:8000)"),
    (#"{"PolicyFile": "p", "Port": 8000, "GatewayPort": 8000, "GatewayAddress": "::1", "ListenAddress": "::"}"#, "Port and GatewayPort must differ"),
    (#"{"PolicyFile": "p", "IdleTimeoutSeconds": 0}"#, "IdleTimeoutSeconds must be at least 1 (got 0)"),
    (#"{"PolicyFile": "p", "MultipartUploadExpirySeconds": "-5"}"#, "MultipartUploadExpirySeconds must be at least 1"),
    (#"{"PolicyFile": "p", "MaxMultipartUploadsPerBucket": 0}"#, "MaxMultipartUploadsPerBucket must be at least 1"),
    (#"{"PolicyFile": "p", "TLS": "cert.pem"}"#, #"TLS must be an object {"CertificateFile""#),
    (#"{"PolicyFile": "p", "TLS": {"KeyFile": "k.pem"}}"#, "TLS.CertificateFile must be a file name"),
    (#"{"PolicyFile": "p", "GatewayTLS": {"CertificateFile": "c.pem"}}"#, "GatewayTLS.KeyFile must be a file name"),
    (#"{"PolicyFile": "p", "GatewayTLS": {"CertificateFile": "c.pem", "KeyFile": ""}}"#, "GatewayTLS.KeyFile must be a file name"),
    (#"{"PolicyFile": "p", "TLS": {"CertificateFile": "c.pem", "KeyFile": "k.pem", "Key": "x"}}"#, "(unknown key Key)"),
    (#"{"PolicyFile": "p", "TrustedProxies": "10.0.0.0/8"}"#, "TrustedProxies must be an array of strings"),
    (#"{"PolicyFile": "p", "TrustedProxies": ["127.0.0.1", "10.0.0.0/33"]}"#, #"TrustedProxies: "10.0.0.0/33" is not an IP address or CIDR range"#),
    // Numbers beyond any Int are refused as out of range, never trapped on.
    (#"{"PolicyFile": "p", "TokenExpireTime": 1e19}"#, "TokenExpireTime must be a whole number"),
    (#"{"PolicyFile": "p", "Port": -1e300}"#, "Port must be a whole number"),
    (#"{"PolicyFile": "p", "RateLimits": {"PerAddressPerMinute": 1e19}}"#, "RateLimits.PerAddressPerMinute must be a whole number"),
    (#"{"PolicyFile": "p", "Roles": {"r": {"PolicyFile": "r.txt", "MaxSessionSeconds": 1e19}}}"#, "Roles.r.MaxSessionSeconds"),
    (#"{"PolicyFile": "p", "Authentication": {"Webhook": {"URL": "http://h/v", "TimeoutMs": 1e19}}}"#, "Webhook.TimeoutMs must be a whole number"),
    // Two identity sources could name the same user: each needs its own SubjectPrefix.
    (#"{"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k"}], "Webhook": {"URL": "http://h/v"}}}"#,
     "Providers[0] (https://a) needs a SubjectPrefix"),
    (#"{"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k", "SubjectPrefix": "a:"}, {"Issuer": "https://b", "Audiences": ["x"], "JWKSURL": "http://b/k"}]}}"#,
     "Providers[1] (https://b) needs a SubjectPrefix"),
    (#"{"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k", "SubjectPrefix": "a"}], "Webhook": {"URL": "http://h/v", "SubjectPrefix": "ab"}}}"#,
     #"the SubjectPrefix "a" of Providers[0] (https://a) and "ab" of Webhook overlap"#),
    (#"{"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k", "SubjectPrefix": "a/"}]}}"#,
     #"Providers[0].SubjectPrefix "a/" cannot begin a user's name"#),
    (#"{"PolicyFile": "p", "Authentication": {"Webhook": {"URL": "http://h/v", "SubjectPrefix": 3}}}"#, "Webhook.SubjectPrefix must be a string"),
])
func badConfig(json: String, message: String) {
    do {
        _ = try parse(json)
        Issue.record("accepted \(json)")
    } catch {
        let line = "\(error)"
        #expect(line.hasPrefix("/etc/tollgate/config.json: "))
        #expect(line.contains(message), "\(line)")
        #expect(!line.contains("\n"), "one line")
    }
}

@Test func extensionKeysAndUnknownKeys() throws {
    let config = try parse("""
        {"PolicyFile": "policy/all_policy.txt", "Port": 17080, "GatewayPort": "19000", "ListenAddress": "127.0.0.1",
         "Variables": {"BUCKET_NAME": "photos"}, "Roles": {"read": "policy/r.txt"},
         "PreviousAccessKeySecrets": ["old-secret-0123456789abcdefghijklm"], "Colour": "blue", "Zebra": 1}
        """)
    #expect(config.port == 17080)
    #expect(config.gatewayPort == 19000)
    #expect(config.listenAddress == "127.0.0.1")
    #expect(config.buckets == ["photos"], "BUCKET_NAME exists at start-up unless Buckets says otherwise")
    #expect(config.roles["read"] == "/etc/tollgate/policy/r.txt")
    #expect(config.previousAccessKeySecrets == ["old-secret-0123456789abcdefghijklm"])
    #expect(config.unknownKeys == ["Colour", "Zebra"])
}

@Test func secretsFromTheEnvironmentOverrideTheFile() throws {
    let secret = String(repeating: "s", count: 40)
    let config = try parse(reference, environment: ["TOLLGATE_ACCESS_KEY_SECRET": secret, "TOLLGATE_ACCESS_KEY_ID": "ROOTID"])
    #expect(config.accessKeySecret == secret)
    #expect(config.accessKeyID == "ROOTID")
}

/// Docker secrets: `TOLLGATE_ACCESS_KEY_SECRET_FILE` names a file holding the secret.
@Test("root secret from a file or the environment", arguments: [
    // (file contents or nil for no file, variable, file path override, expected secret or error)
    ("file-secret-0123456789abcdefghijklmnop\n", nil, nil, "file-secret-0123456789abcdefghijklmnop"),
    ("file-secret-0123456789abcdefghijklmnop\r\n\n", nil, nil, "file-secret-0123456789abcdefghijklmnop"),
    (nil, "env-secret-0123456789abcdefghijklmnopq", nil, "env-secret-0123456789abcdefghijklmnopq"),
    ("file-secret-0123456789abcdefghijklmnop", "env-secret-0123456789abcdefghijklmnopq", nil,
     "error: /etc/tollgate/config.json: set TOLLGATE_ACCESS_KEY_SECRET or TOLLGATE_ACCESS_KEY_SECRET_FILE, not both"),
    (nil, nil, "/nonexistent/tollgate-secret",
     "error: /nonexistent/tollgate-secret: TOLLGATE_ACCESS_KEY_SECRET_FILE: cannot read the file"),
    ("\n", nil, nil, "error: TOLLGATE_ACCESS_KEY_SECRET_FILE: the file is empty"),
    ("weak\n", nil, nil, "error: /etc/tollgate/config.json: TOLLGATE_ACCESS_KEY_SECRET_FILE (SECRETFILE) must be at least 32 bytes"),
] as [(String?, String?, String?, String)])
func rootSecretFromAFile(contents: String?, variable: String?, missingFile: String?, expected: String) throws {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-secret-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: file) }
    var environment: [String: String] = [:]
    if let contents {
        try Data(contents.utf8).write(to: URL(fileURLWithPath: file))
        environment["TOLLGATE_ACCESS_KEY_SECRET_FILE"] = file
    }
    if let missingFile { environment["TOLLGATE_ACCESS_KEY_SECRET_FILE"] = missingFile }
    if let variable { environment["TOLLGATE_ACCESS_KEY_SECRET"] = variable }
    guard expected.hasPrefix("error: ") else {
        #expect(try parse(reference, environment: environment).accessKeySecret == expected)
        return
    }
    let message = String(expected.dropFirst("error: ".count)).replacingOccurrences(of: "SECRETFILE", with: file)
    #expect {
        try parse(reference, environment: environment)
    } throws: { error in
        "\(error)".contains(message)
    }
}

@Test func rootAccessKeyIdFromAFile() throws {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-id-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: file) }
    try Data("ROOTID\n".utf8).write(to: URL(fileURLWithPath: file))
    #expect(try parse(reference, environment: ["TOLLGATE_ACCESS_KEY_ID_FILE": file]).accessKeyID == "ROOTID")
}

@Test("the health check asks loopback when the listener is a wildcard", arguments: [
    (#""ListenAddress": "0.0.0.0", "Port": 7081"#, "http://127.0.0.1:7081/healthz"),
    (#""Port": 7080"#, "http://127.0.0.1:7080/healthz"),
    (#""ListenAddress": "::", "Port": 8080"#, "http://[::1]:8080/healthz"),
    (#""ListenAddress": "10.0.0.5", "Port": 8080"#, "http://10.0.0.5:8080/healthz"),
    (#""ListenAddress": "fd00::5", "Port": 8080"#, "http://[fd00::5]:8080/healthz"),
])
func healthCheckURLFollowsTheListener(keys: String, expected: String) throws {
    #expect(try parse(#"{"PolicyFile": "p", \#(keys)}"#).healthCheckURL == expected)
}

@Test func developmentModeAllowsAShortSecret() throws {
    let config = try parse(#"{"PolicyFile": "p", "AccessKeySecret": "short", "DevelopmentMode": true}"#)
    #expect(config.accessKeySecret == "short")
}

@Test func firstStartGeneratesAndPersistsTheSecretWithMode0600() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var config = try parse(reference)
    config.dataDirectory = directory

    let first = try RootCredentials.resolve(config)
    #expect(first.generated)
    #expect(first.accessKeySecret.utf8.count >= 32)
    #expect(!first.accessKeyID.isEmpty)
    let path = directory + "/" + RootCredentials.fileName
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

    let second = try RootCredentials.resolve(config)
    #expect(!second.generated, "printed only once")
    #expect(second.accessKeySecret == first.accessKeySecret)
    #expect(second.accessKeyID == first.accessKeyID)
}

@Test func configuredSecretIsUsedAndIdDerivedStably() throws {
    var config = try parse(reference)
    config.accessKeySecret = String(repeating: "x", count: 40)
    let a = try RootCredentials.resolve(config)
    let b = try RootCredentials.resolve(config)
    #expect(!a.generated)
    #expect(a.accessKeyID == b.accessKeyID)
    #expect(a.accessKeyID.hasPrefix("TG"))
}

@Test func limitsHaveDocumentedDefaultsAndCanBeSet() throws {
    let defaults = try parse(reference)
    #expect(defaults.idleTimeoutSeconds == 60)
    #expect(defaults.multipartUploadExpirySeconds == 3 * 24 * 3600)
    #expect(defaults.maxMultipartUploadsPerBucket == 1000)
    let set = try parse("""
        {"PolicyFile": "p", "IdleTimeoutSeconds": "5", "MultipartUploadExpirySeconds": 3600, "MaxMultipartUploadsPerBucket": 10}
        """)
    #expect(set.idleTimeoutSeconds == 5)
    #expect(set.multipartUploadExpirySeconds == 3600)
    #expect(set.maxMultipartUploadsPerBucket == 10)
    #expect(set.unknownKeys.isEmpty)
}

@Test func listenersMayShareAPortOnDistinctAddressesOrBothAskForAFreeOne() throws {
    let distinct = try parse(#"{"PolicyFile": "p", "Port": 8000, "GatewayPort": 8000, "ListenAddress": "127.0.0.1", "GatewayAddress": "127.0.0.2"}"#)
    #expect(distinct.port == distinct.gatewayPort)
    let ephemeral = try parse(#"{"PolicyFile": "p", "Port": 0, "GatewayPort": 0}"#)
    #expect(ephemeral.port == 0)
}

@Test func developmentModeAllowsShortPreviousSecrets() throws {
    let config = try parse(#"{"PolicyFile": "p", "AccessKeySecret": "dev", "PreviousAccessKeySecrets": ["x"], "DevelopmentMode": true}"#)
    #expect(config.previousAccessKeySecrets == ["x"])
}

@Test func tlsAndTrustedProxiesKeys() throws {
    let config = try parse("""
        {"PolicyFile": "p", "TLS": {"CertificateFile": "tls/token.pem", "KeyFile": "/keys/token.key"},
         "GatewayTLS": {"CertificateFile": "tls/gw.pem", "KeyFile": "tls/gw.key"}, "TrustedProxies": ["10.0.0.0/8", "::1"]}
        """)
    #expect(config.tls == TLSFiles(certificateFile: "/etc/tollgate/tls/token.pem", keyFile: "/keys/token.key"), "relative to config.json")
    #expect(config.gatewayTLS == TLSFiles(certificateFile: "/etc/tollgate/tls/gw.pem", keyFile: "/etc/tollgate/tls/gw.key"))
    #expect(config.trustedProxies.ranges.count == 2)
    #expect(config.unknownKeys.isEmpty)
    let plain = try parse(reference)
    #expect(plain.tls == nil && plain.gatewayTLS == nil && plain.trustedProxies.isEmpty)
}

@Test("JSON syntax errors name the line and column", arguments: [
    (#"{"PolicyFile": "p""#, "/etc/tollgate/config.json:1:19: invalid JSON: "),
    (#"{"PolicyFile": "p" "Port": 1}"#, "/etc/tollgate/config.json:1:20: invalid JSON: "),
    ("{\n  \"PolicyFile\": \"p\",\n  \"Port\": 7080,\n}\n", "/etc/tollgate/config.json:4:1: invalid JSON: "),
    ("{\n  \"PolicyFile\": \"p\",\n  \"Variables\": {\"A\": \"é\" \"B\": \"x\"}\n}", "/etc/tollgate/config.json:3:26: invalid JSON: "),
])
func configSyntaxErrorPosition(json: String, prefix: String) {
    do {
        _ = try parse(json)
        Issue.record("accepted \(json)")
    } catch {
        #expect("\(error)".hasPrefix(prefix), "\(error)")
        #expect(!"\(error)".contains("\n"), "one line")
    }
}

/// One identity source keeps today's names; with several, each has its prefix, and the prefix
/// is part of the name that fills `${user}`.
@Test func subjectPrefixesQualifyEachSource() throws {
    let one = try parse(#"{"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k"}]}}"#)
    #expect(one.authentication?.providers.first?.subjectPrefix == "")
    let two = try parse(#"""
        {"PolicyFile": "p", "Authentication": {"Providers": [{"Issuer": "https://a", "Audiences": ["x"], "JWKSURL": "http://a/k", "SubjectPrefix": "google:"}],
         "Webhook": {"URL": "http://h/v", "SubjectPrefix": "app:"}}}
        """#)
    #expect(two.authentication?.providers.first?.subjectPrefix == "google:")
    #expect(two.authentication?.webhook?.subjectPrefix == "app:")
    #expect(two.unknownKeys.isEmpty)
}
