import TollgateStore
import NIOCore
import Synchronization

/// Committed object rows by bucket and key, so that GET and HEAD of a hot object skip SQLite,
/// the bytes of small objects, so that their GETs skip the file system too, and open
/// descriptors of larger objects' files, so that their GETs skip opening the file (and, when its
/// pages are cached, need no pool job at all: `readAtOnce`).
///
/// The store is the only writer of its database, and every write goes through
/// `MetadataIndex.write`, which calls `invalidate()` after the transaction ends and before
/// the files of replaced versions are deleted. A lookup that missed remembers the generation it
/// started in and may fill an entry only if no write ended since: a row (or bytes) read before a
/// commit can never be stored after that commit's invalidation. So a cached row is always the
/// committed one, and cached bytes are always that row's bytes. Open files are kept by file id,
/// which is never reused, so the file of a cached row's id is that row's file; and since
/// invalidation drops them before any replaced file is deleted, the cache never keeps a deleted
/// file open (a body being sent may, until it is sent).
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
        /// Open descriptors of files, by file id.
        var files: [String: FileDescriptor] = [:]

        /// Forgets the open files and hands them over, for the caller to close (by dropping
        /// them) once it holds the lock no longer.
        mutating func dropFiles() -> [String: FileDescriptor] {
            defer { files = [:] }
            return files
        }
    }

    /// Entries kept at most; a full cache is emptied rather than tracked for recency.
    let capacity: Int
    /// Objects up to this size keep their bytes in the entry.
    let maximumBodySize: Int
    /// Bytes kept in all entries together, at most.
    let bodyCapacity: Int
    /// Files kept open at most; when full, they are all closed rather than tracked for recency.
    let fileCapacity: Int
    private let state = Mutex(State())

    init(capacity: Int = 8192, maximumBodySize: Int = 8 * 1024, bodyCapacity: Int = 16 * 1024 * 1024, fileCapacity: Int = 256) {
        self.capacity = capacity
        self.maximumBodySize = maximumBodySize
        self.bodyCapacity = bodyCapacity
        self.fileCapacity = fileCapacity
    }

    /// The cached row, with its bytes or its open file, or the generation a miss started in
    /// (to pass to `fill` and `keepOpen`).
    func get(bucket: String, key: String) -> (object: StoredObject?, body: ByteBuffer?, file: FileDescriptor?, generation: UInt64) {
        state.withLock { state in
            guard let entry = state.entries[Key(bucket: bucket, key: key)] else { return (nil, nil, nil, state.generation) }
            return (entry.object, entry.body, entry.body == nil ? state.files[entry.object.fileID] : nil, state.generation)
        }
    }

    /// Keeps `file`, open on the file of `object`'s row as read in `generation`, unless a write
    /// ended since or the row is not cached.
    func keepOpen(_ file: FileDescriptor, of object: StoredObject, generation: UInt64) {
        guard fileCapacity > 0 else { return }
        let closed = state.withLock { state -> [String: FileDescriptor] in
            guard state.generation == generation, state.entries[Key(bucket: object.info.bucket, key: object.info.key)]?.object == object else { return [:] }
            let full = state.files[object.fileID] == nil && state.files.count >= fileCapacity
            let closed = full ? state.dropFiles() : [:]
            state.files[object.fileID] = file
            return closed
        }
        _ = closed  // closed here, outside the lock
    }

    /// Stores a row read in `generation`, and its whole body if given and small enough, unless
    /// a write ended since.
    func fill(_ object: StoredObject, body: ByteBuffer? = nil, generation: UInt64) {
        guard capacity > 0 else { return }
        let info = object.info
        let body = body.flatMap { $0.readableBytes == info.size && $0.readableBytes <= maximumBodySize ? $0 : nil }
        let closed = state.withLock { state -> [String: FileDescriptor] in
            guard state.generation == generation else { return [:] }
            let key = Key(bucket: info.bucket, key: info.key)
            let added = body?.readableBytes ?? 0
            var closed: [String: FileDescriptor] = [:]
            if (state.entries[key] == nil && state.entries.count >= capacity) || state.bodyBytes + added > bodyCapacity {
                state.entries.removeAll(keepingCapacity: true)
                state.bodyBytes = 0
                closed = state.dropFiles()
            }
            let previous = state.entries.updateValue(Entry(object: object, body: body), forKey: key)
            state.bodyBytes += added - (previous?.body?.readableBytes ?? 0)
            return closed
        }
        _ = closed  // closed here, outside the lock
    }

    /// Forgets every row and closes every file it kept open (once no body being sent holds it);
    /// called after each write transaction, committed or not.
    func invalidate() {
        let files = state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll(keepingCapacity: true)
            state.bodyBytes = 0
            return state.dropFiles()
        }
        _ = files  // closed here, outside the lock
    }

    var count: Int { state.withLock { $0.entries.count } }
    var openFiles: Int { state.withLock { $0.files.count } }
    var cachedBodyBytes: Int { state.withLock { $0.bodyBytes } }
}
