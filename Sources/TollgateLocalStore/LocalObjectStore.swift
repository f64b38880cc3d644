import TollgateStore
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TollgateCORS
import TollgateCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The embedded object store: object bytes in files named by random ids under
/// `<directory>/objects/ab/cd/<id>` (`StorageLayout`), metadata in a `MetadataIndex` (SQLite,
/// WAL, at `<directory>/meta.sqlite`). This type orchestrates the two; all blocking work runs
/// on `BlockingIO` (files) or GRDB's async access (the index), never on the caller's thread.
///
/// Write protocol (put, copy, complete, and an append that creates its object):
/// 1. stream the body into a new file `objects/…/<id>` (a fresh random id, which no row names,
///    so no reader can open it), hashing as it goes;
/// 2. fsync the file and its directory;
/// 3. commit the metadata row in one transaction, checking preconditions against the row as it
///    is at that moment; 4. after the commit, delete the file of the version it replaced.
/// A crash before 3 leaves the old row and an unreferenced file; a crash after 3 leaves the new
/// row and perhaps the old, now unreferenced, file. Start-up removes every object file no row
/// references (and anything in `tmp/`, where earlier versions staged their writes), so a
/// reader only ever sees a whole old or whole new object. Writing in place of staging saves a
/// rename per write, and with it the file system's lock on renames across directories.
///
/// Appends to an existing appendable object write in place, past the committed size, and then
/// commit the new size; readers are always bounded by the committed size, and an append first
/// truncates away any uncommitted tail a crash may have left (see `appendObject`).
public final class LocalObjectStore: ObjectStore {
    public struct Configuration: Sendable {
        public var directory: String
        /// S3 requires every part but the last to be at least 5 MiB.
        public var minimumPartSize: Int64
        /// Size of the buffers `getObject` streams; a range up to this size is read in one go.
        public var readChunkSize: Int
        /// The largest piece of a file-backed body handed out as one zero-copy region.
        public var sendSegmentSize: Int
        /// Object rows kept in memory for GET and HEAD (0: none).
        public var cachedObjects: Int
        /// In-progress multipart uploads a bucket may hold (`tooManyUploads` beyond), at first;
        /// `setMaxUploadsPerBucket` changes it while the store is open.
        public var maxUploadsPerBucket: Int
        /// Where the store's blocking calls run.
        public var io: IOPool
        public var now: @Sendable () -> Date
        /// Told when writes start failing for lack of space (`true`, with the failure) and when
        /// object data is written again (`false`): once per change, never once per request.
        public var storageFullChanged: (@Sendable (_ full: Bool, _ detail: String) -> Void)?
        /// Test seam: asked before every write of object data; an errno it returns fails that
        /// write as if the file system had (ENOSPC: a full disk).
        public var writeFault: (@Sendable () -> Int32?)?
        /// Test seam: false makes `readAtOnce` behave as on a kernel without cachestat(2)
        /// (Linux before 6.5).
        public var usesCachestat = true

        public init(
            directory: String, minimumPartSize: Int64 = 5 * 1024 * 1024, readChunkSize: Int = 256 * 1024,
            sendSegmentSize: Int = 2 * 1024 * 1024,
            cachedObjects: Int = 8192, maxUploadsPerBucket: Int = 1000, io: IOPool = .own(threads: 8),
            now: @escaping @Sendable () -> Date = { Date() },
            storageFullChanged: (@Sendable (_ full: Bool, _ detail: String) -> Void)? = nil,
            writeFault: (@Sendable () -> Int32?)? = nil
        ) {
            self.directory = directory
            self.minimumPartSize = minimumPartSize
            self.readChunkSize = readChunkSize
            self.sendSegmentSize = sendSegmentSize
            self.cachedObjects = cachedObjects
            self.maxUploadsPerBucket = maxUploadsPerBucket
            self.io = io
            self.now = now
            self.storageFullChanged = storageFullChanged
            self.writeFault = writeFault
        }
    }

