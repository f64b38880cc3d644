import Foundation
import Testing
@testable import TollgateServer

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
    (#"{"PolicyFile": "p""#, "invalid JSON"),
    (#"{"PolicyFile": "p" "Port": 1}"#, "invalid JSON"),
    (#"[1, 2]"#, "the top level must be a JSON object"),
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
         "PreviousAccessKeySecrets": ["old"], "Colour": "blue", "Zebra": 1}
        """)
    #expect(config.port == 17080)
    #expect(config.gatewayPort == 19000)
    #expect(config.listenAddress == "127.0.0.1")
    #expect(config.buckets == ["photos"], "BUCKET_NAME exists at start-up unless Buckets says otherwise")
    #expect(config.roles["read"] == "/etc/tollgate/policy/r.txt")
    #expect(config.previousAccessKeySecrets == ["old"])
    #expect(config.unknownKeys == ["Colour", "Zebra"])
}

@Test func secretsFromTheEnvironmentOverrideTheFile() throws {
    let secret = String(repeating: "s", count: 40)
    let config = try parse(reference, environment: ["TOLLGATE_ACCESS_KEY_SECRET": secret, "TOLLGATE_ACCESS_KEY_ID": "ROOTID"])
    #expect(config.accessKeySecret == secret)
    #expect(config.accessKeyID == "ROOTID")
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
