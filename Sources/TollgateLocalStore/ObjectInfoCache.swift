import CoreMetrics
import TollgateStore
import NIOCore
import Synchronization

/// Committed object rows by bucket and key, so that GET and HEAD of a hot object skip SQLite,
/// the bytes of small objects, so that their GETs skip the file system too, and open
/// descriptors of larger objects' files, so that their GETs skip opening the file (and, when its
/// pages are cached, need no pool job at all: `readAtOnce`).
///
/// The store is the only writer of its database, and every write goes through
/// `MetadataIndex.write`, which calls `invalidate(_:)` with the keys (or bucket) it wrote after
/// the transaction ends and before the files of replaced versions are deleted; entries of other
/// keys stay, so a hot set keeps being served from memory under any number of writes elsewhere.
/// A lookup that missed remembers the generation it started in and may fill an entry only if no
/// write to that key ended since (`recent` remembers the scopes of the last writes; a lookup
/// older than what it remembers fills nothing): a row (or bytes) read before a commit can never
/// be stored after that commit's invalidation. So a cached row is always the committed one, and
/// cached bytes are always that row's bytes. Open files are kept by file id, which is never
/// reused, so the file of a cached row's id is that row's file; and since invalidation drops
/// the files of the entries it drops before any replaced file is deleted, the cache never keeps
/// a deleted file open (a body being sent may, until it is sent).
final class ObjectInfoCache: Sendable {
    private struct Key: Hashable {
        let bucket: String
        let key: String
    }

    private struct Entry {
        var object: StoredObject
        var body: ByteBuffer?
    }

    /// What a write transaction changed, for `invalidate`.
    enum Scope: Sendable {
        /// Rows of these keys in this bucket.
        case keys(bucket: String, [String])
        /// Any row of the bucket.
        case bucket(String)
        /// Any row.
        case everything
        /// No object row (buckets, CORS rules, uploads and parts).
        case nothing

        func covers(bucket: String, key: String) -> Bool {
            switch self {
            case .keys(let written, let keys): written == bucket && keys.contains(key)
            case .bucket(let written): written == bucket
            case .everything: true
            case .nothing: false
            }
        }
    }

    private struct State {
        var generation: UInt64 = 0
        var entries: [Key: Entry] = [:]
        var bodyBytes = 0
        /// Open descriptors of files, by file id.
        var files: [String: FileDescriptor] = [:]
        /// The last writes, oldest first: the generation each one ended and what it wrote.
        var recent: [(generation: UInt64, scope: Scope)] = []

        /// Whether a write to bucket/key ended after `generation` (or may have: one older than `recent` reaches).
        func written(since generation: UInt64, bucket: String, key: String) -> Bool {
            guard generation != self.generation else { return false }
            guard let oldest = recent.first, oldest.generation <= generation + 1 else { return true }
            return recent.contains { $0.generation > generation && $0.scope.covers(bucket: bucket, key: key) }
        }

        /// Drops the entry of `key`, handing back its open file (to close outside the lock).
        mutating func remove(_ key: Key) -> FileDescriptor? {
            guard let entry = entries.removeValue(forKey: key) else { return nil }
            bodyBytes -= entry.body?.readableBytes ?? 0
            return files.removeValue(forKey: entry.object.fileID)
        }

        /// Drops one entry to make room (whichever the table yields first).
        mutating func evictOne() -> FileDescriptor? {
            guard let first = entries.first else { return nil }
            return remove(first.key)
        }
    }

    /// Writes whose scopes are remembered for lookups that raced them.
    static let rememberedWrites = 256