    /// The pool of threads the store's blocking calls (file system, SQLite) run on.
    public enum IOPool: Sendable {
        /// A pool of this many threads (file system calls waiting at once, at most), made and
        /// shut down by the store.
        case own(threads: Int)
        /// The caller's pool (the server's one pool, which its service group shuts down).
        case shared(NIOThreadPool)
    }

    /// What start-up recovery found and removed.
    public struct RecoveryReport: Sendable, Equatable {
        public let removedTemporaryFiles: Int
        public let removedOrphanFiles: Int
        /// Rows whose file is missing (damage from outside; reported, not repaired).
        public let missingFiles: Int
    }

    /// Uploads are written to disk in batches of this many bytes, one `BlockingIO` job each
    /// (a 1 MiB object: one job, with its fsyncs; each job is a round trip to the pool).
    static let writeBatchSize = 1024 * 1024

    let configuration: Configuration
    let layout: StorageLayout
    /// The object directories known to exist, so a write makes none twice.
    let directories: ObjectDirectories
    let index: MetadataIndex
    let io: BlockingIO
    let appendLocks = KeyedLock()
    let objectCache: ObjectInfoCache
    let buckets = BucketCache()
    /// Files that reads of multipart objects use (see `FileLeases`).
    let leases: FileLeases
    let storageState: StorageFullState
    private let uploadLimit: Atomic<Int>
    public let recovery: RecoveryReport
    /// Held from before recovery until `close` (or deinit): one open store per directory.
    private let lock: DirectoryLock

    /// Why no other process is kept from opening this directory too (its file system has no
    /// locks), or nil when the directory is locked: a warning for the operator at start-up.
    public var unguarded: String? { lock.unguarded }

    /// How many files the object cache keeps open: 256, or an eighth of the process's limit on
    /// open descriptors when that is lower, so that connections keep the rest.
    static func keptFiles() -> Int {
        var limit = rlimit()
        #if os(Linux)
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        #else
        guard getrlimit(RLIMIT_NOFILE, &limit) == 0 else { return 0 }
        #endif
        return Int(Swift.min(256, limit.rlim_cur / 8))
    }

