import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import TollgateServer
import TollgateStore

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the token endpoint and the object gateway.")

    @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).")
    var config: String?

    func run() async throws {
        // Everything the server creates (store files, SQLite database, root credentials) is
        // readable by its own user only: files 0600, directories 0700.
        umask(0o077)
        let config = try loadConfigOrExit(config)
        let root = try resolveRootOrExit(config)
        let policies: PolicyStore
        do {
            policies = try PolicyStore(config: config)
        } catch {
            for diagnostic in error.diagnostics { printError("tollgate: policy error: \(diagnostic)") }
            throw ExitCode(2)
        }

        let logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap(LogOutput.standardOutput.handler(logLevel: logLevel))
        defer { LogOutput.standardOutput.flush() }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
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

        var state = try TollgateState(config: config, root: root, policies: policies)
        let revocations = try openRevocationsOrExit(config)
        state.revocations = revocations
        let store: LocalObjectStore
        do {
            store = try await openStore(config: config, logger: logger)
        } catch {
            LogOutput.standardOutput.flush()
            printError("tollgate: cannot open the object store in \(config.dataDirectory): \(error)")
            throw ExitCode(2)
        }
        defer { try? store.close() }
        let tokenApp = buildTokenApplication(state: state, metrics: registry, logger: logger)
        let gatewayApp = buildGatewayApplication(state: state, store: store, logger: logger)
        logger.info("token endpoint listening", metadata: ["listen.address": "\(config.listenAddress):\(config.port)", "token.lifetime": "\(config.tokenExpireTime)"])
        logger.info("gateway listening", metadata: ["listen.address": "\(config.gatewayAddress):\(config.gatewayPort)"])
        let group = ServiceGroup(
            configuration: .init(
                services: [tokenApp, gatewayApp, PolicyReloader(policies: policies, logger: logger),
                           UploadExpiry(store: store, config: config, logger: logger),
                           RevocationWatcher(store: revocations, logger: logger)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }
}
