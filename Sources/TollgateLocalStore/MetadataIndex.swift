import TollgateStore
import Foundation
import GRDB
import Synchronization

/// An object's committed row: what clients see (`info`) and the file or files holding its bytes.
struct StoredObject: Sendable, Equatable {
    let info: ObjectInfo
    /// The random id of the file (never derived from bucket or key; see `StorageLayout`); of
    /// the first file when the object has `extents`.
    let fileID: String
    /// The files the object's bytes are, in order, when they are more than one (a completed
    /// multipart upload's parts); empty when `fileID` holds them all.
    let extents: [FileExtent]

    init(info: ObjectInfo, fileID: String, extents: [FileExtent] = []) {
        precondition(extents.isEmpty || (extents.count > 1 && extents[0].fileID == fileID), "extents are two files or more, the first `fileID`")
        self.info = info
        self.fileID = fileID
        self.extents = extents
    }

    /// Every file the object's bytes are in.
    var fileIDs: [String] { extents.isEmpty ? [fileID] : extents.map(\.fileID) }
}

/// One file of an object made of several, with its size.
struct FileExtent: Sendable, Equatable {
    let fileID: String
    let size: Int64
}

/// A part's row: what clients see and the file holding its bytes.
struct PartRow: Sendable {
    let info: PartInfo
    let fileID: String
}

/// The parts a CompleteMultipartUpload read, to be checked again at its commit.
struct CompletedUpload: Sendable {
    let uploadID: String
    /// Part number → file id, as read before the commit.
    let partFiles: [Int: String]
}

/// The local store's metadata: buckets, object rows, multipart uploads and parts, in SQLite
/// (WAL) through GRDB. It knows nothing of files except their ids, which it stores and hands
/// back so that `LocalObjectStore` can delete the files of rows a commit replaced.
///
/// Every access is GRDB's async access, so SQLite never blocks the Swift concurrency pool
/// (see `BlockingIO`); writes are committed in groups (`GroupCommit`), one WAL sync for the
/// writes that waited together. Every write transaction ends, committed or not, by emptying the object
/// cache, before the caller deletes any replaced file (see `ObjectInfoCache`); a write that
/// finds the disk full (SQLITE_FULL) is reported to the store's `StorageFullState`.
final class MetadataIndex: Sendable {
    /// Internal for tests that write rows directly.
    let pool: DatabasePool
    /// Every write transaction of `write` goes through it (internal for tests).
    let commits: GroupCommit
    private let cache: ObjectInfoCache
    private let storageState: StorageFullState
    /// Single-statement reads made so far (`lookup`; tests count what an operation reads).
    let lookups = Atomic<Int>(0)

    init(path: String, cache: ObjectInfoCache, storageState: StorageFullState) throws {
        pool = try DatabasePool(path: path)
        // FULL: every commit syncs the WAL, so a commit is durable before the client hears of
        // it and before we delete the file of the version it replaced. Set on the writer (the
        // one connection that commits) after the pool is open: DatabasePool's WAL set-up sets
        // NORMAL on it after any `prepareDatabase`, and NORMAL loses the last commits to a power
        // cut (a crash of the process alone loses nothing either way).
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try Schema.migrator().migrate(pool)
        commits = GroupCommit(pool: pool)
        self.cache = cache
        self.storageState = storageState
    }

    func close() throws {
        try pool.close()
    }

    /// Calls `body` with every file id a row references, in ascending order (an id referenced
    /// twice comes twice), one at a time from a cursor: start-up recovery holds no set of all of
    /// them (SQLite sorts in bounded memory). Blocking, before serving.
    func withReferencedFileIDs<T>(_ body: (_ next: () throws -> String?) throws -> T) throws -> T {
        try pool.read { db in
            let cursor = try String.fetchCursor(db, sql: "SELECT file_id FROM object UNION ALL SELECT file_id FROM extent UNION ALL SELECT file_id FROM part ORDER BY 1")
            return try body { try cursor.next() }
        }
    }

    // MARK: Access

    /// A write transaction, committed with the writes that wait beside it (`GroupCommit`), that
    /// changes the object rows `scope` names (their cache entries are dropped after it ends).
    /// Database failures become `StoreError.database` (or `storageFull`).
    func write<T: Sendable>(_ scope: ObjectInfoCache.Scope, _ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        defer { cache.invalidate(scope) }
        do { return try await commits.write(updates) } catch let error as DatabaseError {
            let failure = Self.failure(error)
            storageState.note(failure)
            throw failure
        }
    }

