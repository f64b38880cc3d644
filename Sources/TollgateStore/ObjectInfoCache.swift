import Synchronization

/// Committed object rows by bucket and key, so that GET and HEAD of a hot object skip SQLite.
///
/// The store is the only writer of its database, and every write goes through
/// `LocalObjectStore.write`, which calls `invalidate()` after the transaction ends and before
/// the files of replaced versions are deleted. A lookup that missed remembers the generation it
/// started in and may fill the entry only if no write ended since: a row read before a commit
/// can never be stored after that commit's invalidation. So a cached row is always the
/// committed one, and its file exists until the next write's invalidation.
final class ObjectInfoCache: Sendable {
    private struct Key: Hashable {
        let bucket: String
        let key: String
    }

    private struct State {
        var generation: UInt64 = 0
        var entries: [Key: ObjectInfo] = [:]
    }

    /// Entries kept at most; a full cache is emptied rather than tracked for recency.
    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int = 8192) {
        self.capacity = capacity
    }

    /// The cached row, or the generation a miss started in (to pass to `fill`).
    func get(bucket: String, key: String) -> (info: ObjectInfo?, generation: UInt64) {
        state.withLock { state in (state.entries[Key(bucket: bucket, key: key)], state.generation) }
    }

    /// Stores a row read in `generation`, unless a write ended since.
    func fill(_ info: ObjectInfo, generation: UInt64) {
        guard capacity > 0 else { return }
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[Key(bucket: info.bucket, key: info.key)] = info
        }
    }

    /// Forgets every row; called after each write transaction, committed or not.
    func invalidate() {
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll(keepingCapacity: true)
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
}
