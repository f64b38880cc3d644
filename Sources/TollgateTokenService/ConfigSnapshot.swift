import Foundation
import Synchronization
import TollgateConfig
import TollgateIdentity
import TollgateMobile
import TollgatePolicy
import TollgateStore
import TollgateToken
import TollgateUpstream

/// Everything config.json and the policy files decide, validated as a whole and never changed
/// afterwards: a reload builds a new snapshot and `LiveConfig` swaps it in. A request reads one
/// snapshot and uses it throughout, so it never sees half of an edit.
public final class ConfigSnapshot: Sendable {
    /// The config in force. Keys that need a restart (`TollgateConfig.restartOnlyKeys`) keep
    /// the values the process started with.
    public let config: TollgateConfig
    /// Resolved once at start-up; the same in every snapshot.
    public let root: RootCredentials
    /// Signs with the root secret; verifies with it and with `PreviousAccessKeySecrets`.
    public let tokens: TokenService
    /// Role name → its compiled policy.
    public let policies: [String: Policy]
    /// Verifies app users' login tokens; nil without an `Authentication` section.
    public let identities: IdentityVerifier?
    public let rateLimits: TokenRateLimits
    /// The upstream STSs with their reuse caches; nil when no role is vended upstream.
    public let upstreams: UpstreamVendors?
    /// config.json and the policy files → the bytes this snapshot was built from.
    public let contents: [String: Data]
    /// The mobile Storage API's collections, with each role's permissions as a policy.
    public let collections: MobileCollections

    /// Builds the snapshot of `files`. Given the `running` one, the keys that need a restart keep
    /// their running values, and what must outlive a reload is carried over: the identity
    /// verifier with its caches when `Authentication` did not change (otherwise the key sets of
    /// providers whose settings did not change), and the rate limiters with their counts when
    /// `RateLimits` did not change.
    public init(_ files: ConfigFiles, root: RootCredentials, running: ConfigSnapshot? = nil,
                clock: @escaping @Sendable () -> Date = { Date() }) throws(ConfigLoadError) {
        var config = files.config
        if let running { config.keepRestartOnlyValues(of: running.config) }
        self.config = config
        self.root = root
        do {
            tokens = try TokenService(rootSecret: root.accessKeySecret, previousSecrets: config.previousAccessKeySecrets)
        } catch {
            throw ConfigLoadError(problems: [.config(ConfigError(file: config.path, "cannot derive the token keys (\(error))"))],
                                  contents: files.contents.mapValues(Optional.some))
        }
        policies = files.policies
        if let settings = config.authentication {
            if let previous = running?.identities, running?.config.authentication == settings {
                identities = previous
            } else {
                identities = IdentityVerifier(settings: settings, fetch: TokenController.fetch, post: TokenController.post,
                                              clock: clock, keySetsFrom: running?.identities)
            }
        } else {
            identities = nil
        }
        if let running, running.config.rateLimits == config.rateLimits {
            rateLimits = running.rateLimits
        } else {
            rateLimits = TokenRateLimits(config.rateLimits)
        }
        if config.upstream.isEmpty {
            upstreams = nil
        } else {
            upstreams = UpstreamVendors(config.upstream, sessionPolicies: files.sessionPolicies, running: running?.upstreams)
        }
        contents = files.contents
        do {
            collections = try MobileCollections(config.collections, roles: config.roles.keys.sorted(), file: config.path)
        } catch {
            throw ConfigLoadError(problems: [.config(error)], contents: files.contents.mapValues(Optional.some))
        }
    }

    /// Reads, validates and builds in one step (start-up and tests).
    public convenience init(path: String, root: RootCredentials, environment: [String: String] = ProcessInfo.processInfo.environment,
                            clock: @escaping @Sendable () -> Date = { Date() }) throws(ConfigLoadError) {
        try self.init(try ConfigFiles.read(path: path, environment: environment), root: root, clock: clock)
    }

    public var roleNames: [String] { config.roles.keys.sorted() }

    /// A bucket that must exist, and who named it.
    public struct RequiredBucket: Sendable, Equatable {
        public var name: String
        /// `Buckets` (config.json), or the policy file that names it.
        public var namedBy: String
    }

    /// `Buckets`, then (unless `CreatePolicyBuckets` is false) the buckets the role policies name
    /// literally, each once.
    public var requiredBuckets: [RequiredBucket] {
        var required = config.buckets.map { RequiredBucket(name: $0, namedBy: "Buckets") }
        for collection in config.collections where !required.contains(where: { $0.name == collection.bucket }) {
            required.append(RequiredBucket(name: collection.bucket, namedBy: "Collections.\(collection.name)"))
        }
        guard config.createPolicyBuckets else { return required }
        for role in roleNames {
            guard let policy = policies[role] else { continue }
            for name in policy.literalBucketNames where !required.contains(where: { $0.name == name }) {
                required.append(RequiredBucket(name: name, namedBy: policy.file))
            }
        }
        return required
    }
}

/// What a reload changes, for its log line.
public struct ConfigChanges: Sendable, Equatable {
    /// Keys of config.json whose new values apply now.
    public var applied: [String] = []
    /// Keys whose new values wait for a restart.
    public var needRestart: [String] = []
    /// Policy files whose content changed (new files come with a change to `Roles` or `PolicyFile`).
    public var policyFiles: [String] = []
    /// Upstream key files whose content changed (rotated keys; never their content).
    public var upstreamKeyFiles: [String] = []

    public var isEmpty: Bool { applied.isEmpty && needRestart.isEmpty && policyFiles.isEmpty && upstreamKeyFiles.isEmpty }

    public init(from running: ConfigSnapshot, to next: ConfigSnapshot) {
        var restartOnly = Set(TollgateConfig.restartOnlyKeys.map(\.key))
        // Under AssumeRoleArn these are the upstream's keys, which apply on reload.
        if running.config.upstream.assumeRoleArn && next.config.upstream.assumeRoleArn {
            restartOnly.subtract(["AccessKeyID", "AccessKeySecret"])
        }
        for key in next.config.changedKeys(since: running.config) {
            if restartOnly.contains(key) { needRestart.append(key) } else { applied.append(key) }
        }
        policyFiles = Set(next.config.roles.values).filter { file in
            running.contents[file] != nil && running.contents[file] != next.contents[file]
        }.sorted()
        upstreamKeyFiles = Set(next.config.upstream.keyFiles).filter { file in
            running.contents[file] != nil && running.contents[file] != next.contents[file]
        }.sorted()
    }
}

/// The configuration in force: one `ConfigSnapshot`, replaced whole by `ConfigReloader`.
public final class LiveConfig: Sendable {
    private let snapshot: Mutex<ConfigSnapshot>

    public init(_ snapshot: ConfigSnapshot) {
        self.snapshot = Mutex(snapshot)
    }

    /// The snapshot in force now. Read it once per request.
    public var current: ConfigSnapshot { snapshot.withLock { $0 } }

    func replace(with next: ConfigSnapshot) {
        snapshot.withLock { $0 = next }
    }
}
