import ArgumentParser
import CLinux
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import NIOPosix
import TollgateConfig
import TollgateCrypto
import TollgateGateway
import TollgateHTTP
import TollgateServer
import TollgateStorage
import TollgateStore
import TollgateTokenService

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the token endpoint and the object gateway.")
    /// Threads of the one blocking pool: blocking calls (mostly the local store's file system
    /// calls) waiting at once, at most; the rest queue.
    static let blockingThreads = 8

    @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).")
    var config: String?

    func run() async throws {
        // glibc serves allocations of 128 KiB and more with mmap, but raises that threshold to
        // the size of each such block freed, after which large buffers (body parts, the S3
        // store's upload chunks) come from the heap and their memory stays with the process:
        // 64 concurrent 100 MiB uploads to the s3 backend peaked at 230 MiB of RSS, 146 MiB with
        // the threshold fixed (bench/rgw.sh). Fixed at 256 KiB: blocks that large go back to the
        // system when freed.
        _ = tollgate_fix_mmap_threshold(256 * 1024)
        // Everything the server creates (store files, SQLite database, root credentials) is
        // readable by its own user only: files 0600, directories 0700.
        umask(0o077)
        // Before anything else: a metric made before the metrics system is bootstrapped (the
        // first configuration's rate limiters, say) would count into nothing until a reload.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(makeMetricsFactory(registry: registry))
        let files: ConfigFiles
        do {
            files = try ConfigFiles.read(path: configPath(config) ?? "config.json")
        } catch {
            for problem in error.problems {
                switch problem {
                case .config(let error): printError("tollgate: config error: \(error)")
                case .policy(let diagnostic): printError("tollgate: policy error: \(diagnostic)")
                }
            }
            throw ExitCode(2)
        }
        let config = files.config
        let root = try resolveRootOrExit(config)
        let tokenCertificates = try config.tls.map(loadCertificatesOrExit)
        let gatewayCertificates = try config.gatewayTLS.map(loadCertificatesOrExit)
        let snapshot: ConfigSnapshot
        do {
            snapshot = try ConfigSnapshot(files, root: root)
        } catch {
            printError("tollgate: config error: \(error)")
            throw ExitCode(2)
        }

        let logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        guard let logFormat = LogOutput.Format(environment: ProcessInfo.processInfo.environment["LOG_FORMAT"]) else {
            printError("tollgate: LOG_FORMAT must be text or json")
            throw ExitCode(2)
        }
        LoggingSystem.bootstrap(LogOutput.standardOutput.handler(logLevel: logLevel, format: logFormat))
        defer { LogOutput.standardOutput.flush() }
        let logger = Logger(label: "tollgate")

        if !config.unknownKeys.isEmpty {
            logger.warning("unknown config keys ignored", metadata: ["config.file": "\(config.path)", "config.keys": "\(config.unknownKeys.joined(separator: ","))"])
        }
        if config.authentication == nil {
            logger.warning("no Authentication section: anyone who can reach the token endpoint gets credentials for the default role",
                           metadata: ["config.file": "\(config.path)"])
        }
        if root.generated {
            // Printed once, at first start, on purpose: the operator needs them to use the gateway.
            // Written at once (not through stdio's buffer, which a pipe only flushes at exit).
            LogOutput.standardOutput.flush()
            printNow("""
                Tollgate generated root credentials and stored them in \(config.dataDirectory)/\(RootCredentials.fileName) (mode 0600):
                  AccessKeyID:     \(root.accessKeyID)
                  AccessKeySecret: \(root.accessKeySecret)
                They are printed only this once.
                """)
        }
        logger.info("root access key", metadata: ["root.access_key_id": "\(root.accessKeyID)"])
        // Policies with warnings load; say what `tollgate policy check` would (once per file).
        let warnings = Set(snapshot.policies.values.flatMap(\.warnings))
        for warning in warnings.sorted(by: { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) }) {
            logger.warning("policy warning", metadata: ["policy.diagnostic": "\(warning)"])
        }

        var state = TollgateState(snapshot)
        // The data directory holds the token audit file (and, with the local backend, the store and
        // the revocations); with the s3 backend nothing else, so it may not exist yet.
        try? FileManager.default.createDirectory(atPath: config.dataDirectory, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        // The one pool for blocking work, handed to everything that blocks (see BlockingPoolService).
        let blocking = BlockingPoolService(threads: Self.blockingThreads)
        let pool = blocking.pool
        let tokenAudit = TokenAuditLog(dataDirectory: config.dataDirectory, logger: logger, pool: pool)
        state.tokenAudit = tokenAudit
        let store: any ObjectStore
        do {
            store = try await StoreFactory.open(config.storage, dataDirectory: config.dataDirectory,
                                                maxUploadsPerBucket: config.maxMultipartUploadsPerBucket, pool: pool, logger: logger)
        } catch {
            LogOutput.standardOutput.flush()
            printError("tollgate: cannot open the object store (\(config.storage.name)\(config.storage.backend == .local ? " in \(config.dataDirectory)" : "")): \(error)")
            throw ExitCode(2)
        }
        // Revocations live where every instance sees them: in the storage backend when it is
        // shared, else in the data directory.
        let revocations: RevocationStore
        if let shared = store.sharedDocuments {
            revocations = RevocationStore(shared: shared)
            do { try await revocations.refresh() } catch {
                logger.error("revocations cannot be read yet; they apply once the storage backend answers", metadata: ["revocation.error": "\(error)"])
            }
        } else {
            revocations = try openRevocationsOrExit(config, pool: pool)
        }
        state.revocations = revocations
        state.store = store
        // The mobile collections' change feeds: in the backend when it is shared, else in the data directory.
        if let shared = store.sharedDocuments {
            state.changes = ChangeFeed(documents: shared, store: store, shared: true, logger: logger)
        } else {
            state.changes = ChangeFeed(directory: (config.dataDirectory as NSString).appendingPathComponent("shared"), store: store, logger: logger,
                                       pool: pool)
        }
        await createRequiredBuckets(snapshot, store: store, logger: logger)
        let tokenApp = try buildTokenApplication(state: state, certificates: tokenCertificates, metrics: registry, logger: logger)
        let gatewayApp = try buildGatewayApplication(state: state, store: store, certificates: gatewayCertificates, logger: logger)
        logger.info("token endpoint listening", metadata: ["listen.address": "\(config.listenAddress):\(config.port)", "token.lifetime": "\(config.tokenExpireTime)",
                                                           "listen.scheme": "\(tokenCertificates == nil ? "http" : "https")"])
        logger.info("gateway listening", metadata: ["listen.address": "\(config.gatewayAddress):\(config.gatewayPort)",
                                                    "listen.scheme": "\(gatewayCertificates == nil ? "http" : "https")"])
        // First, so told last to stop: the blocking pool after everything that submits to it, the
        // MD5 lane threads after the listeners that use them.
        var services: [any Service] = [blocking, MD5LanesService(lanes: MD5Lanes.shared, pool: pool), tokenApp, gatewayApp,
                                       ConfigReloader(live: state.live, store: store, logger: logger, pool: pool),
                                       UploadExpiry(store: store, live: state.live, logger: logger),
                                       RevocationWatcher(store: revocations, logger: logger), tokenAudit]
        var certificates: [(name: String, certificates: TLSCertificates)] = []
        if let tokenCertificates { certificates.append((name: "token", certificates: tokenCertificates)) }
        if let gatewayCertificates { certificates.append((name: "gateway", certificates: gatewayCertificates)) }
        if !certificates.isEmpty { services.append(TLSReloader(listeners: certificates, logger: logger, pool: pool)) }
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch {
            try? await store.close()
            throw error
        }
        try? await store.close()
    }
}

/// Ends the MD5 lane threads (`MD5Lanes.stop`) when the services stop; until then it waits.
struct MD5LanesService: Service {
    let lanes: MD5Lanes?
    let pool: NIOThreadPool

    func run() async throws {
        try? await gracefulShutdown()
        guard let lanes else { return }
        // `stop` waits for the threads to finish what they hold: a blocking wait, on the pool.
        try await pool.runIfActive { lanes.stop() }
    }
}
