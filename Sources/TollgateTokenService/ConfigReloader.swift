import Foundation
import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization
import TollgateConfig
import TollgateHTTP
import TollgateStore

/// Reloads config.json and the policy files of its roles when one changes (their contents are
/// compared every `interval`) and on SIGHUP. Everything is read and validated first
/// (`ConfigFiles`, `ConfigSnapshot`); a refused edit is logged with file and reason, once per
/// content, and the running configuration stays. A good one is swapped in whole, logged with
/// the keys and files it changed; then the buckets it requires are created and the store's
/// upload limit follows it.
public final class ConfigReloader: Service, Sendable {
    let live: LiveConfig
    let store: any ObjectStore
    let logger: Logger
    let interval: Duration
    let environment: [String: String]
    let clock: @Sendable () -> Date
    /// What the last attempt read of each file it needed (nil: unreadable): the poll reloads
    /// when any of them reads differently.
    private let seen: Mutex<[String: Data?]>

    /// Where the files are read (it blocks): the server's one blocking pool.
    let pool: NIOThreadPool

    public init(live: LiveConfig, store: any ObjectStore, logger: Logger, interval: Duration = .seconds(1),
                environment: [String: String] = ProcessInfo.processInfo.environment,
                clock: @escaping @Sendable () -> Date = { Date() }, pool: NIOThreadPool) {
        self.pool = pool
        self.live = live
        self.store = store
        self.logger = logger
        self.interval = interval
        self.environment = environment
        self.clock = clock
        seen = Mutex(live.current.contents.mapValues(Optional.some))
    }

    public func run() async throws {
        await runReloadLoop(every: interval, poll: { await self.reload(reason: "file changed", onlyIfChanged: true) },
                            onSignal: { await self.reload(reason: "SIGHUP", onlyIfChanged: false) })
    }

    /// Reads the files on `pool` (they block), never on the task's executor.
    func reload(reason: String, onlyIfChanged: Bool) async {
        if onlyIfChanged {
            let files = seen.withLock { $0 }
            let changed = try? await pool.runIfActive {
                files.contains(where: { path, content in Self.read(path) != content })
            }
            guard changed == true else { return }
        }
        let running = live.current
        let (environment, clock) = (environment, clock)
        let loaded = try? await pool.runIfActive { () -> Result<ConfigSnapshot, ConfigLoadError> in
            do throws(ConfigLoadError) {
                return .success(try ConfigSnapshot(try ConfigFiles.read(path: running.config.path, environment: environment),
                                                   root: running.root, running: running, clock: clock))
            } catch {
                return .failure(error)
            }
        }
        guard let loaded else { return }  // the pool is shutting down: so is the server
        let next: ConfigSnapshot
        switch loaded {
        case .success(let snapshot):
            next = snapshot
        case .failure(let error):
            seen.withLock { $0 = error.contents }
            for problem in error.problems {
                logger.error("config reload refused, keeping the running configuration", metadata: [
                    "config.file": "\(problem.file)", "config.error": "\(problem)", "reload.reason": "\(reason)",
                ])
            }
            return
        }
        seen.withLock { $0 = next.contents.mapValues(Optional.some) }
        live.replace(with: next)
        log(ConfigChanges(from: running, to: next), next, reason: reason)
        store.setMaxUploadsPerBucket(next.config.maxMultipartUploadsPerBucket)
        await createRequiredBuckets(next, store: store, logger: logger)
    }

    func log(_ changes: ConfigChanges, _ next: ConfigSnapshot, reason: String) {
        if !changes.needRestart.isEmpty {
            logger.warning("changed in config.json; takes effect after a restart", metadata: [
                "config.file": "\(next.config.path)", "config.keys": "\(changes.needRestart.joined(separator: ","))",
            ])
        }
        let nothingApplies = changes.applied.isEmpty && changes.policyFiles.isEmpty && changes.upstreamKeyFiles.isEmpty
        if nothingApplies && !changes.needRestart.isEmpty { return }  // the warning said it all
        logger.info(nothingApplies ? "config reloaded, nothing changed" : "config reloaded", metadata: [
            "reload.reason": "\(reason)",
            "config.changed": "\(changes.applied.isEmpty ? "-" : changes.applied.joined(separator: ","))",
            "config.policy_files": "\(changes.policyFiles.isEmpty ? "-" : changes.policyFiles.joined(separator: ","))",
            "config.upstream_key_files": "\(changes.upstreamKeyFiles.isEmpty ? "-" : changes.upstreamKeyFiles.joined(separator: ","))",
            "policy.roles": "\(next.roleNames.joined(separator: ","))",
        ])
    }

    static func read(_ path: String) -> Data? {
        try? Data(contentsOf: URL(fileURLWithPath: path))
    }
}

/// Creates the buckets `snapshot` requires that the store lacks (at start-up and after every
/// reload), logging each one created. A name a policy gives that is not a valid bucket name is
/// skipped with a warning (`Buckets` is checked when the config is loaded).
public func createRequiredBuckets(_ snapshot: ConfigSnapshot, store: some ObjectStore, logger: Logger) async {
    var valid: [ConfigSnapshot.RequiredBucket] = []
    for bucket in snapshot.requiredBuckets {
        guard StoreNames.isValidBucketName(bucket.name) else {
            logger.warning("not a valid bucket name, not created", metadata: [
                "bucket.name": "\(bucket.name)", "bucket.named_by": "\(bucket.namedBy)",
            ])
            continue
        }
        valid.append(bucket)
    }
    do {
        for name in try await store.ensureBuckets(valid.map(\.name)) {
            let namedBy = valid.first { $0.name == name }?.namedBy ?? "-"
            logger.info("bucket created", metadata: ["bucket.name": "\(name)", "bucket.named_by": "\(namedBy)"])
        }
    } catch {
        logger.error("cannot create the required buckets", metadata: ["store.error": "\(error)"])
    }
}