    /// Opens (creating if needed) the store and runs crash recovery. Call before serving.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        objectCache = ObjectInfoCache(capacity: configuration.cachedObjects, fileCapacity: Self.keptFiles())
        storageState = StorageFullState(changed: configuration.storageFullChanged)
        uploadLimit = Atomic(configuration.maxUploadsPerBucket)
        io = BlockingIO(configuration.io)
        let root = URL(fileURLWithPath: configuration.directory).standardizedFileURL.path
        layout = StorageLayout(root: root)
        directories = ObjectDirectories(layout: layout)
        leases = FileLeases { [layout, io] ids in io.submit { Self.unlink(ids, in: layout) } }
        // Opening blocks, before the store serves: allowed in the calling task.
        let layout = self.layout
        lock = try BlockingWork.allowing {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            // Only the server may read the store, also one created by an older version.
            chmod(root, 0o700)
            let lock = try DirectoryLock(directory: root)
            try Posix.makeDirectory(layout.tmpDirectory)
            try Posix.makeDirectory(layout.objectsDirectory)
            try Posix.fsyncDirectory(root)
            return lock
        }
        let index = try MetadataIndex(path: layout.databasePath, cache: objectCache, storageState: storageState)
        self.index = index
        recovery = try BlockingWork.allowing {
            try index.withReferencedFileIDs { try Self.recover(layout: layout, referenced: $0) }
        }
    }

    public convenience init(directory: String) throws {
        try self.init(configuration: Configuration(directory: directory))
    }

    /// In-progress multipart uploads a bucket may hold now.
    public var maxUploadsPerBucket: Int { uploadLimit.load(ordering: .relaxed) }

    /// Changes the limit for uploads created from now on (a config reload); uploads already in
    /// progress are kept.
    public func setMaxUploadsPerBucket(_ limit: Int) {
        uploadLimit.store(limit, ordering: .relaxed)
    }

    /// Closes the database and releases the directory. The store must not be used afterwards.
    public func close() throws {
        defer { lock.release() }
        try index.close()
    }

    // MARK: Lifecycle

    public var capabilities: StoreCapabilities {
        // 256 KiB reads: a 1 MiB upload reaches the store in about 4 body parts instead of 16,
        // which took about 7 % off the gateway's CPU per 1 MiB PUT (bench/gateway.sh).
        StoreCapabilities(backend: "local", appends: true, storesChecksums: true, storesCRC64: true,
                          minimumPartSize: configuration.minimumPartSize, zeroCopyReads: true, readsAtOnce: true, uploadReadSize: 256 * 1024)
    }

    /// Opened by `init` (which runs crash recovery): nothing is left to do.
    public func open() async throws {}

    /// The data directory's health shows in the writes that fail (`storageFull`, `io`).
    public func health() async -> StoreHealth { .ok }

    public func expireUploads(initiatedBefore cutoff: Date) async throws -> Int {
        try await abortUploads(initiatedBefore: cutoff)
    }

    public func objectTags(bucket: String, key: String) async throws -> [String: String] {
        try await headObject(bucket: bucket, key: key).metadata.tags
    }

    // MARK: Recovery

    /// Removes what a crash left (blocking, before serving): every temporary file, and every object file no row references
    /// (written, then never committed). Files and references are walked side by side, both in
    /// ascending id order (`referenced` yields the rows' ids sorted; the directories `ab/cd` are
    /// listed sorted, one at a time, and hold only ids that begin `abcd`), so start-up holds one
    /// directory's names at a time, never every id of the store.
    static func recover(layout: StorageLayout, referenced next: () throws -> String?) throws -> RecoveryReport {
        let fm = FileManager.default
        var removedTmp = 0
        for name in (try? fm.contentsOfDirectory(atPath: layout.tmpDirectory)) ?? [] {
            Posix.unlinkIfPresent(layout.tmpDirectory + "/" + name)
            removedTmp += 1
        }
        var removedOrphans = 0
        var missing = 0
        var reference = try next()
        /// Moves past the references below `id` (rows whose file is gone); true when `id` is referenced.
        func isReferenced(_ id: String) throws -> Bool {
            while let current = reference, current < id {
                missing += 1
                reference = try next()
            }
            guard reference == id else { return false }
            while reference == id { reference = try next() }
            return true
        }
        func sorted(_ path: String) -> [String] { ((try? fm.contentsOfDirectory(atPath: path)) ?? []).sorted() }
        for first in sorted(layout.objectsDirectory) {
            let level1 = layout.objectsDirectory + "/" + first
            for second in sorted(level1) {
                let level2 = level1 + "/" + second
                let prefix = first + second
                for name in sorted(level2) {
                    // A name that cannot be here (not an id of this directory) is no row's file.
                    let ours = StorageLayout.isValidID(name) && name.hasPrefix(prefix) && prefix.utf8.count == 4
                    if ours, try isReferenced(name) { continue }
                    Posix.unlinkIfPresent(level2 + "/" + name)
                    removedOrphans += 1
                }
            }
        }
        while reference != nil {
            missing += 1
            reference = try next()
        }
        return RecoveryReport(removedTemporaryFiles: removedTmp, removedOrphanFiles: removedOrphans, missingFiles: missing)
    }

    func now() -> Date {
        Millis.date(Millis.from(configuration.now()))
    }

    // MARK: Files

    /// A fully written file under `objects/`, durable with its directory entry, that no row
    /// references yet.
    struct PublishedFile: Sendable {
        let id: String
        let size: Int64
        let md5: [UInt8]
    }

    /// Streams `body` into a new object file in batches, hashing it, then fsyncs it and its
    /// directory in the job that writes the last batch. On any failure (the body throws, I/O
    /// fails, its MD5 is not `expectedMD5`) the file is removed.
    func stage<Body: AsyncSequence>(_ body: Body, expectedMD5: [UInt8]? = nil) async throws -> PublishedFile where Body.Element == ByteBuffer {
        let id = try StorageLayout.newFileID()
        let writer = try FileWriter(path: try layout.objectPath(id), mode: .create(directories), fault: configuration.writeFault)
        do {
            let last = try await writeBatches(body, to: writer)
            let (size, md5) = try await io.run {
                try writer.write(last)
                let written = try writer.finish(expectedMD5: expectedMD5)
                try Posix.fsyncDirectory((writer.path as NSString).deletingLastPathComponent)
                return written
            }
            storageState.noteWritten()
            return PublishedFile(id: id, size: size, md5: md5)
        } catch {
            await io.runToCompletion { writer.abandon() }
            storageState.note(error)
            throw error
        }
    }


    /// Removes object files whose rows are gone (after a commit) or never existed (a failed
    /// commit); a file a read still leases is removed when that read ends (`FileLeases`). Not
    /// cancelled with the request: a file left behind would stay until a restart.
    func removeFiles(_ ids: [String]) async {
        let free = leases.claim(ids)
        guard !free.isEmpty else { return }
        let layout = self.layout
        await io.runToCompletion { Self.unlink(free, in: layout) }
    }

    /// Unlinks the files of `ids`. Blocking.
    private static func unlink(_ ids: [String], in layout: StorageLayout) {
        for id in ids {
            if let path = try? layout.objectPath(id) { Posix.unlinkIfPresent(path) }
        }
    }

    /// Opens the object file (unless `open` is given: the cache kept it open) in one job, which
    /// also reads `range` when it is at most `readChunkSize` (the body is then in memory), or
    /// else checks whether the first of its file segments is cached; the rest is read, or
    /// handed out as segments, as the body is consumed. Returns the open file too; nil when the
    /// file is gone (replaced or deleted since its row was read).
    func openBody(_ fileID: String, range: Range<Int64>, open: FileDescriptor? = nil) async throws -> (ObjectBody, FileDescriptor)? {
        let path = try layout.objectPath(fileID)
        let io = io
        return try await io.run { [configuration] () throws(StoreError) -> (ObjectBody, FileDescriptor)? in
            let file: FileDescriptor
            if let open {
                file = open
            } else {
                let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
                if fd < 0 {
                    if errno == ENOENT { return nil }
                    throw Posix.failure("open")
                }
                file = FileDescriptor(fd)
            }
            if range.count <= configuration.readChunkSize {
                return (ObjectBody(try FileChunks.read(file, at: range.lowerBound, count: range.count)), file)
            }
            return (Self.fileBody(file, range: range, firstCached: nil, configuration: configuration, io: io), file)
        }
    }

    /// A range of an open file as a body, of chunks to read or segments to send; whether the
    /// first segment is cached is checked here (blocking) unless `firstCached` says.
    private static func fileBody(_ file: FileDescriptor, range: Range<Int64>, firstCached: Bool?,
                                 configuration: Configuration, io: BlockingIO) -> ObjectBody {
        let segments = FileSegments.open(file, range: range, segmentSize: configuration.sendSegmentSize, io: io, firstCached: firstCached)
        return ObjectBody(ZeroCopyBody(
            whole: segments.cachedWhole?.region, pieces: segments,
            bytes: FileChunks(file: file, range: range, chunkSize: configuration.readChunkSize, io: io)
        ))
    }

    /// A range of an object made of several files, read (or sent) file by file; `lease` keeps
    /// the files until the body and its iterations are gone.
    private func extentsBody(_ extents: [FileExtent], range: Range<Int64>, lease: FileLease) throws -> ObjectBody {
        let pieces = try ExtentPiece.pieces(of: extents, range: range, layout: layout)
        let (io, configuration) = (io, configuration)
        return ObjectBody(ZeroCopyBody(
            whole: nil,
            pieces: ExtentSequence(pieces: pieces, io: io, lease: lease) { file, range in
                FileSegments.open(file, range: range, segmentSize: configuration.sendSegmentSize, io: io)
            },
            bytes: ExtentSequence(pieces: pieces, io: io, lease: lease) { file, range in
                FileChunks(file: file, range: range, chunkSize: configuration.readChunkSize, io: io)
            }
        ))
    }

    /// Body parts smaller than this are copied into a shared buffer of the batch (`joinedSize`
    /// bytes) rather than kept one by one: a client that sends its body a few bytes per packet
    /// cannot make a batch hold a buffer per packet.
    static let smallPart = 16 * 1024
    static let joinedSize = 64 * 1024

    /// Writes `body` to `writer` in batches of exactly `writeBatchSize` bytes (a body part that
    /// crosses a batch's end is split there, without copying), one pool job and one write call
    /// per batch, and returns the last batch for the caller's final job (which also finishes
    /// the file). A new file's batches thus start at multiples of 1 MiB, where the kernel can
    /// cache each in one large folio. A full batch is written only once more of the body
    /// arrives, so a body of whole batches (a 1 MiB object, an 8 MiB part) ends in that final
    /// job rather than in an extra job of its own. Parts under `smallPart` are joined (above):
    /// a batch holds at most about 2 × 1 MiB / 16 KiB buffers.
    func writeBatches<Body: AsyncSequence>(
        _ body: Body, to writer: FileWriter
    ) async throws -> [ByteBuffer] where Body.Element == ByteBuffer {
        var batch: [ByteBuffer] = []
        var batched = 0
        // Whether the batch's last buffer is one this loop made to join small parts into.
        var lastJoins = false
        for try await var buffer in body {
            while buffer.readableBytes > 0 {
                if batched == Self.writeBatchSize {
                    let full = batch
                    batch.removeAll(keepingCapacity: true)
                    batched = 0
                    lastJoins = false
                    try await io.run { try writer.write(full) }
                }
                var part = buffer.readSlice(length: min(buffer.readableBytes, Self.writeBatchSize - batched))!
                batched += part.readableBytes
                guard part.readableBytes < Self.smallPart else {
                    batch.append(part)
                    lastJoins = false
                    continue
                }
                if lastJoins, batch[batch.count - 1].writableBytes >= part.readableBytes {
                    batch[batch.count - 1].writeBuffer(&part)
                } else {
                    var joined = ByteBufferAllocator().buffer(capacity: Self.joinedSize)
                    joined.writeBuffer(&part)
                    batch.append(joined)
                    lastJoins = true
                }
            }
        }
        return batch
    }

    /// Commits a published file as `bucket/key`, then deletes the replaced version's files.
    func commitObject(
        bucket: String, key: String, file: PublishedFile, etag: String, metadata: ObjectMetadata, appendable: Bool,
        checksums: ObjectChecksums, preconditions: WritePreconditions, check: (@Sendable (ObjectInfo?) throws -> Void)? = nil
    ) async throws -> ObjectInfo {
        let info = ObjectInfo(
            bucket: bucket, key: key, size: file.size, etag: etag, lastModified: now(), metadata: metadata,
            isAppendable: appendable, checksums: checksums
        )
        return try await commit(StoredObject(info: info, fileID: file.id), preconditions: preconditions, check: check, staged: [file.id])
    }

    /// Commits `object`'s row, then deletes the files no row references any more (the replaced
    /// version's and, when `completing` an upload, the parts the object is not made of). See
    /// `MetadataIndex.commitObject`. When the commit fails, deletes `staged`: files written for
    /// it that nothing else references.
    func commit(
        _ object: StoredObject, preconditions: WritePreconditions, check: (@Sendable (ObjectInfo?) throws -> Void)? = nil,
        completing: CompletedUpload? = nil, staged: [String]
    ) async throws -> ObjectInfo {
        let obsolete: [String]
        do {
            obsolete = try await index.commitObject(object, preconditions: preconditions, check: check, completing: completing)
        } catch {
            await removeFiles(staged)
            throw error
        }
        await removeFiles(obsolete)
        return object.info
    }

    // MARK: Buckets

    public func listBuckets() async throws -> [BucketInfo] {
        try await index.listBuckets()
    }

    @discardableResult
    public func createBucket(_ name: String) async throws -> BucketInfo {
        try StoreNames.validateBucket(name)
        let info = BucketInfo(name: name, creationDate: now())
        defer { buckets.invalidate() }
        try await index.createBucket(info)
        return info
    }

    /// From `buckets`, like `bucketCORS`: every write checks its bucket first, for free.
    public func headBucket(_ name: String) async throws -> BucketInfo {
        guard let bucket = try await cachedBuckets()[name] else { throw StoreError.noSuchBucket(bucket: name) }
        return bucket.info
    }

    /// Every bucket, read in one query when `buckets` is empty (at first, and after a change).
    private func cachedBuckets() async throws -> [String: CachedBucket] {
        let (cached, generation) = buckets.get()
        if let cached { return cached }
        let all = try await index.allBuckets()
        buckets.fill(all, generation: generation)
        return all
    }

    public func setObjectTags(bucket: String, key: String, tags: [String: String]) async throws {
        try StoreNames.validateKey(key)
        try await index.setTags(bucket: bucket, key: key, tags: tags)
    }

    public func bucketStats(_ name: String) async throws -> BucketStats {
        try await index.bucketStats(name)
    }

    public func deleteBucket(_ name: String) async throws {
        defer { buckets.invalidate() }
        await removeFiles(try await index.deleteBucket(name))
    }

    @discardableResult
    public func ensureBuckets(_ names: [String]) async throws -> [String] {
        for name in names { try StoreNames.validateBucket(name) }
        defer { buckets.invalidate() }
        return try await index.ensureBuckets(names, created: now())
    }

    // MARK: Bucket CORS

    /// From `buckets`: a preflight for any bucket name, existing or not, reads nothing from
    /// SQLite while the buckets and their rules stay the same.
    public func bucketCORS(_ bucket: String) async throws -> CORSConfiguration? {
        try await cachedBuckets()[bucket]?.cors?.get()
    }

    public func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws {
        defer { buckets.invalidate() }
        try await index.setBucketCORS(bucket, configuration)
    }

    public func deleteBucketCORS(_ bucket: String) async throws {
        defer { buckets.invalidate() }
        try await index.deleteBucketCORS(bucket)
    }

    // MARK: Objects

    public func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions = WriteOptions()
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        // Fail fast before reading the body; the commit checks again.
        _ = try await headBucket(bucket)
        let file = try await stage(body, expectedMD5: options.expectedMD5)
        return try await commitObject(
            bucket: bucket, key: key, file: file, etag: ETag.quoted(md5: file.md5), metadata: metadata,
            appendable: false, checksums: options.bodyChecksums?() ?? .none, preconditions: options.preconditions
        )
    }

    public func headObject(bucket: String, key: String) async throws -> ObjectInfo {
        let (object, _, _, generation) = objectCache.get(bucket: bucket, key: key)
        if let object { return object.info }
        return try await lookup(bucket: bucket, key: key, generation: generation).info
    }

    /// The committed row, from the index, cached if no write ended since `generation`.
    private func lookup(bucket: String, key: String, generation: UInt64) async throws -> StoredObject {
        let object = try await index.object(bucket: bucket, key: key)
        objectCache.fill(object, generation: generation)
        return object
    }

    public func getObject(bucket: String, key: String, range: ByteRange? = nil) async throws -> ObjectRead {
        // Between reading the row and opening its file, a concurrent overwrite may commit and
        // delete that file; then read the new row and try again.
        for _ in 0..<8 {
            // Taken apart at once, as in `readAtOnce`.
            let (known, bytes, kept, generation) = objectCache.get(bucket: bucket, key: key)
            if let info = known?.info, let bytes {
                return try ObjectInMemory(info: info, bytes: bytes).read(range: range)
            }
            let object: StoredObject
            if let known { object = known } else { object = try await lookup(bucket: bucket, key: key, generation: generation) }
            let info = object.info
            let served = try range?.resolve(size: info.size) ?? 0..<info.size
            if !object.extents.isEmpty {
                // Leased, then checked: a commit that replaced the row before the lease may be
                // deleting its files; one after the check sees the lease (`FileLeases`). The
                // check is the cache's when no write to the key ended since the row was read
                // (the common case: no second read of the index), else the index's.
                let lease = leases.lease(object.fileIDs)
                if !objectCache.unwritten(bucket: bucket, key: key, since: generation) {
                    guard try await index.currentObject(bucket: bucket, key: key)?.fileIDs == object.fileIDs else { continue }
                }
                return ObjectRead(info: info, range: served, isPartial: range != nil,
                                  body: try extentsBody(object.extents, range: served, lease: lease))
            }
            guard let (body, file) = try await openBody(object.fileID, range: served, open: kept) else { continue }
            if info.size <= objectCache.maximumBodySize {
                if served.count == info.size, let whole = body.singleBuffer { objectCache.fill(object, body: whole, generation: generation) }
            } else if kept == nil {
                objectCache.keepOpen(file, of: object, generation: generation)
            }
            return ObjectRead(info: info, range: served, isPartial: range != nil, body: body)
        }
        throw StoreError.corrupted("object file missing, or replaced eight times while being opened")
    }

    /// A row read before, from the object cache (whatever the size of its object).
    public func infoInMemory(bucket: String, key: String) -> ObjectInfo? {
        objectCache.get(bucket: bucket, key: key).object?.info
    }

    /// What `getObject` would read, at once, from the object cache: a small object's bytes, or
    /// a range of up to one segment of a file the cache keeps open, when its pages are in the
    /// page cache (checked here: one cachestat call, which never waits on the disk; without
    /// cachestat, the bytes read with RWF_NOWAIT). A range of a cached row longer than a
    /// segment and a chunk is `inPieces`, open file or not.
    public func readAtOnce(bucket: String, key: String, range: ByteRange?) throws -> ReadAtOnce? {
        // Taken apart at once: reading the tuple's parts one by one copies it whole each time.
        let (object, bytes, file, _) = objectCache.get(bucket: bucket, key: key)
        guard let info = object?.info else { return nil }
        if let bytes { return .read(try ObjectInMemory(info: info, bytes: bytes).read(range: range)) }
        let served = try range?.resolve(size: info.size) ?? 0..<info.size
        if served.count > max(configuration.sendSegmentSize, configuration.readChunkSize) { return .inPieces }
        guard let file, served.count <= configuration.sendSegmentSize else { return nil }
        switch configuration.usesCachestat ? FileSegments.cachedWithoutWaiting(file, served) : nil {
        case true?:
            return .read(ObjectRead(info: info, range: served, isPartial: range != nil,
                                    body: Self.fileBody(file, range: served, firstCached: true, configuration: configuration, io: io)))
        case false?:
            return nil
        case nil:
            // No cachestat (Linux before 6.5): mincore would map the file here, on the event
            // loop; the bytes themselves are read instead, if every one of them is cached.
            guard let bytes = FileChunks.readIfCached(file, at: served.lowerBound, count: served.count) else { return nil }
            return .read(ObjectRead(info: info, range: served, isPartial: range != nil, body: ObjectBody(bytes)))
        }
    }

    public func deleteObject(bucket: String, key: String) async throws {
        await removeFiles(try await index.deleteObjects(bucket: bucket, keys: [key]))
    }

    public func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult] {
        var results = [DeleteResult?](repeating: nil, count: keys.count)
        var valid: [(Int, String)] = []
        for (index, key) in keys.enumerated() {
            do { try StoreNames.validateKey(key); valid.append((index, key)) } catch {
                results[index] = DeleteResult(key: key, error: error)
            }
        }
        await removeFiles(try await index.deleteObjects(bucket: bucket, keys: valid.map(\.1)))
        for (index, key) in valid { results[index] = DeleteResult(key: key, error: nil) }
        return results.map { $0! }
    }

    public func copyObject(
        from source: ObjectLocation, to target: ObjectLocation, metadata: CopyMetadata, options: CopyOptions = CopyOptions()
    ) async throws -> ObjectInfo {
        try StoreNames.validateBucket(target.bucket)
        try StoreNames.validateKey(target.key)
        _ = try await headBucket(target.bucket)
        let read = try await getObject(bucket: source.bucket, key: source.key, range: nil)
        try options.sourceConditions.check(read.info)
        let file = try await stage(read.body)
        return try await commitObject(
            bucket: target.bucket, key: target.key, file: file, etag: ETag.quoted(md5: file.md5),
            metadata: metadata.resolved(source: read.info.metadata), appendable: false, checksums: read.info.checksums.ofCopy,
            preconditions: options.preconditions
        )
    }

    // MARK: Listing

    public func listObjects(bucket: String, query: ListQuery) async throws -> ListResult {
        try await listObjectsCountingRows(bucket: bucket, query: query).0
    }

    /// The page and the index rows read to build it (lets tests prove that a delimiter listing
    /// skips whole prefixes).
    func listObjectsCountingRows(bucket: String, query: ListQuery) async throws -> (ListResult, rowsScanned: Int) {
        try await index.listObjects(bucket: bucket, walk: try ListWalk(query))
    }
}

