import Foundation
import Logging
import ServiceLifecycle
import TollgatePolicy

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
        await runReloadLoop(every: interval, poll: { reload(reason: "file changed", onlyIfChanged: true) },
                            onSignal: { reload(reason: "SIGHUP", onlyIfChanged: false) })
    }

    func reload(reason: String, onlyIfChanged: Bool) {
        do {
            if onlyIfChanged {
                guard try policies.reloadIfChanged() else { return }
            } else {
                try policies.reload()
            }
            logger.info("policies reloaded", metadata: ["policy.reason": "\(reason)", "policy.roles": "\(policies.roleNames.joined(separator: ","))"])
        } catch {
            for diagnostic in error.diagnostics {
                logger.error("policy reload refused, keeping the previous policies", metadata: ["policy.error": "\(diagnostic)"])
            }
        }
    }
}
