import TollgateStore
import GRDB
import Synchronization

/// Write transactions committed in groups. A write that arrives while the writer is busy waits,
/// and every write that waited runs in the next transaction, each in a savepoint of its own, so
/// one WAL sync (synchronous = FULL) commits them all. Under concurrent uploads this saves a
/// sync per commit without delaying any: a write that finds the writer idle starts at once.
///
/// Each caller still sees its own transaction:
/// - it resumes only after the transaction holding its write committed (durable), or failed;
/// - a write that throws anything but a database error (a failed precondition, a missing
///   bucket) rolls back its savepoint only, and the others commit;
/// - a write that meets a database error fails alone: the transaction is rolled back (SQLite
///   may already have rolled it back, for a full disk) and the writes that were in it run
///   again in a new one. Writes are pure functions of the database, so running one again is
///   safe.
/// - a commit that fails (the disk is full, the sync fails) fails every write in it.
final class GroupCommit: Sendable {
    /// At most this many writes share a transaction.
    static let largestGroup = 128

    private struct Pending: Sendable {
        /// Runs the write in a savepoint and keeps its outcome; returns a database error it met.
        let run: @Sendable (Database) -> DatabaseError?
        /// Resumes the caller with the outcome `run` kept, or with the error given.
        let finish: @Sendable ((any Error)?) -> Void
    }

    private struct State {
        var queue: [Pending] = []
        /// Whether a drain is on the writer (or queued for it).
        var draining = false
    }

    private let pool: DatabasePool
    private let state = Mutex(State())
    /// Transactions committed or attempted (tests count the groups).
    let transactions = Atomic<Int>(0)

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Writes waiting for the writer (tests wait for a group to be complete).
    var waiting: Int { state.withLock { $0.queue.count } }

    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let outcome = Outcome<T>()
            enqueue(Pending(
                run: { db in
                    do {
                        try db.inSavepoint {
                            outcome.result = .success(try updates(db))
                            return .commit
                        }
                    } catch let error as DatabaseError {
                        return error
                    } catch {
                        outcome.result = .failure(error)
                    }
                    return nil
                },
                finish: { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(with: outcome.result!) }
                }
            ))
        }
    }

    private func enqueue(_ pending: Pending) {
        let start = state.withLock { state in
            state.queue.append(pending)
            defer { state.draining = true }
            return !state.draining
        }
        if start { pool.asyncWriteWithoutTransaction { db in self.drain(db) } }
    }

    /// On the writer: commits groups until no write waits.
    private func drain(_ db: Database) {
        while true {
            let group: [Pending] = state.withLock { state in
                let count = min(state.queue.count, Self.largestGroup)
                if count == 0 { state.draining = false }
                defer { state.queue.removeFirst(count) }
                return Array(state.queue.prefix(count))
            }
            if group.isEmpty { return }
            commit(group[...], db)
        }
    }

    private func commit(_ group: ArraySlice<Pending>, _ db: Database) {
        var group = group
        while !group.isEmpty {
            transactions.add(1, ordering: .relaxed)
            var failed: (index: Int, error: DatabaseError)?
            do {
                try db.inTransaction(.immediate) {
                    for index in group.indices {
                        if let error = group[index].run(db) {
                            failed = (index, error)
                            return .rollback
                        }
                    }
                    return .commit
                }
            } catch {
                // BEGIN or COMMIT failed: nothing in the group committed.
                if failed == nil {
                    for pending in group { pending.finish(error) }
                    return
                }
            }
            guard let failed else {
                for pending in group { pending.finish(nil) }
                return
            }
            group[failed.index].finish(failed.error)
            group.remove(at: failed.index)
        }
    }
}

/// What a write of a group returned or threw; set and read on the writer only.
private final class Outcome<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