    /// A read transaction (one snapshot for several statements).
    func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(value) } catch let error as DatabaseError { throw Self.failure(error) }
    }

    /// A read without GRDB's BEGIN/COMMIT around it, for a lookup whose answer is one SELECT
    /// (a single statement runs against one snapshot anyway); the transaction doubled the cost
    /// of a HEAD.
    func lookup<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        lookups.add(1, ordering: .relaxed)
        do { return try await pool.unsafeRead(value) } catch let error as DatabaseError { throw Self.failure(error) }
    }

    private static func failure(_ error: DatabaseError) -> StoreError {
        let detail = "database: \(error.message ?? error.description)"
        return error.resultCode == .SQLITE_FULL ? .storageFull(detail) : .database(detail)
    }

    // MARK: Buckets

    func listBuckets() async throws -> [BucketInfo] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT name, created_ms FROM bucket ORDER BY name").map {
                BucketInfo(name: $0["name"], creationDate: Millis.date($0["created_ms"]))
            }
        }
    }

    func createBucket(_ info: BucketInfo) async throws {
        try await write(.nothing) { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [info.name]) == true {
                throw StoreError.bucketExists(bucket: info.name)
            }
            try db.execute(sql: "INSERT INTO bucket (name, created_ms) VALUES (?, ?)", arguments: [info.name, Millis.from(info.creationDate)])
        }
    }

    /// Replaces the tags of the row at bucket/key.
    func setTags(bucket: String, key: String, tags: [String: String]) async throws {
        let json = try MetadataColumns.json(tags)
        try await write(.keys(bucket: bucket, [key])) { db in
            try Self.requireBucket(db, bucket)
            try db.execute(sql: "UPDATE object SET tags = ? WHERE bucket = ? AND key = ?", arguments: [json, bucket, key.keyBlob])
            if db.changesCount == 0 { throw StoreError.noSuchKey(bucket: bucket, key: key) }
        }
    }

    /// Counts and sums over the bucket's rows, in SQLite (three aggregate queries over the
    /// primary key and the upload index; no row reaches Swift).
    func bucketStats(_ name: String) async throws -> BucketStats {
        try await lookup { db in
            try Self.requireBucket(db, name)
            let objects = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS bytes, MAX(last_modified_ms) AS newest FROM object WHERE bucket = ?", arguments: [name])!
            let uploads = try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM upload WHERE bucket = ?", arguments: [name]) ?? 0
            let parts = try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM part JOIN upload USING (upload_id) WHERE upload.bucket = ?", arguments: [name]) ?? 0
            let newest: Int64? = objects["newest"]
            return BucketStats(objectCount: objects["n"], storageBytes: objects["bytes"], multipartUploadCount: uploads,
                               multipartPartCount: parts, lastModified: newest.map(Millis.date))
        }
    }

    /// Deletes an empty bucket with its CORS rules, aborting the multipart uploads still in it (as
    /// S3 does); returns their part files.
    func deleteBucket(_ name: String) async throws -> [String] {
        try await write(.bucket(name)) { db in
            try Self.requireBucket(db, name)
            let busy = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM object WHERE bucket = ?)", arguments: [name]) ?? false
            if busy { throw StoreError.bucketNotEmpty(bucket: name) }
            let uploads = try String.fetchAll(db, sql: "SELECT upload_id FROM upload WHERE bucket = ?", arguments: [name])
            let files = try uploads.flatMap { try Self.deleteUpload(db, $0) }
            try db.execute(sql: "DELETE FROM bucket_cors WHERE bucket = ?", arguments: [name])
            try db.execute(sql: "DELETE FROM bucket WHERE name = ?", arguments: [name])
            return files
        }
    }

    /// Creates the buckets that do not exist; returns those it created.
    func ensureBuckets(_ names: [String], created: Date) async throws -> [String] {
        try await write(.nothing) { db in
            var added: [String] = []
            for name in names {
                try db.execute(sql: "INSERT OR IGNORE INTO bucket (name, created_ms) VALUES (?, ?)", arguments: [name, Millis.from(created)])
                if db.changesCount > 0 { added.append(name) }
            }
            return added
        }
    }

    static func requireBucket(_ db: Database, _ bucket: String) throws {
        // Cached statements: every write runs this, and SQLite need not parse it each time.
        let statement = try db.cachedStatement(sql: "SELECT 1 FROM bucket WHERE name = ?")
        guard try Bool.fetchOne(statement, arguments: [bucket]) == true else {
            throw StoreError.noSuchBucket(bucket: bucket)
        }
    }

    // MARK: Objects

    /// The committed row; `noSuchKey`, or `noSuchBucket` when the bucket is missing too.
    func object(bucket: String, key: String) async throws -> StoredObject {
        try await lookup { db in
            if let object = try Self.fetchObject(db, bucket, key) { return object }
            try Self.requireBucket(db, bucket)
            throw StoreError.noSuchKey(bucket: bucket, key: key)
        }
    }

    /// The committed row, if any (no bucket check).
    func currentObject(bucket: String, key: String) async throws -> StoredObject? {
        try await lookup { db in try Self.fetchObject(db, bucket, key) }
    }

    /// Commits `object` in one transaction: the bucket must exist, `preconditions` hold against
    /// the row as it is at that moment, and `check` (when given) accepts it. With `completing`,
    /// the upload must still hold exactly the parts it read, and its rows are deleted. Returns
    /// the file ids no row references any more (the replaced version's, the upload's parts that
    /// the object is not made of).
    func commitObject(
        _ object: StoredObject, preconditions: WritePreconditions,
        check: (@Sendable (ObjectInfo?) throws -> Void)? = nil, completing: CompletedUpload? = nil
    ) async throws -> [String] {
        try await write(.keys(bucket: object.info.bucket, [object.info.key])) { db in
            let info = object.info
            try Self.requireBucket(db, info.bucket)
            let current = try Self.fetchObject(db, info.bucket, info.key)
            try preconditions.check(against: current?.info)
            try check?(current?.info)
            var obsolete: [String] = []
            if let completing {
                _ = try Self.fetchUpload(db, bucket: info.bucket, key: info.key, uploadID: completing.uploadID)
                let parts = try Self.fetchParts(db, uploadID: completing.uploadID)
                let now = Dictionary(uniqueKeysWithValues: parts.map { ($0.info.partNumber, $0.fileID) })
                for (number, fileID) in completing.partFiles.sorted(by: { $0.key < $1.key }) where now[number] != fileID {
                    throw StoreError.invalidPart(partNumber: number)
                }
                obsolete += try Self.deleteUpload(db, completing.uploadID)
                try db.execute(
                    sql: "INSERT OR REPLACE INTO completed_upload (upload_id, bucket, key, etag, completed_ms) VALUES (?, ?, ?, ?, ?)",
                    arguments: [completing.uploadID, info.bucket, info.key.keyBlob, info.etag, Millis.from(info.lastModified)]
                )
            }
            try Self.insertObject(db, object, replacing: current)
            obsolete += current?.fileIDs ?? []
            let kept = Set(object.fileIDs)
            return obsolete.filter { !kept.contains($0) }
        }
    }

    /// Commits an in-place append: the row must still name the same file at `previousSize`
    /// (else the refusal `refusal` gives for the row found), and `preconditions` hold.
    func commitAppend(
        _ object: StoredObject, previousSize: Int64, preconditions: WritePreconditions,
        refusal: @escaping @Sendable (ObjectInfo?) -> StoreError
    ) async throws {
        try await write(.keys(bucket: object.info.bucket, [object.info.key])) { db in
            let info = object.info
            guard let row = try Self.fetchObject(db, info.bucket, info.key) else { throw refusal(nil) }
            guard row.fileID == object.fileID, row.info.size == previousSize else { throw refusal(row.info) }
            try preconditions.check(against: row.info)
            var arguments: [(any DatabaseValueConvertible)?] = [info.size, info.etag, Millis.from(info.lastModified)]
            arguments += ChecksumColumns.arguments(info.checksums)
            arguments += [info.bucket, info.key.keyBlob]
            try db.execute(sql: """
                UPDATE object SET size = ?, etag = ?, last_modified_ms = ?,
                    checksum_algorithm = ?, checksum = ?, checksum_parts = ?, crc64ecma = ?
                WHERE bucket = ? AND key = ?
                """, arguments: StatementArguments(arguments))
        }
    }

    /// Deletes the rows of `keys` that exist; returns their files.
    func deleteObjects(bucket: String, keys: [String]) async throws -> [String] {
        try await write(.keys(bucket: bucket, keys)) { db in
            try Self.requireBucket(db, bucket)
            var obsolete: [String] = []
            for key in keys {
                if let current = try Self.fetchObject(db, bucket, key) {
                    try db.execute(sql: "DELETE FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key.keyBlob])
                    try Self.deleteExtents(db, current)
                    obsolete += current.fileIDs
                }
            }
            return obsolete
        }
    }

    static let objectColumns = "bucket, key, size, etag, last_modified_ms, \(MetadataColumns.names), file_id, appendable, \(ChecksumColumns.names), extents"

    static func fetchObject(_ db: Database, _ bucket: String, _ key: String) throws -> StoredObject? {
        let statement = try db.cachedStatement(sql: "SELECT \(objectColumns) FROM object WHERE bucket = ? AND key = ?")
        guard let row = try Row.fetchOne(statement, arguments: [bucket, key.keyBlob]) else { return nil }
        let keyData: Data = row["key"]
        let info = ObjectInfo(
            bucket: row["bucket"], key: String(decoding: keyData, as: UTF8.self), size: row["size"], etag: row["etag"],
            lastModified: Millis.date(row["last_modified_ms"]), metadata: try MetadataColumns.decode(row),
            isAppendable: row["appendable"], checksums: try ChecksumColumns.decode(row)
        )
        let (fileID, count): (String, Int) = (row["file_id"], row["extents"])
        guard count > 0 else { return StoredObject(info: info, fileID: fileID) }
        let files = try db.cachedStatement(sql: "SELECT file_id, size FROM extent WHERE bucket = ? AND key = ? ORDER BY seq")
        let extents = try Row.fetchAll(files, arguments: [bucket, key.keyBlob]).map { FileExtent(fileID: $0["file_id"], size: $0["size"]) }
        guard extents.count == count, count > 1, extents[0].fileID == fileID, extents.reduce(0, { $0 + $1.size }) == info.size else {
            throw StoreError.corrupted("the files of \(bucket)/\(key) are not the ones its row counts")
        }
        return StoredObject(info: info, fileID: fileID, extents: extents)
    }

    /// Writes the row of `object` (and its extents), in place of `current`'s.
    static func insertObject(_ db: Database, _ object: StoredObject, replacing current: StoredObject?) throws {
        let info = object.info
        var arguments: [(any DatabaseValueConvertible)?] = [info.bucket, info.key.keyBlob, info.size, info.etag, Millis.from(info.lastModified)]
        arguments += try MetadataColumns.arguments(info.metadata)
        arguments += [object.fileID, info.isAppendable]
        arguments += ChecksumColumns.arguments(info.checksums)
        arguments.append(object.extents.count)
        let statement = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO object (\(objectColumns)) VALUES (\(MetadataColumns.placeholders(arguments.count)))")
        try statement.execute(arguments: StatementArguments(arguments))
        if let current { try deleteExtents(db, current) }
        let insert = try db.cachedStatement(sql: "INSERT INTO extent (bucket, key, seq, file_id, size) VALUES (?, ?, ?, ?, ?)")
        for (seq, extent) in object.extents.enumerated() {
            try insert.execute(arguments: [info.bucket, info.key.keyBlob, seq, extent.fileID, extent.size])
        }
    }

    /// Deletes the extent rows of `object`, when it has any.
    static func deleteExtents(_ db: Database, _ object: StoredObject) throws {
        guard !object.extents.isEmpty else { return }
        try db.execute(sql: "DELETE FROM extent WHERE bucket = ? AND key = ?", arguments: [object.info.bucket, object.info.key.keyBlob])
    }

    // MARK: Listing

    /// ListObjects v1/v2 over the index (`Listing` walks it): the page and the rows it read.
    func listObjects(bucket: String, walk: ListWalk) async throws -> (ListResult, rowsScanned: Int) {
        try await read { db in
            try Self.requireBucket(db, bucket)
            var scanned = 0
            let result = try walk.run { cursor, limit in
                var sql = "SELECT key, size, etag, last_modified_ms FROM object WHERE bucket = ? AND key \(cursor.inclusive ? ">=" : ">") ?"
                var arguments: [(any DatabaseValueConvertible)?] = [bucket, Data(cursor.bound)]
                if let upper = walk.upper {
                    sql += " AND key < ?"
                    arguments.append(Data(upper))
                }
                sql += " ORDER BY key LIMIT \(limit)"
                // A lazy cursor: rows are stepped one at a time, so leaving the page at a common
                // prefix costs only the rows actually read.
                let rows = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
                return {
                    guard let row = try rows.next() else { return nil }
                    scanned += 1
                    let keyData: Data = row["key"]
                    return ([UInt8](keyData), { ObjectSummary(
                        key: String(decoding: keyData, as: UTF8.self), size: row["size"], etag: row["etag"],
                        lastModified: Millis.date(row["last_modified_ms"])
                    ) })
                }
            }
            return (result, scanned)
        }
    }
}
