import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TollgateHTTP

/// Picks up revocations written by another process (`tollgate token revoke`) or, with a shared
/// list, another instance: checks the revocation file's inode, size and modification time, or
/// the backend's document with a conditional GET, every `interval`, and on SIGHUP. A list that
/// cannot be read or parsed is logged (once until it reads again) and the revocations in force stay.
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
        await runReloadLoop(every: interval, poll: { await reload(reason: "changed") }, onSignal: { await reload(reason: "SIGHUP") })
    }

    /// A shared list that cannot be read (the backend is down) is logged when that starts and when it ends.
    private let failing = Failing()

    final class Failing: Sendable {
        let value = Atomic<Bool>(false)
    }

    func reload(reason: String) async {
        do {
            if try await store.refresh() {
                logger.info("revocations reloaded", metadata: ["revocation.reason": "\(reason)", "revocation.count": "\(store.list.count)"])
            }
            if failing.value.exchange(false, ordering: .relaxed) {
                logger.notice("revocations readable again", metadata: ["revocation.count": "\(store.list.count)"])
            }
        } catch {
            if store.isShared, failing.value.exchange(true, ordering: .relaxed) { return }
            logger.error("revocations cannot be read, keeping the revocations in force", metadata: ["revocation.error": "\(error)"])
        }
    }
}