    /// Entries kept at most; a full cache drops one entry for each new one.
    let capacity: Int
    /// Objects up to this size keep their bytes in the entry.
    let maximumBodySize: Int
    /// Bytes kept in all entries together, at most.
    let bodyCapacity: Int
    /// Files kept open at most; when full, one is closed for each new one.
    let fileCapacity: Int
    private let state = Mutex(State())
    private let hits = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)
    /// `tollgate_store_cache_lookups_total{result="hit"|"miss"}`: the read path's hit rate.
    private let hitCounter = Counter(label: "tollgate_store_cache_lookups_total", dimensions: [("result", "hit")])
    private let missCounter = Counter(label: "tollgate_store_cache_lookups_total", dimensions: [("result", "miss")])

    init(capacity: Int = 8192, maximumBodySize: Int = 8 * 1024, bodyCapacity: Int = 16 * 1024 * 1024, fileCapacity: Int = 256) {
        self.capacity = capacity
        self.maximumBodySize = maximumBodySize
        self.bodyCapacity = bodyCapacity
        self.fileCapacity = fileCapacity
    }

    /// The cached row, with its bytes or its open file, or the generation a miss started in
    /// (to pass to `fill` and `keepOpen`).
    func get(bucket: String, key: String) -> (object: StoredObject?, body: ByteBuffer?, file: FileDescriptor?, generation: UInt64) {
        let found = state.withLock { state -> (object: StoredObject?, body: ByteBuffer?, file: FileDescriptor?, generation: UInt64) in
            guard let entry = state.entries[Key(bucket: bucket, key: key)] else { return (nil, nil, nil, state.generation) }
            return (entry.object, entry.body, entry.body == nil ? state.files[entry.object.fileID] : nil, state.generation)
        }
        if found.object == nil {
            misses.add(1, ordering: .relaxed)
            missCounter.increment()
        } else {
            hits.add(1, ordering: .relaxed)
            hitCounter.increment()
        }
        return found
    }

    /// Whether no write to bucket/key ended since `generation` (as far as the cache remembers:
    /// false when it cannot tell). Invalidation comes before the replaced files are deleted, so
    /// a file leased before this answers true is deleted, if at all, after the lease ends.
    func unwritten(bucket: String, key: String, since generation: UInt64) -> Bool {
        state.withLock { !$0.written(since: generation, bucket: bucket, key: key) }
    }

    /// Lookups that found their row, and lookups that did not, since the store opened.
    var statistics: (hits: Int, misses: Int) { (hits.load(ordering: .relaxed), misses.load(ordering: .relaxed)) }

    /// Keeps `file`, open on the file of `object`'s row as read in `generation`, unless a write
    /// to its key ended since or the row is not cached.
    func keepOpen(_ file: FileDescriptor, of object: StoredObject, generation: UInt64) {
        guard fileCapacity > 0 else { return }
        let info = object.info
        let closed = state.withLock { state -> FileDescriptor? in
            guard !state.written(since: generation, bucket: info.bucket, key: info.key),
                  state.entries[Key(bucket: info.bucket, key: info.key)]?.object == object else { return nil }
            var closed: FileDescriptor?
            if state.files[object.fileID] == nil, state.files.count >= fileCapacity, let first = state.files.first {
                closed = state.files.removeValue(forKey: first.key)
            }
            state.files[object.fileID] = file
            return closed
        }
        _ = closed  // closed here, outside the lock
    }

    /// Stores a row read in `generation`, and its whole body if given and small enough, unless
    /// a write to its key ended since.
    func fill(_ object: StoredObject, body: ByteBuffer? = nil, generation: UInt64) {
        guard capacity > 0 else { return }
        let info = object.info
        let body = body.flatMap { $0.readableBytes == info.size && $0.readableBytes <= maximumBodySize ? $0 : nil }
        let closed = state.withLock { state -> [FileDescriptor] in
            guard !state.written(since: generation, bucket: info.bucket, key: info.key) else { return [] }
            let key = Key(bucket: info.bucket, key: info.key)
            let added = body?.readableBytes ?? 0
            var closed: [FileDescriptor] = []
            if let replaced = state.remove(key) { closed.append(replaced) }
            while !state.entries.isEmpty, state.entries.count >= capacity || state.bodyBytes + added > bodyCapacity {
                if let file = state.evictOne() { closed.append(file) }
            }
            state.entries[key] = Entry(object: object, body: body)
            state.bodyBytes += added
            return closed
        }
        _ = closed  // closed here, outside the lock
    }

    /// Forgets the rows `scope` covers and closes the files kept for them (once no body being
    /// sent holds them); called after each write transaction, committed or not.
    func invalidate(_ scope: Scope = .everything) {
        if case .nothing = scope { return }
        let closed = state.withLock { state -> [FileDescriptor] in
            state.generation &+= 1
            state.recent.append((state.generation, scope))
            if state.recent.count > Self.rememberedWrites { state.recent.removeFirst(state.recent.count - Self.rememberedWrites) }
            var closed: [FileDescriptor] = []
            switch scope {
            case .keys(let bucket, let keys):
                for key in keys { if let file = state.remove(Key(bucket: bucket, key: key)) { closed.append(file) } }
            case .bucket(let bucket):
                for key in state.entries.keys where key.bucket == bucket { if let file = state.remove(key) { closed.append(file) } }
            case .everything:
                state.entries.removeAll(keepingCapacity: true)
                state.bodyBytes = 0
                closed = Array(state.files.values)
                state.files = [:]
            case .nothing:
                break
            }
            return closed
        }
        _ = closed  // closed here, outside the lock
    }

    var count: Int { state.withLock { $0.entries.count } }
    var openFiles: Int { state.withLock { $0.files.count } }
    var cachedBodyBytes: Int { state.withLock { $0.bodyBytes } }
}
