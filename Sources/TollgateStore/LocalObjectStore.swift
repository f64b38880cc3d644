import Foundation
import GRDB
import NIOCore
import Synchronization
import TollgateCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The embedded object store: object bytes in files named by random ids under
/// `<directory>/objects/ab/cd/<id>`, metadata in SQLite (WAL) at `<directory>/meta.sqlite`.
///
/// Write protocol (put, copy, complete, and an append that creates its object):
/// 1. stream the body into `tmp/<id>`, hashing as it goes;
/// 2. run the caller's verification hook;
/// 3. fsync the file, rename it to `objects/…/<id>`, fsync that directory;
/// 4. commit the metadata row in one transaction, checking preconditions against the row as it
///    is at that moment; 5. after the commit, delete the file of the version it replaced.
/// A crash before 4 leaves the old row and an unreferenced file; a crash after 4 leaves the new
/// row and perhaps the old, now unreferenced, file. Start-up removes everything in `tmp/` and
/// every object file no row references, so a reader only ever sees a whole old or whole new object.
///
/// Appends to an existing appendable object write in place, past the committed size, and then
/// commit the new size; readers are always bounded by the committed size, and an append first
/// truncates away any uncommitted tail a crash may have left (see `appendObject`).
public final class LocalObjectStore: ObjectStore {
    public struct Configuration: Sendable {
        public var directory: String
        /// S3 requires every part but the last to be at least 5 MiB.
        public var minimumPartSize: Int64
        /// Size of the buffers `getObject` streams.
        public var readChunkSize: Int
        /// Object rows kept in memory for GET and HEAD (0: none).
        public var cachedObjects: Int
        /// In-progress multipart uploads a bucket may hold (`tooManyUploads` beyond), at first;
        /// `setMaxUploadsPerBucket` changes it while the store is open.
        public var maxUploadsPerBucket: Int
        public var now: @Sendable () -> Date
        /// Told when writes start failing for lack of space (`true`, with the failure) and when
        /// object data is written again (`false`): once per change, never once per request.
        public var storageFullChanged: (@Sendable (_ full: Bool, _ detail: String) -> Void)?
        /// Test seam: asked before every write of object data; an errno it returns fails that
        /// write as if the file system had (ENOSPC: a full disk).
        public var writeFault: (@Sendable () -> Int32?)?

        public init(
            directory: String, minimumPartSize: Int64 = 5 * 1024 * 1024, readChunkSize: Int = 256 * 1024,
            cachedObjects: Int = 8192, maxUploadsPerBucket: Int = 1000, now: @escaping @Sendable () -> Date = { Date() },
            storageFullChanged: (@Sendable (_ full: Bool, _ detail: String) -> Void)? = nil,
            writeFault: (@Sendable () -> Int32?)? = nil
        ) {
            self.directory = directory
            self.minimumPartSize = minimumPartSize
            self.readChunkSize = readChunkSize
            self.cachedObjects = cachedObjects
            self.maxUploadsPerBucket = maxUploadsPerBucket
            self.now = now
            self.storageFullChanged = storageFullChanged
            self.writeFault = writeFault
        }
    }

    /// What start-up recovery found and removed.
    public struct RecoveryReport: Sendable, Equatable {
        public let removedTemporaryFiles: Int
        public let removedOrphanFiles: Int
        /// Rows whose file is missing (damage from outside; reported, not repaired).
        public let missingFiles: Int
    }

    let configuration: Configuration
    let layout: StorageLayout
    let pool: DatabasePool
    let appendLocks = KeyedLock()
    let objectCache: ObjectInfoCache
    let storageState: StorageFullState
    private let uploadLimit: Atomic<Int>
    public let recovery: RecoveryReport

