import Foundation
import Hummingbird
import Logging
import Synchronization
@testable import TollgateConfig
import TollgateLocalStore
import TollgateMemoryStore
import TollgateStore
@testable import TollgateServer
@testable import TollgateTokenService

/// Collects every log line (message and metadata) so tests can grep what the server logged.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }
    var text: String { all.joined(separator: "\n") }

    func logger(_ label: String = "test") -> Logger {
        Logger(label: label) { _ in Handler(log: self) }
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let rendered = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            log.lines.withLock { $0.append("\(event.level) \(event.message) \(rendered)") }
        }
    }
}

/// A scratch directory with a config and policy files, removed by the caller. `roles` adds
/// role name → policy text beside the default role (the allow-all policy).
struct Fixture {
    let directory: String
    let config: TollgateConfig
    let state: TollgateState

    static let allPolicy = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":["oss:*"],"Resource":["acs:oss:*:*:*"]}]}"#

    /// `extraConfig`: more members of config.json, each with its leading comma (`, "CORS": {…}`).
    init(secret: String = "fixture-root-secret-0123456789abcdefghij", roles: [String: String] = [:], extraConfig: String = "",
         now: @escaping @Sendable () -> Date = { Date() }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/policy", withIntermediateDirectories: true)
        try Self.allPolicy.write(toFile: directory + "/policy/all_policy.txt", atomically: true, encoding: .utf8)
        for (role, policy) in roles {
            try policy.write(toFile: directory + "/policy/\(role).json", atomically: true, encoding: .utf8)
        }
        let roleFiles = roles.keys.sorted().map { "\"\($0)\": \"policy/\($0).json\"" }.joined(separator: ", ")
        let json = """
            {"AccessKeyID": "", "AccessKeySecret": "\(secret)", "RoleArn": "", "TokenExpireTime": "900",
             "PolicyFile": "policy/all_policy.txt", "Roles": {\(roleFiles)}\(extraConfig)}
            """
        try json.write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        config = try TollgateConfig.load(path: directory + "/config.json", environment: [:])
        let snapshot = try ConfigSnapshot(path: directory + "/config.json", root: try RootCredentials.resolve(config), environment: [:], clock: now)
        state = TollgateState(snapshot, clock: now)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// The object store behind the gateway in `swift test`: the one place gateway tests make it,
/// with `buckets` created. It is the in-memory twin, which proves that the gateway needs nothing
/// of the local store but the `ObjectStore` protocol (the interop tests run the local store).
func makeGatewayStore(buckets: [String]) async throws -> any ObjectStore {
    let store = MemoryObjectStore()
    _ = try await store.ensureBuckets(buckets)
    return store
}

/// The local store in `fixture`'s directory with the bucket `tollgate`, for the tests of what
/// the gateway does with files (the twin has none).
func makeLocalGatewayStore(_ fixture: Fixture, _ configure: (inout LocalObjectStore.Configuration) -> Void) async throws -> LocalObjectStore {
    var configuration = LocalObjectStore.Configuration(directory: fixture.directory + "/store")
    configure(&configuration)
    let store = try LocalObjectStore(configuration: configuration)
    _ = try await store.ensureBuckets(["tollgate"])
    return store
}

/// Puts `bytes` as `key` in `bucket`, sent as one body part.
func put(_ store: some ObjectStore, _ bucket: String, _ key: String, _ bytes: some Sequence<UInt8>,
         metadata: ObjectMetadata = ObjectMetadata()) async throws {
    let (body, writer) = AsyncStream.makeStream(of: ByteBuffer.self)
    writer.yield(ByteBuffer(bytes: bytes))
    writer.finish()
    _ = try await store.putObject(bucket: bucket, key: key, body: body, metadata: metadata)
}
