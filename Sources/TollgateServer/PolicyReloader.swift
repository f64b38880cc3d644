import Logging
import ServiceLifecycle
import UnixSignals
import TollgatePolicy

/// Reloads the role policies on SIGHUP. A broken edit is logged with its diagnostics and the
/// policies in force stay as they were.
public struct PolicyReloader: Service {
    let policies: PolicyStore
    let logger: Logger

    public init(policies: PolicyStore, logger: Logger) {
        self.policies = policies
        self.logger = logger
    }

    public func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            do {
                try policies.reload()
                logger.info("policies reloaded", metadata: ["policy.roles": "\(policies.roleNames.joined(separator: ","))"])
            } catch {
                for diagnostic in error.diagnostics {
                    logger.error("policy reload refused, keeping the previous policies", metadata: ["policy.error": "\(diagnostic)"])
                }
            }
        }
    }
}
