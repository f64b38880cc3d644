import Foundation
import Testing
@testable import TollgateConfig
import TollgateStorage

private let secret = #""AccessKeySecret": "root-secret-0123456789abcdefghijklmn""#

private func parse(_ storage: String, environment: [String: String] = [:], root: String = secret, path: String = "/etc/tollgate/config.json") throws -> TollgateConfig {
    try TollgateConfig.parse(Data(#"{"PolicyFile": "p", \#(root), "Storage": \#(storage)}"#.utf8), path: path, environment: environment)
}

@Test func storageIsLocalByDefaultAndWhenSaidSo() throws {
    #expect(try TollgateConfig.parse(Data(#"{"PolicyFile": "p"}"#.utf8), path: "/c.json").storage == .local)
    #expect(try parse(#"{"Backend": "local"}"#).storage == .local)
}

@Test func theS3BackendReadsItsKeysFromTheEnvironmentOrFiles() throws {
    let config = try parse(#"{"Backend": "s3", "Endpoint": "http://rgw.internal:7480", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S", "BucketPrefix": "tg-"}"#,
                           environment: ["K": "AKID", "S": "backend-secret"])
    guard case .s3(let s3) = config.storage.backend else { Issue.record("not s3"); return }
    #expect(s3.endpoint == "http://rgw.internal:7480" && s3.accessKeyID == "AKID" && s3.secretAccessKey == "backend-secret")
    #expect(s3.region == "us-east-1" && s3.pathStyle && s3.bucketPrefix == "tg-" && s3.systemBucket == "tg-tollgate-system")
    #expect(s3.backendMinimumPartSize == 5 * 1024 * 1024 && s3.appendableObjects && s3.signsPayload)
    // Never in its description (which logs may print).
    #expect(!"\(s3)".contains("backend-secret") && !"\(s3)".contains("AKID"))
    #expect(!"\(config.storage)".contains("backend-secret") && !"\(config)".contains("backend-secret"))
    #expect(s3.requestTimeout == .seconds(30) && s3.connectTimeout == .seconds(5))

    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-storage-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try "AKFILE\n".write(toFile: directory + "/key", atomically: true, encoding: .utf8)
    try "secret-from-file\n".write(toFile: directory + "/secret", atomically: true, encoding: .utf8)
    let fromFiles = try parse(#"{"Backend": "s3", "Endpoint": "https://s3.example.com", "AccessKeyIDFile": "key", "AccessKeySecretFile": "secret", "Region": "eu-1", "PathStyle": false, "TLS": {"CAFile": "ca.pem"}, "BackendMinimumPartSize": 102400, "AppendableObjects": false, "RequestTimeoutSeconds": 90, "ConnectTimeoutSeconds": 2}"#,
                              path: directory + "/config.json")
    guard case .s3(let s3) = fromFiles.storage.backend else { Issue.record("not s3"); return }
    #expect(s3.accessKeyID == "AKFILE" && s3.secretAccessKey == "secret-from-file" && s3.region == "eu-1" && !s3.pathStyle)
    #expect(s3.caFile == directory + "/ca.pem" && s3.backendMinimumPartSize == 102400 && !s3.appendableObjects)
    #expect(s3.requestTimeout == .seconds(90) && s3.connectTimeout == .seconds(2))
}

@Test("Storage mistakes are refused with the key that holds them", arguments: [
    (#""s3""#, "Storage must be an object"),
    (#"{"Backend": "ceph"}"#, #"Storage.Backend must be "local" or "s3""#),
    (#"{"Backend": "local", "Endpoint": "http://x"}"#, "Storage.Endpoint applies to the s3 backend only"),
    (#"{"Backend": "s3", "Endpoint": "rgw:7480", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S"}"#, "Storage.Endpoint must be"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw/bucket", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S"}"#, "Storage.Endpoint must be"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeySecretEnv": "S"}"#, "Storage: set AccessKeyIDFile"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeyIDFile": "f", "AccessKeySecretEnv": "S"}"#, "not both"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "UNSET", "AccessKeySecretEnv": "S"}"#, "UNSET is not set"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretFile": "/nonexistent/secret"}"#, "cannot read the file"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S", "Bucket": "x"}"#, #"Storage: unknown key "Bucket""#),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S", "BucketPrefix": "Bad_"}"#, "Storage.BucketPrefix"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S", "TLS": {"CA": "x"}}"#, "Storage.TLS: unknown key"),
    (#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S", "RequestTimeoutSeconds": 0}"#, "Storage.RequestTimeoutSeconds must be"),
])
func storageMistakes(storage: String, message: String) {
    #expect {
        _ = try parse(storage, environment: ["K": "k", "S": "s"])
    } throws: { error in
        "\(error)".contains(message)
    }
}

@Test func theS3BackendNeedsTheRootSecretEveryInstanceShares() {
    #expect {
        _ = try parse(#"{"Backend": "s3", "Endpoint": "http://rgw", "AccessKeyIDEnv": "K", "AccessKeySecretEnv": "S"}"#,
                      environment: ["K": "k", "S": "s"], root: #""AccessKeySecret": """#)
    } throws: { error in
        "\(error)".contains("AccessKeySecret (or TOLLGATE_ACCESS_KEY_SECRET) must be set")
    }
}

@Test func storageChangesNeedARestart() {
    #expect(TollgateConfig.restartOnlyKeys.contains { $0.key == "Storage" })
    #expect(TollgateConfig.extensionKeys.contains("Storage"))
}
