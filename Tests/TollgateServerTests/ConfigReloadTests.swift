import Foundation
import Logging
import Testing
@testable import TollgateConfig
@testable import TollgateIdentity
import TollgateLocalStore
import TollgateMemoryStore
import TollgateStore
@testable import TollgateTokenService

/// A config directory: config.json with two roles, and their policy files.
private struct ConfigDirectory {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-reload-\(UUID().uuidString)").path
    var config: String { path + "/config.json" }

    static let secret = "reload-root-secret-0123456789abcdefghij"
    static let readWrite = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:*","Resource":["acs:oss:*:*:$BUCKET_NAME","acs:oss:*:*:$BUCKET_NAME/*"]}]}"#
    static let everything = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:*","Resource":"*"}]}"#
    static var base: [String: Any] { [
        "AccessKeySecret": secret, "TokenExpireTime": "900", "PolicyFile": "policy/all.txt", "Port": 7080, "GatewayPort": 9000,
        "Variables": ["BUCKET_NAME": "photos"], "Roles": ["readwrite": "policy/rw.txt"],
    ] }

    init() throws {
        try FileManager.default.createDirectory(atPath: path + "/policy", withIntermediateDirectories: true)
        try write("policy/all.txt", Self.everything)
        try write("policy/rw.txt", Self.readWrite)
        try writeConfig([:])
    }

    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: path + "/" + name, atomically: true, encoding: .utf8)
    }

    /// config.json: the base members, with `changes` applied (NSNull removes a member).
    func writeConfig(_ changes: [String: Any]) throws {
        var members = Self.base
        for (key, value) in changes {
            if value is NSNull { members[key] = nil } else { members[key] = value }
        }
        try write("config.json", String(decoding: try JSONSerialization.data(withJSONObject: members, options: [.sortedKeys]), as: UTF8.self))
    }

    func snapshot(running: ConfigSnapshot? = nil) throws -> ConfigSnapshot {
        let files = try ConfigFiles.read(path: config, environment: [:])
        let root = try running?.root ?? RootCredentials.resolve(files.config)
        return try ConfigSnapshot(files, root: root, running: running)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// One edit to a running configuration and what a reload must make of it.
struct ReloadCase: Sendable, CustomTestStringConvertible {
    enum Edit: Sendable {
        case config([String: String])  // key → JSON text of the new value
        case rawConfig(String)
        case file(String, String)
    }
    enum Outcome: Sendable {
        /// Applied: the keys that apply now, those that wait for a restart, the policy files that changed.
        case applied(keys: [String], restart: [String], policyFiles: [String])
        /// Refused: the file named (relative to the directory) and a fragment of the reason.
        case refused(file: String, reason: String)
    }
    var name: String
    var edits: [Edit]
    var outcome: Outcome
    var testDescription: String { name }
}

private let reloadCases: [ReloadCase] = [
    ReloadCase(name: "token lifetime", edits: [.config(["TokenExpireTime": "1800"])],
               outcome: .applied(keys: ["TokenExpireTime"], restart: [], policyFiles: [])),
    ReloadCase(name: "variables and a new role", edits: [.config(["Variables": #"{"BUCKET_NAME":"media"}"#,
                                                                  "Roles": #"{"readwrite":"policy/rw.txt","admin":"policy/all.txt"}"#])],
               outcome: .applied(keys: ["Roles", "Variables"], restart: [], policyFiles: [])),
    ReloadCase(name: "a policy file", edits: [.file("policy/rw.txt", ConfigDirectory.readWrite + "\n")],
               outcome: .applied(keys: [], restart: [], policyFiles: ["policy/rw.txt"])),
    ReloadCase(name: "a listener port and the idle timeout need a restart, the rest applies",
               edits: [.config(["Port": "7081", "IdleTimeoutSeconds": "5", "RateLimits": #"{"PerAddressPerMinute":5}"#])],
               outcome: .applied(keys: ["RateLimits"], restart: ["IdleTimeoutSeconds", "Port"], policyFiles: [])),
    ReloadCase(name: "the root secret needs a restart", edits: [.config(["AccessKeySecret": #""another-root-secret-0123456789abcdefgh""#])],
               outcome: .applied(keys: [], restart: ["AccessKeySecret"], policyFiles: [])),
    ReloadCase(name: "nothing changed", edits: [.file("policy/all.txt", ConfigDirectory.everything)],
               outcome: .applied(keys: [], restart: [], policyFiles: [])),
    ReloadCase(name: "bad JSON", edits: [.rawConfig(#"{"PolicyFile": "policy/all.txt""#)],
               outcome: .refused(file: "config.json", reason: "invalid JSON")),
    ReloadCase(name: "a broken policy", edits: [.file("policy/rw.txt", #"{"Version":"1","Statement":[{"Effect":"Perhaps"}]}"#)],
               outcome: .refused(file: "policy/rw.txt", reason: "Effect must be")),
    ReloadCase(name: "a role whose file is missing", edits: [.config(["Roles": #"{"readwrite":"policy/rw.txt","new":"policy/new.txt"}"#])],
               outcome: .refused(file: "policy/new.txt", reason: "cannot read the file")),
    ReloadCase(name: "a variable the policy needs removed", edits: [.config(["Variables": "{}"])],
               outcome: .refused(file: "policy/rw.txt", reason: "placeholder $BUCKET_NAME has no value")),
    ReloadCase(name: "a weak previous secret", edits: [.config(["PreviousAccessKeySecrets": #"["short"]"#])],
               outcome: .refused(file: "config.json", reason: "PreviousAccessKeySecrets[0] must be at least 32 bytes")),
    ReloadCase(name: "a weak previous secret in development mode", edits: [.config(["PreviousAccessKeySecrets": #"["short"]"#, "DevelopmentMode": "true"])],
               outcome: .applied(keys: ["DevelopmentMode", "PreviousAccessKeySecrets"], restart: [], policyFiles: [])),
    ReloadCase(name: "a bucket name the store refuses", edits: [.config(["Buckets": #"["Not_A_Bucket"]"#])],
               outcome: .refused(file: "config.json", reason: "is not a valid bucket name")),
    ReloadCase(name: "a role rule naming an unknown role",
               edits: [.config(["Authentication": #"{"AllowAnonymous":true,"RoleRules":[{"Claim":"g","Match":"Equals","Value":"x","Role":"nobody"}]}"#])],
               outcome: .refused(file: "config.json", reason: "unknown role \"nobody\"")),
]

@Test("a reload validates everything first", arguments: reloadCases)
func reloadTable(_ testCase: ReloadCase) throws {
    let directory = try ConfigDirectory()
    defer { directory.remove() }
    let running = try directory.snapshot()
    for edit in testCase.edits {
        switch edit {
        case .config(let changes):
            var members: [String: Any] = [:]
            for (key, json) in changes { members[key] = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed) }
            try directory.writeConfig(members)
        case .rawConfig(let text):
            try directory.write("config.json", text)
        case .file(let name, let text):
            try directory.write(name, text)
        }
    }
    switch testCase.outcome {
    case .applied(let keys, let restart, let policyFiles):
        let next = try directory.snapshot(running: running)
        let changes = ConfigChanges(from: running, to: next)
        #expect(changes.applied == keys)
        #expect(changes.needRestart == restart)
        #expect(changes.policyFiles == policyFiles.map { directory.path + "/" + $0 })
        // What needs a restart keeps the running value.
        #expect(next.config.port == running.config.port)
        #expect(next.config.idleTimeoutSeconds == running.config.idleTimeoutSeconds)
        #expect(next.config.accessKeySecret == running.config.accessKeySecret)
    case .refused(let file, let reason):
        let error = #expect(throws: ConfigLoadError.self) { try directory.snapshot(running: running) }
        #expect(error?.problems.contains { $0.file == directory.path + "/" + file && $0.description.contains(reason) } == true, "\(String(describing: error))")
        #expect(error?.contents[directory.config] != nil, "config.json is watched for the next edit")
    }
}

@Test func aReloadAppliesNewValuesAndKeepsWhatMustOutliveIt() throws {
    let directory = try ConfigDirectory()
    defer { directory.remove() }
    let running = try directory.snapshot()
    #expect(running.requiredBuckets.map(\.name) == ["photos"])

    try directory.writeConfig(["TokenExpireTime": 1800, "Variables": ["BUCKET_NAME": "media"], "MaxMultipartUploadsPerBucket": 7,
                               "GatewayBaseDomain": "s3.example.test", "Roles": ["readwrite": "policy/rw.txt", "admin": "policy/all.txt"]])
    let next = try directory.snapshot(running: running)
    #expect(next.config.tokenExpireTime == 1800)
    #expect(next.config.maxMultipartUploadsPerBucket == 7)
    #expect(next.config.gatewayBaseDomain == "s3.example.test")
    #expect(next.roleNames == ["admin", "default", "readwrite"])
    #expect(next.policies["readwrite"]?.literalBucketNames == ["media"])
    #expect(next.rateLimits.perAddress === running.rateLimits.perAddress, "unchanged RateLimits keep their counts")

    try directory.writeConfig(["RateLimits": ["PerAddressPerMinute": 5]])
    let limited = try directory.snapshot(running: next)
    #expect(limited.rateLimits.perAddress !== next.rateLimits.perAddress)
    #expect(limited.rateLimits.perAddress?.limit == RateLimit(perMinute: 5))
}

@Test func theIdentityVerifierIsKeptWhileAuthenticationIsUnchangedAndAProvidersKeySetWhileItIs() throws {
    let directory = try ConfigDirectory()
    defer { directory.remove() }
    let issuer = "https://id.example.test"
    func provider(audience: String) -> [String: Any] {
        ["Issuer": issuer, "Audiences": [audience], "JWKSURL": "http://127.0.0.1:9/jwks", "SubjectPrefix": "id:"]
    }
    try directory.writeConfig(["Authentication": ["Providers": [provider(audience: "app")]]])
    let running = try directory.snapshot()

    try directory.writeConfig(["Authentication": ["Providers": [provider(audience: "app")]], "TokenExpireTime": 1200])
    let same = try directory.snapshot(running: running)
    #expect(same.identities?.verified === running.identities?.verified, "the verifier, with its caches, survives")

    let webhook: [String: Any] = ["URL": "http://127.0.0.1:9/verify", "SubjectPrefix": "app:"]
    try directory.writeConfig(["Authentication": ["Providers": [provider(audience: "app")], "Webhook": webhook]])
    let withWebhook = try directory.snapshot(running: same)
    #expect(withWebhook.identities?.verified !== same.identities?.verified, "verified logins are checked again")
    #expect(withWebhook.identities?.cache(issuer: issuer) === running.identities?.cache(issuer: issuer), "the unchanged provider's key set is kept")

    try directory.writeConfig(["Authentication": ["Providers": [provider(audience: "other-app")], "Webhook": webhook]])
    let changed = try directory.snapshot(running: withWebhook)
    #expect(changed.identities?.cache(issuer: issuer) !== running.identities?.cache(issuer: issuer))

    try directory.writeConfig([:])
    #expect(try directory.snapshot(running: changed).identities == nil)
}

@Test func requiredBucketsAreConfiguredOnesThenThosePoliciesNameUnlessSwitchedOff() throws {
    let directory = try ConfigDirectory()
    defer { directory.remove() }
    try directory.write("policy/app.txt", #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::my-app-bucket/*","arn:aws:s3:::photos/x","arn:aws:s3:::Bad_Name/*"]}]}"#)
    try directory.writeConfig(["Buckets": ["logs"], "Variables": ["BUCKET_NAME": "photos"], "Roles": ["readwrite": "policy/rw.txt", "app": "policy/app.txt"]])
    let snapshot = try directory.snapshot()
    #expect(snapshot.requiredBuckets == [
        .init(name: "logs", namedBy: "Buckets"),
        .init(name: "my-app-bucket", namedBy: directory.path + "/policy/app.txt"),
        .init(name: "photos", namedBy: directory.path + "/policy/app.txt"),  // roles in name order: app before readwrite
        .init(name: "Bad_Name", namedBy: directory.path + "/policy/app.txt"),
    ])
    try directory.writeConfig(["Buckets": ["logs"], "Roles": ["readwrite": "policy/rw.txt", "app": "policy/app.txt"], "CreatePolicyBuckets": false])
    #expect(try directory.snapshot().requiredBuckets.map(\.name) == ["logs"])
}

@Test func theReloaderLogsARefusedEditOnceAndAppliesTheNextGoodOne() async throws {
    let directory = try ConfigDirectory()
    defer { directory.remove() }
    let store = try LocalObjectStore(directory: directory.path + "/store")
    defer { try? store.close() }
    let live = LiveConfig(try directory.snapshot())
    let log = CapturedLog()
    let reloader = ConfigReloader(live: live, store: store, logger: log.logger(), environment: [:], pool: .singleton)

    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    #expect(log.all.isEmpty, "nothing changed, nothing done")

    try directory.write("config.json", #"{"PolicyFile": "policy/all.txt""#)
    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    let refusals = log.all.filter { $0.contains("config reload refused") }
    #expect(refusals.count == 1, "\(log.text)")
    #expect(refusals.first?.contains("config.file=\(directory.config)") == true)
    #expect(refusals.first?.contains("invalid JSON") == true)
    #expect(live.current.config.tokenExpireTime == 900, "the running configuration stays")

    try directory.write("policy/app.txt", #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:PutObject","Resource":"acs:oss:*:*:my-app-bucket/*"}]}"#)
    try directory.writeConfig(["TokenExpireTime": 1800, "Port": 7099, "MaxMultipartUploadsPerBucket": 3,
                               "Roles": ["readwrite": "policy/rw.txt", "app": "policy/app.txt"]])
    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    #expect(live.current.config.tokenExpireTime == 1800)
    #expect(live.current.config.port == 7080)
    #expect(store.maxUploadsPerBucket == 3)
    #expect(log.text.contains("config reloaded config.changed=MaxMultipartUploadsPerBucket,Roles,TokenExpireTime"), "\(log.text)")
    #expect(log.text.contains("changed in config.json; takes effect after a restart config.file=\(directory.config) config.keys=Port"))
    #expect(log.text.contains("bucket created bucket.name=my-app-bucket bucket.named_by=\(directory.path)/policy/app.txt"))
    #expect(log.text.contains("bucket created bucket.name=photos bucket.named_by=Buckets"))
    #expect(try await store.listBuckets().map(\.name) == ["my-app-bucket", "photos"])

    // A broken policy edit is refused once too; SIGHUP tries (and logs) again.
    try directory.write("policy/app.txt", "{")
    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    await reloader.reload(reason: "file changed", onlyIfChanged: true)
    #expect(log.all.filter { $0.contains("config reload refused") && $0.contains("app.txt:1:") }.count == 1, "\(log.text)")
    await reloader.reload(reason: "SIGHUP", onlyIfChanged: false)
    #expect(log.all.filter { $0.contains("config reload refused") && $0.contains("app.txt:1:") }.count == 2)
    #expect(live.current.policies["app"] != nil)
}
