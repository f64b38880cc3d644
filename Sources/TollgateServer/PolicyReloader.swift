import Foundation
import Logging
import ServiceLifecycle
import TollgatePolicy
import UnixSignals

/// Reloads the role policies when a policy file changes (checked every `interval`) and on
/// SIGHUP. A broken edit is logged with its diagnostics and the policies in force stay.
public struct PolicyReloader: Service {
    let policies: PolicyStore
    let logger: Logger
    let interval: Duration

    public init(policies: PolicyStore, logger: Logger, interval: Duration = .seconds(2)) {
        self.policies = policies
        self.logger = logger
        self.interval = interval
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in await UnixSignalsSequence(trapping: .sighup) {
                    reload(reason: "SIGHUP")
                }
            }
            group.addTask {
                var seen = policies.fileStamps()
                while !Task.isCancelled {
                    do { try await Task.sleep(for: interval) } catch { return }
                    let now = policies.fileStamps()
                    if now != seen {
                        seen = now
                        reload(reason: "file changed")
                    }
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }

    func reload(reason: String) {
        do {
            try policies.reload()
            logger.info("policies reloaded", metadata: ["policy.reason": "\(reason)", "policy.roles": "\(policies.roleNames.joined(separator: ","))"])
        } catch {
            for diagnostic in error.diagnostics {
                logger.error("policy reload refused, keeping the previous policies", metadata: ["policy.error": "\(diagnostic)"])
            }
        }
    }
}