/// A file being written by one upload or append: its descriptor, offset and the MD5 of what was
/// written. Its methods block: the store calls them on `BlockingIO`, one job at a time.
final class FileWriter: Sendable {
    enum Mode: Sendable {
        /// A new object file (O_EXCL), its directories made first where missing.
        case create(ObjectDirectories)
        /// An existing object file, truncated to `at` and written from there.
        case append(at: Int64)
    }

    private struct State {
        var fd: Int32 = -1
        var offset: Int64
        var written: Int64 = 0
        let md5: LaneMD5
    }

    let path: String
    let mode: Mode
    private let fault: (@Sendable () -> Int32?)?
    private let state: Mutex<State>

    init(path: String, mode: Mode, fault: (@Sendable () -> Int32?)?) throws {
        self.path = path
        self.mode = mode
        self.fault = fault
        let start: Int64
        switch mode {
        case .create: start = 0
        case .append(let position): start = position
        }
        state = Mutex(State(offset: start, md5: LaneMD5()))
    }

    deinit {
        state.withLock { if $0.fd >= 0 { close($0.fd) } }
    }

    private func open(_ state: inout State) throws {
        guard state.fd < 0 else { return }
        switch mode {
        case .create(let directories):
            try directories.prepare(containing: path)
            state.fd = try Posix.open(path, O_WRONLY | O_CREAT | O_EXCL)
        case .append(let position):
            let fd = Foundation.open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else {
                // Replaced or deleted since the row was read.
                if errno == ENOENT { throw StoreError.positionNotEqualToLength(next: 0) }
                throw Posix.failure("open")
            }
            state.fd = fd
            // Drops any tail a crashed or failed append left past the committed size.
            try Posix.ftruncate(fd, position)
        }
    }

