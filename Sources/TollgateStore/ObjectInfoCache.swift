import NIOCore
import Synchronization

/// Committed object rows by bucket and key, so that GET and HEAD of a hot object skip SQLite,
/// and the bytes of small objects, so that their GETs skip the file system too.
///
/// The store is the only writer of its database, and every write goes through
/// `MetadataIndex.write`, which calls `invalidate()` after the transaction ends and before
/// the files of replaced versions are deleted. A lookup that missed remembers the generation it
/// started in and may fill an entry only if no write ended since: a row (or bytes) read before a
/// commit can never be stored after that commit's invalidation. So a cached row is always the
/// committed one, and cached bytes are always that row's bytes.
final class ObjectInfoCache: Sendable {
    private struct Key: Hashable {
        let bucket: String
        let key: String
    }

    private struct Entry {
        var object: StoredObject
        var body: ByteBuffer?
    }

    private struct State {
        var generation: UInt64 = 0
        var entries: [Key: Entry] = [:]
        var bodyBytes = 0
    }

    /// Entries kept at most; a full cache is emptied rather than tracked for recency.
    let capacity: Int
    /// Objects up to this size keep their bytes in the entry.
    let maximumBodySize: Int
    /// Bytes kept in all entries together, at most.
    let bodyCapacity: Int
    private let state = Mutex(State())

    init(capacity: Int = 8192, maximumBodySize: Int = 8 * 1024, bodyCapacity: Int = 16 * 1024 * 1024) {
        self.capacity = capacity
        self.maximumBodySize = maximumBodySize
        self.bodyCapacity = bodyCapacity
    }

    /// The cached row and bytes, or the generation a miss started in (to pass to `fill`).
    func get(bucket: String, key: String) -> (object: StoredObject?, body: ByteBuffer?, generation: UInt64) {
        state.withLock { state in
            let entry = state.entries[Key(bucket: bucket, key: key)]
            return (entry?.object, entry?.body, state.generation)
        }
    }

    /// Stores a row read in `generation`, and its whole body if given and small enough, unless
    /// a write ended since.
    func fill(_ object: StoredObject, body: ByteBuffer? = nil, generation: UInt64) {
        guard capacity > 0 else { return }
        let info = object.info
        let body = body.flatMap { $0.readableBytes == info.size && $0.readableBytes <= maximumBodySize ? $0 : nil }
        state.withLock { state in
            guard state.generation == generation else { return }
            let key = Key(bucket: info.bucket, key: info.key)
            let added = body?.readableBytes ?? 0
            if (state.entries[key] == nil && state.entries.count >= capacity) || state.bodyBytes + added > bodyCapacity {
                state.entries.removeAll(keepingCapacity: true)
                state.bodyBytes = 0
            }
            let previous = state.entries.updateValue(Entry(object: object, body: body), forKey: key)
            state.bodyBytes += added - (previous?.body?.readableBytes ?? 0)
        }
    }

    /// Forgets every row; called after each write transaction, committed or not.
    func invalidate() {
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll(keepingCapacity: true)
            state.bodyBytes = 0
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
    var cachedBodyBytes: Int { state.withLock { $0.bodyBytes } }
}
