import Foundation
import Logging
import ServiceLifecycle

/// Picks up revocations written by another process (`tollgate token revoke`): checks the
/// revocation file's inode, size and modification time every `interval`, and on SIGHUP. A file
/// that cannot be read or parsed is logged and the revocations in force stay.
public struct RevocationWatcher: Service {
    let store: RevocationStore
    let logger: Logger
    let interval: Duration

    public init(store: RevocationStore, logger: Logger, interval: Duration = .seconds(1)) {
        self.store = store
        self.logger = logger
        self.interval = interval
    }

    public func run() async throws {
        await runReloadLoop(every: interval, poll: { reload(reason: "file changed") }, onSignal: { reload(reason: "SIGHUP") })
    }

    func reload(reason: String) {
        do {
            if try store.reloadIfChanged() {
                logger.info("revocations reloaded", metadata: ["revocation.reason": "\(reason)", "revocation.count": "\(store.list.count)"])
            }
        } catch {
            logger.error("revocation file refused, keeping the revocations in force", metadata: ["revocation.error": "\(error)"])
        }
    }
}