    /// Hashes `buffers` and writes them at the current offset, in one call (`Posix.pwriteAll`).
    func write(_ buffers: [ByteBuffer]) throws {
        try state.withLock { state in
            try open(&state)
            let count = buffers.reduce(0) { $0 + $1.readableBytes }
            guard count > 0 else { return }
            let md5 = state.md5
            Posix.withReadableBytes(of: buffers) { md5.update($0) }
            if let code = fault?() { throw Posix.failure("write", code) }
            try Posix.pwriteAll(state.fd, buffers, at: state.offset)
            state.offset += Int64(count)
            state.written += Int64(count)
        }
    }

    /// Fsyncs and closes the file; returns the bytes written and their MD5. Refuses with
    /// `badDigest`, before the fsync, bytes whose MD5 is not `expectedMD5` (then `abandon`).
    func finish(expectedMD5: [UInt8]? = nil) throws -> (size: Int64, md5: [UInt8]) {
        try state.withLock { state in
            try open(&state)
            let md5 = state.md5.finalize()
            if let expectedMD5, expectedMD5 != md5 { throw StoreError.badDigest }
            try Posix.fsync(state.fd)
            close(state.fd)
            state.fd = -1
            return (state.written, md5)
        }
    }

    /// After a failure: a new file is removed; an append's uncommitted tail is truncated away
    /// now rather than at the next append. Blocking: the store runs it with
    /// `BlockingIO.runToCompletion`, which a cancelled task gets too.
    func abandon() {
        state.withLock { state in
            switch mode {
            case .create:
                if state.fd >= 0 { close(state.fd) }
                Posix.unlinkIfPresent(path)
            case .append(let position):
                if state.fd >= 0 {
                    try? Posix.ftruncate(state.fd, position)
                    close(state.fd)
                }
            }
            state.fd = -1
        }
    }
}