    /// Opens (creating if needed) the store and runs crash recovery. Call before serving.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        objectCache = ObjectInfoCache(capacity: configuration.cachedObjects)
        storageState = StorageFullState(changed: configuration.storageFullChanged)
        uploadLimit = Atomic(configuration.maxUploadsPerBucket)
        let root = URL(fileURLWithPath: configuration.directory).standardizedFileURL.path
        layout = StorageLayout(root: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Only the server may read the store, also one created by an older version.
        chmod(root, 0o700)
        try Posix.makeDirectory(layout.tmpDirectory)
        try Posix.makeDirectory(layout.objectsDirectory)
        try Posix.fsyncDirectory(root)

        var config = GRDB.Configuration()
        config.prepareDatabase { db in
            // FULL: a commit is durable before we delete the file of the version it replaced.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        pool = try DatabasePool(path: layout.databasePath, configuration: config)
        try Schema.migrator().migrate(pool)
        recovery = try Self.recover(layout: layout, pool: pool)
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

    /// Closes the database. The store must not be used afterwards.
    public func close() throws {
        try pool.close()
    }

    // MARK: Recovery

    static func recover(layout: StorageLayout, pool: DatabasePool) throws -> RecoveryReport {
        let fm = FileManager.default
        var removedTmp = 0
        for name in (try? fm.contentsOfDirectory(atPath: layout.tmpDirectory)) ?? [] {
            Posix.unlinkIfPresent(layout.tmpDirectory + "/" + name)
            removedTmp += 1
        }
        let referenced: Set<String> = try pool.read { db in
            Set(try String.fetchAll(db, sql: "SELECT file_id FROM object UNION ALL SELECT file_id FROM part"))
        }
        var seen = Set<String>()
        var removedOrphans = 0
        for first in (try? fm.contentsOfDirectory(atPath: layout.objectsDirectory)) ?? [] {
            let level1 = layout.objectsDirectory + "/" + first
            for second in (try? fm.contentsOfDirectory(atPath: level1)) ?? [] {
                let level2 = level1 + "/" + second
                for name in (try? fm.contentsOfDirectory(atPath: level2)) ?? [] {
                    if referenced.contains(name) {
                        seen.insert(name)
                    } else {
                        Posix.unlinkIfPresent(level2 + "/" + name)
                        removedOrphans += 1
                    }
                }
            }
        }
        return RecoveryReport(
            removedTemporaryFiles: removedTmp, removedOrphanFiles: removedOrphans,
            missingFiles: referenced.subtracting(seen).count
        )
    }

    // MARK: Database helpers

    /// Runs a write transaction; database failures become `StoreError.internal` (or
    /// `storageFull`). Every write ends by emptying the object cache, before the caller deletes
    /// any replaced file.
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        defer { objectCache.invalidate() }
        do { return try await pool.write(updates) } catch let error as StoreError { throw error } catch let error as DatabaseError {
            let detail = "database: \(error.message ?? error.description)"
            guard error.resultCode == .SQLITE_FULL else { throw StoreError.internal(detail) }
            storageState.note(StoreError.storageFull(detail))
            throw StoreError.storageFull(detail)
        }
    }

    /// Runs a read on the calling thread. Reads are short (an indexed lookup or one page of a
    /// listing), so blocking for them costs less than the two thread hops of GRDB's async read,
    /// which dominated small GETs.
    func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try readBlocking(value) } catch let error as StoreError { throw error } catch let error as DatabaseError {
            throw StoreError.internal("database: \(error.message ?? error.description)")
        }
    }

    private func readBlocking<T>(_ value: (Database) throws -> T) throws -> T {
        try pool.read(value)
    }

    /// A lookup that is one SELECT, without GRDB's BEGIN/COMMIT around it (a single statement
    /// runs against one snapshot anyway); the transaction doubled the cost of a HEAD.
    func lookup<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) throws -> T {
        do { return try pool.unsafeRead(value) } catch let error as StoreError { throw error } catch let error as DatabaseError {
            throw StoreError.internal("database: \(error.message ?? error.description)")
        }
    }

    static func requireBucket(_ db: Database, _ bucket: String) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [bucket]) == true else {
            throw StoreError.noSuchBucket(bucket: bucket)
        }
    }

    static let objectColumns = "bucket, key, size, etag, last_modified_ms, \(MetadataColumns.names), file_id, appendable"

    static func fetchObject(_ db: Database, _ bucket: String, _ key: String) throws -> ObjectInfo? {
        let statement = try db.cachedStatement(sql: "SELECT \(objectColumns) FROM object WHERE bucket = ? AND key = ?")
        guard let row = try Row.fetchOne(statement, arguments: [bucket, key.keyBlob]) else { return nil }
        return try decodeObject(row)
    }

    static func decodeObject(_ row: Row) throws -> ObjectInfo {
        let keyData: Data = row["key"]
        return ObjectInfo(
            bucket: row["bucket"], key: String(decoding: keyData, as: UTF8.self), size: row["size"], etag: row["etag"],
            lastModified: Millis.date(row["last_modified_ms"]), metadata: try MetadataColumns.decode(row),
            storageID: row["file_id"], isAppendable: row["appendable"]
        )
    }

    static func insertObject(_ db: Database, _ info: ObjectInfo) throws {
        var arguments: [(any DatabaseValueConvertible)?] = [info.bucket, info.key.keyBlob, info.size, info.etag, Millis.from(info.lastModified)]
        arguments += try MetadataColumns.arguments(info.metadata)
        arguments += [info.storageID, info.isAppendable]
        try db.execute(
            sql: "INSERT OR REPLACE INTO object (\(objectColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: StatementArguments(arguments)
        )
    }

    /// If-Match / If-None-Match against the current row, inside the commit transaction.
    static func check(_ preconditions: WritePreconditions, current: ObjectInfo?) throws {
        if let ifMatch = preconditions.ifMatch {
            guard let current, ETag.matches(ifMatch, current.etag) else { throw StoreError.preconditionFailed }
        }
        if let ifNoneMatch = preconditions.ifNoneMatch, let current, ETag.matches(ifNoneMatch, current.etag) {
            throw StoreError.preconditionFailed
        }
    }

    func now() -> Date {
        Millis.date(Millis.from(configuration.now()))
    }

    // MARK: Staging files

    /// A fully written, fsynced file that has been renamed into `objects/` but is not yet
    /// referenced by any row.
    struct PublishedFile: Sendable {
        let id: String
        let size: Int64
        let md5: [UInt8]
        let sha256: [UInt8]?
    }

    /// Streams `body` into a new temporary file, hashing it, then verifies, fsyncs and publishes
    /// it. On any failure (the body throws, the hook throws, I/O fails) the file is removed.
    func stage<Body: AsyncSequence>(
        _ body: Body, computeSHA256: Bool, verify: (@Sendable (BodyDigest) async throws -> Void)?
    ) async throws -> PublishedFile where Body.Element == ByteBuffer {
        let id = try StorageLayout.newID()
        let tmp = layout.tmpPath(id)
        let fd = try Posix.open(tmp, O_WRONLY | O_CREAT | O_EXCL)
        var open = true
        do {
            let md5 = try StreamingDigest(.md5)
            let sha = computeSHA256 ? try StreamingDigest(.sha256) : nil
            var size: Int64 = 0
            for try await buffer in body {
                try buffer.withUnsafeReadableBytes { bytes in
                    try md5.update(bytes)
                    try sha?.update(bytes)
                    try checkWriteFault()
                    try Posix.writeAll(fd, bytes)
                }
                size += Int64(buffer.readableBytes)
            }
            let digest = BodyDigest(size: size, md5: try md5.finalize(), sha256: try sha?.finalize())
            if let verify { try await verify(digest) }
            try await BlockingIO.run { try Posix.fsync(fd) }
            Foundation.close(fd)
            open = false
            try await publish(id: id, from: tmp)
            storageState.noteWritten()
            return PublishedFile(id: id, size: size, md5: digest.md5, sha256: digest.sha256)
        } catch {
            if open { Foundation.close(fd) }
            Posix.unlinkIfPresent(tmp)
            storageState.note(error)
            throw error
        }
    }

    /// The test seam's injected failure for the next data write, if any.
    func checkWriteFault() throws(StoreError) {
        if let code = configuration.writeFault?() { throw Posix.failure("write", code) }
    }

    /// Renames a fsynced temporary file into `objects/ab/cd/<id>` and makes the rename durable.
    func publish(id: String, from tmp: String) async throws {
        let directory = try layout.objectDirectory(id)
        let target = try layout.objectPath(id)
        let objects = layout.objectsDirectory
        try await BlockingIO.run {
            let parent = (directory as NSString).deletingLastPathComponent
            if try Posix.makeDirectory(parent) { try Posix.fsyncDirectory(objects) }
            if try Posix.makeDirectory(directory) { try Posix.fsyncDirectory(parent) }
            try Posix.rename(tmp, target)
            try Posix.fsyncDirectory(directory)
        }
    }

    /// Removes object files whose rows are gone (after a commit) or never existed (a failed commit).
    func removeFiles(_ ids: [String]) {
        for id in ids {
            if let path = try? layout.objectPath(id) { Posix.unlinkIfPresent(path) }
        }
    }

    /// Commits a published file as `bucket/key`, then deletes the replaced version's file.
    /// `extra` runs in the same transaction and returns more file ids to delete after commit.
    func commitObject(
        bucket: String, key: String, file: PublishedFile, etag: String, metadata: ObjectMetadata, appendable: Bool,
        preconditions: WritePreconditions,
        extra: (@Sendable (Database, ObjectInfo?) throws -> [String])? = nil
    ) async throws -> ObjectInfo {
        let info = ObjectInfo(
            bucket: bucket, key: key, size: file.size, etag: etag, lastModified: now(), metadata: metadata,
            storageID: file.id, isAppendable: appendable
        )
        let obsolete: [String]
        do {
            obsolete = try await write { db in
                try Self.requireBucket(db, bucket)
                let current = try Self.fetchObject(db, bucket, key)
                try Self.check(preconditions, current: current)
                var obsolete = try extra?(db, current) ?? []
                try Self.insertObject(db, info)
                if let current, current.storageID != info.storageID { obsolete.append(current.storageID) }
                return obsolete
            }
        } catch {
            removeFiles([file.id])
            throw error
        }
        removeFiles(obsolete)
        return info
    }

    static func quotedETag(_ md5: [UInt8]) -> String { "\"" + Hex.encode(md5) + "\"" }

    // MARK: Buckets

    public func listBuckets() async throws -> [BucketInfo] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT name, created_ms FROM bucket ORDER BY name").map {
                BucketInfo(name: $0["name"], creationDate: Millis.date($0["created_ms"]))
            }
        }
    }

    @discardableResult
    public func createBucket(_ name: String) async throws -> BucketInfo {
        try StoreNames.validateBucket(name)
        let info = BucketInfo(name: name, creationDate: now())
        try await write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [name]) == true {
                throw StoreError.bucketAlreadyOwnedByYou(bucket: name)
            }
            try db.execute(sql: "INSERT INTO bucket (name, created_ms) VALUES (?, ?)", arguments: [name, Millis.from(info.creationDate)])
        }
        return info
    }

    public func headBucket(_ name: String) async throws -> BucketInfo {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT name, created_ms FROM bucket WHERE name = ?", arguments: [name]) else {
                throw StoreError.noSuchBucket(bucket: name)
            }
            return BucketInfo(name: row["name"], creationDate: Millis.date(row["created_ms"]))
        }
    }

    public func deleteBucket(_ name: String) async throws {
        try await write { db in
            try Self.requireBucket(db, name)
            let busy = try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM object WHERE bucket = ?) OR EXISTS (SELECT 1 FROM upload WHERE bucket = ?)
                """, arguments: [name, name]) ?? false
            if busy { throw StoreError.bucketNotEmpty(bucket: name) }
            try db.execute(sql: "DELETE FROM bucket WHERE name = ?", arguments: [name])
        }
    }

    @discardableResult
    public func ensureBuckets(_ names: [String]) async throws -> [String] {
        for name in names { try StoreNames.validateBucket(name) }
        let created = now()
        return try await write { db in
            var added: [String] = []
            for name in names {
                try db.execute(sql: "INSERT OR IGNORE INTO bucket (name, created_ms) VALUES (?, ?)", arguments: [name, Millis.from(created)])
                if db.changesCount > 0 { added.append(name) }
            }
            return added
        }
    }

    // MARK: Objects

    public func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions = WriteOptions()
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        // Fail fast before reading the body; the commit checks again.
        _ = try await headBucket(bucket)
        let file = try await stage(body, computeSHA256: options.computeSHA256, verify: options.verify)
        return try await commitObject(
            bucket: bucket, key: key, file: file, etag: Self.quotedETag(file.md5), metadata: metadata,
            appendable: false, preconditions: options.preconditions
        )
    }

    public func headObject(bucket: String, key: String) async throws -> ObjectInfo {
        let cached = objectCache.get(bucket: bucket, key: key)
        if let info = cached.info { return info }
        return try await headObject(bucket: bucket, key: key, generation: cached.generation)
    }

    /// The committed row, read from the database, cached if no write ended since `generation`.
    private func headObject(bucket: String, key: String, generation: UInt64) async throws -> ObjectInfo {
        if let info = try lookup({ db in try Self.fetchObject(db, bucket, key) }) {
            objectCache.fill(info, generation: generation)
            return info
        }
        return try await read { db in
            if let info = try Self.fetchObject(db, bucket, key) { return info }
            try Self.requireBucket(db, bucket)
            throw StoreError.noSuchKey(bucket: bucket, key: key)
        }
    }

    public func getObject(bucket: String, key: String, range: ByteRange? = nil) async throws -> ObjectRead {
        // Between reading the row and opening its file, a concurrent overwrite may commit and
        // delete that file; then read the new row and try again.
        for _ in 0..<8 {
            let cached = objectCache.get(bucket: bucket, key: key)
            if let info = cached.info, let bytes = cached.body {
                let served = try range?.resolve(size: info.size) ?? 0..<info.size
                let slice = bytes.getSlice(at: bytes.readerIndex + Int(served.lowerBound), length: served.count)
                return ObjectRead(info: info, range: served, isPartial: range != nil, body: ObjectBody(buffers: slice.map { [$0] } ?? []))
            }
            let info: ObjectInfo
            if let known = cached.info { info = known } else { info = try await headObject(bucket: bucket, key: key, generation: cached.generation) }
            let served = try range?.resolve(size: info.size) ?? 0..<info.size
            let path = try layout.objectPath(info.storageID)
            let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0 {
                if errno == ENOENT { continue }
                throw Posix.failure("open")
            }
            let body = try ObjectBody(file: FileDescriptor(fd), range: served, chunkSize: configuration.readChunkSize)
            if served.count == info.size, let whole = body.singleBuffer {
                objectCache.fill(info, body: whole, generation: cached.generation)
            }
            return ObjectRead(info: info, range: served, isPartial: range != nil, body: body)
        }
        throw StoreError.internal("object kept changing while being opened")
    }

    public func deleteObject(bucket: String, key: String) async throws {
        let obsolete: String? = try await write { db in
            try Self.requireBucket(db, bucket)
            guard let current = try Self.fetchObject(db, bucket, key) else { return nil }
            try db.execute(sql: "DELETE FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key.keyBlob])
            return current.storageID
        }
        if let obsolete { removeFiles([obsolete]) }
    }

    public func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult] {
        var results = [DeleteResult?](repeating: nil, count: keys.count)
        var valid: [(Int, String)] = []
        for (index, key) in keys.enumerated() {
            do { try StoreNames.validateKey(key); valid.append((index, key)) } catch {
                results[index] = DeleteResult(key: key, error: error)
            }
        }
        let toDelete = valid
        let obsolete: [String] = try await write { db in
            try Self.requireBucket(db, bucket)
            var obsolete: [String] = []
            for (_, key) in toDelete {
                if let current = try Self.fetchObject(db, bucket, key) {
                    try db.execute(sql: "DELETE FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key.keyBlob])
                    obsolete.append(current.storageID)
                }
            }
            return obsolete
        }
        removeFiles(obsolete)
        for (index, key) in valid { results[index] = DeleteResult(key: key, error: nil) }
        return results.map { $0! }
    }

    public func copyObject(
        from source: ObjectLocation, to target: ObjectLocation, metadata: ObjectMetadata?, options: CopyOptions = CopyOptions()
    ) async throws -> ObjectInfo {
        try StoreNames.validateBucket(target.bucket)
        try StoreNames.validateKey(target.key)
        _ = try await headBucket(target.bucket)
        let read = try await getObject(bucket: source.bucket, key: source.key, range: nil)
        try options.checkSource?(read.info)
        let file = try await stage(read.body, computeSHA256: false, verify: nil)
        return try await commitObject(
            bucket: target.bucket, key: target.key, file: file, etag: Self.quotedETag(file.md5),
            metadata: metadata ?? read.info.metadata, appendable: false, preconditions: options.preconditions
        )
    }
}
