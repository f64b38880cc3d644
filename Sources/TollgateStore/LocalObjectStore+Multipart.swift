import Foundation
import GRDB
import NIOCore
import TollgateCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Multipart uploads. Each part is its own file under `objects/` (random id), referenced by a
/// `part` row; completing concatenates the part files into a new object file (streamed, never
/// in memory), publishes it, and in the commit transaction replaces the object row and deletes
/// the upload's rows. The part files are deleted after the commit; if a crash intervenes they
/// are orphans and start-up removes them.
extension LocalObjectStore {
    static let maxPartNumber = 10_000

    static func validatePartNumber(_ n: Int) throws(StoreError) {
        guard (1...maxPartNumber).contains(n) else {
            throw .invalidArgument("Part number must be an integer between 1 and \(maxPartNumber), inclusive")
        }
    }

    static let uploadColumns = "upload_id, bucket, key, initiated_ms, \(MetadataColumns.names)"

    static func decodeUpload(_ row: Row) throws -> MultipartUpload {
        let keyData: Data = row["key"]
        return MultipartUpload(
            bucket: row["bucket"], key: String(decoding: keyData, as: UTF8.self), uploadID: row["upload_id"],
            initiated: Millis.date(row["initiated_ms"]), metadata: try MetadataColumns.decode(row)
        )
    }

    /// The upload, which must belong to `bucket`/`key`; NoSuchBucket / NoSuchUpload otherwise.
    static func fetchUpload(_ db: Database, bucket: String, key: String, uploadID: String) throws -> MultipartUpload {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT \(uploadColumns) FROM upload WHERE upload_id = ? AND bucket = ? AND key = ?",
            arguments: [uploadID, bucket, key.keyBlob]
        ) else {
            try requireBucket(db, bucket)
            throw StoreError.noSuchUpload(uploadID: uploadID)
        }
        return try decodeUpload(row)
    }

    struct PartRow: Sendable {
        let info: PartInfo
        let fileID: String
    }

    static func fetchParts(_ db: Database, uploadID: String, after marker: Int = 0, limit: Int = -1) throws -> [PartRow] {
        try Row.fetchAll(db, sql: """
            SELECT part_number, size, etag, last_modified_ms, file_id FROM part
            WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?
            """, arguments: [uploadID, marker, limit]).map { row in
            PartRow(
                info: PartInfo(partNumber: row["part_number"], etag: row["etag"], size: row["size"], lastModified: Millis.date(row["last_modified_ms"])),
                fileID: row["file_id"]
            )
        }
    }

    public func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata) async throws -> MultipartUpload {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        let upload = MultipartUpload(bucket: bucket, key: key, uploadID: try StorageLayout.newID(), initiated: now(), metadata: metadata)
        let limit = maxUploadsPerBucket
        try await write { db in
            try Self.requireBucket(db, bucket)
            let inProgress = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM upload WHERE bucket = ?", arguments: [bucket]) ?? 0
            guard inProgress < limit else { throw StoreError.tooManyUploads(bucket: bucket, limit: limit) }
            var arguments: [(any DatabaseValueConvertible)?] = [upload.uploadID, bucket, key.keyBlob, Millis.from(upload.initiated)]
            arguments += try MetadataColumns.arguments(metadata)
            try db.execute(
                sql: "INSERT INTO upload (\(Self.uploadColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: StatementArguments(arguments)
            )
        }
        return upload
    }

    public func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions = WriteOptions()
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try Self.validatePartNumber(partNumber)
        _ = try await read { db in try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID) }
        let file = try await stage(body, computeSHA256: options.computeSHA256, verify: options.verify)
        return try await commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, file: file)
    }

    public func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int,
        source: ObjectLocation, range: ByteRange?, options: CopyOptions = CopyOptions()
    ) async throws -> PartInfo {
        try Self.validatePartNumber(partNumber)
        _ = try await read { db in try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID) }
        let read = try await getObject(bucket: source.bucket, key: source.key, range: range)
        try options.checkSource?(read.info)
        let file = try await stage(read.body, computeSHA256: false, verify: nil)
        return try await commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, file: file)
    }

    /// Records a published part file, replacing an earlier part with the same number. The
    /// upload must still exist at commit (an abort or complete may have won the race).
    func commitPart(bucket: String, key: String, uploadID: String, partNumber: Int, file: PublishedFile) async throws -> PartInfo {
        let info = PartInfo(partNumber: partNumber, etag: Self.quotedETag(file.md5), size: file.size, lastModified: now())
        let obsolete: String?
        do {
            obsolete = try await write { db in
                _ = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
                let old = try String.fetchOne(
                    db, sql: "SELECT file_id FROM part WHERE upload_id = ? AND part_number = ?", arguments: [uploadID, partNumber]
                )
                try db.execute(sql: """
                    INSERT OR REPLACE INTO part (upload_id, part_number, size, etag, last_modified_ms, file_id)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """, arguments: [uploadID, partNumber, info.size, info.etag, Millis.from(info.lastModified), file.id])
                return old
            }
        } catch {
            removeFiles([file.id])
            throw error
        }
        if let obsolete { removeFiles([obsolete]) }
        return info
    }

    public func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int = 0, maxParts: Int = 1000) async throws -> ListPartsResult {
        let limit = Swift.max(0, Swift.min(maxParts, 1000))
        return try await read { db in
            let upload = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
            let rows = try Self.fetchParts(db, uploadID: uploadID, after: Swift.max(0, partNumberMarker), limit: limit + 1)
            let truncated = rows.count > limit
            let parts = rows.prefix(limit).map(\.info)
            return ListPartsResult(
                upload: upload, parts: Array(parts), isTruncated: truncated,
                nextPartNumberMarker: truncated ? parts.last?.partNumber : nil
            )
        }
    }

    public func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
        let maxUploads = Swift.max(0, Swift.min(query.maxUploads, 1000))
        let prefix = Array(query.prefix.utf8)
        let delimiter: [UInt8]? = query.delimiter.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        let upper = KeyBytes.successor(prefix)
        let keyMarker = query.keyMarker.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        // With an upload-id-marker, the marker key's uploads after that id come first.
        var pendingSameKey: (key: [UInt8], after: String)?
        if let keyMarker, let uploadIDMarker = query.uploadIDMarker, !uploadIDMarker.isEmpty, !KeyBytes.less(keyMarker, prefix),
           delimiter.flatMap({ KeyBytes.rollup(keyMarker, prefix: prefix, delimiter: $0) }) == nil {
            pendingSameKey = (keyMarker, uploadIDMarker)
        }
        let start = ListCursor.start(prefix: prefix, delimiter: delimiter, after: keyMarker)
        let firstSameKey = pendingSameKey

        return try await read { db in
            try Self.requireBucket(db, bucket)
            var uploads: [MultipartUpload] = []
            var prefixes: [String] = []
            var last: (key: [UInt8], uploadID: String?)?
            var truncated = false
            var count = 0
            var cursor = start
            var sameKey = firstSameKey

            func take(_ rows: [Row]) throws -> Bool {
                // Returns true when the page is full and another item exists.
                for row in rows {
                    let upload = try Self.decodeUpload(row)
                    if count == maxUploads { truncated = true; return true }
                    uploads.append(upload)
                    count += 1
                    last = (Array(upload.key.utf8), upload.uploadID)
                }
                return false
            }

            if maxUploads > 0, let same = sameKey {
                let rows = try Row.fetchAll(db, sql: """
                    SELECT \(Self.uploadColumns) FROM upload WHERE bucket = ? AND key = ? AND upload_id > ?
                    ORDER BY upload_id LIMIT ?
                    """, arguments: [bucket, Data(same.key), same.after, maxUploads + 1])
                if try take(rows) { sameKey = nil }
            }

            scan: while maxUploads > 0, !truncated {
                var sql = "SELECT \(Self.uploadColumns) FROM upload WHERE bucket = ? AND key \(cursor.inclusive ? ">=" : ">") ?"
                var arguments: [(any DatabaseValueConvertible)?] = [bucket, Data(cursor.bound)]
                if let upper {
                    sql += " AND key < ?"
                    arguments.append(Data(upper))
                }
                let limit = maxUploads - count + 1
                sql += " ORDER BY key, upload_id LIMIT \(limit)"
                let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments))
                for row in rows {
                    let keyData: Data = row["key"]
                    let key = [UInt8](keyData)
                    if count == maxUploads { truncated = true; break scan }
                    if let delimiter, let common = KeyBytes.rollup(key, prefix: prefix, delimiter: delimiter) {
                        prefixes.append(KeyBytes.string(common))
                        count += 1
                        last = (common, nil)
                        guard let next = KeyBytes.successor(common) else { break scan }
                        cursor = ListCursor(bound: next, inclusive: true)
                        continue scan
                    }
                    let upload = try Self.decodeUpload(row)
                    uploads.append(upload)
                    count += 1
                    last = (key, upload.uploadID)
                    // Resume after this upload: the rest of this key's uploads, then later keys.
                    let rest = try Row.fetchAll(db, sql: """
                        SELECT \(Self.uploadColumns) FROM upload WHERE bucket = ? AND key = ? AND upload_id > ?
                        ORDER BY upload_id LIMIT ?
                        """, arguments: [bucket, keyData, upload.uploadID, maxUploads - count + 1])
                    if try take(rest) { break scan }
                    cursor = ListCursor(bound: key, inclusive: false)
                    continue scan
                }
                break scan
            }
            return ListUploadsResult(
                uploads: uploads, commonPrefixes: prefixes, isTruncated: truncated,
                nextKeyMarker: truncated ? last.map { KeyBytes.string($0.key) } : nil,
                nextUploadIDMarker: truncated ? last?.uploadID : nil
            )
        }
    }

    public func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        let files: [String] = try await write { db in
            _ = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
            return try Self.deleteUpload(db, uploadID)
        }
        removeFiles(files)
    }

    /// Deletes an upload's rows; returns its part files, to delete after the commit.
    static func deleteUpload(_ db: Database, _ uploadID: String) throws -> [String] {
        let files = try String.fetchAll(db, sql: "SELECT file_id FROM part WHERE upload_id = ?", arguments: [uploadID])
        try db.execute(sql: "DELETE FROM part WHERE upload_id = ?", arguments: [uploadID])
        try db.execute(sql: "DELETE FROM upload WHERE upload_id = ?", arguments: [uploadID])
        return files
    }

    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], preconditions: WritePreconditions = .none,
        minimumPartSize: Int64? = nil
    ) async throws -> ObjectInfo {
        guard !parts.isEmpty else { throw StoreError.invalidArgument("You must specify at least one part") }
        for part in parts { try Self.validatePartNumber(part.partNumber) }
        for (a, b) in zip(parts, parts.dropFirst()) where b.partNumber <= a.partNumber { throw StoreError.invalidPartOrder }

        let (upload, stored) = try await read { db in
            let upload = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
            return (upload, try Self.fetchParts(db, uploadID: uploadID))
        }
        let byNumber = Dictionary(uniqueKeysWithValues: stored.map { ($0.info.partNumber, $0) })
        var chosen: [PartRow] = []
        for part in parts {
            guard let row = byNumber[part.partNumber], ETag.normalize(part.etag) == ETag.normalize(row.info.etag) else {
                throw StoreError.invalidPart(partNumber: part.partNumber)
            }
            chosen.append(row)
        }
        for row in chosen.dropLast() where row.info.size < minimumPartSize ?? configuration.minimumPartSize {
            throw StoreError.entityTooSmall(partNumber: row.info.partNumber)
        }

        // S3's multipart ETag: MD5 of the concatenated binary part MD5s, then "-N".
        let digest = try StreamingDigest(.md5)
        for row in chosen {
            guard let md5 = Hex.decode(ETag.normalize(row.info.etag)) else { throw StoreError.internal("stored part ETag is not hex") }
            try digest.update(md5)
        }
        let etag = "\"" + Hex.encode(try digest.finalize()) + "-\(chosen.count)\""

        // Open every part before concatenating; a part replaced meanwhile is gone → InvalidPart.
        var sources: [(FileDescriptor, Int64)] = []
        for row in chosen {
            let fd = Foundation.open(try layout.objectPath(row.fileID), O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                if errno == ENOENT { throw StoreError.invalidPart(partNumber: row.info.partNumber) }
                throw Posix.failure("open")
            }
            sources.append((FileDescriptor(fd), row.info.size))
        }
        let id = try StorageLayout.newID()
        let tmp = layout.tmpPath(id)
        let inputs = sources
        let size: Int64
        do {
            size = try await BlockingIO.run { try self.concatenate(inputs, into: tmp) }
            try await publish(id: id, from: tmp)
            storageState.noteWritten()
        } catch {
            Posix.unlinkIfPresent(tmp)
            storageState.note(error)
            throw error
        }
        let file = PublishedFile(id: id, size: size, md5: [], sha256: nil)
        let used = Dictionary(uniqueKeysWithValues: chosen.map { ($0.info.partNumber, $0.fileID) })
        return try await commitObject(
            bucket: bucket, key: key, file: file, etag: etag, metadata: upload.metadata, appendable: false,
            preconditions: preconditions,
            extra: { db, _ in
                // The upload must still exist and every part used must be the one we read.
                _ = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
                let now = try Self.fetchParts(db, uploadID: uploadID)
                let current = Dictionary(uniqueKeysWithValues: now.map { ($0.info.partNumber, $0.fileID) })
                for (number, fileID) in used where current[number] != fileID {
                    throw StoreError.invalidPart(partNumber: number)
                }
                return try Self.deleteUpload(db, uploadID)
            }
        )
    }

    /// Copies each (file, size) into a new file at `path` through one 1 MiB buffer, fsyncs it,
    /// and returns the total size. Removes the file on failure. Blocking.
    func concatenate(_ inputs: [(FileDescriptor, Int64)], into path: String) throws -> Int64 {
        let out = try Posix.open(path, O_WRONLY | O_CREAT | O_EXCL)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        do {
            var total: Int64 = 0
            for (file, size) in inputs {
                var offset: Int64 = 0
                while offset < size {
                    let want = Int(Swift.min(Int64(buffer.count), size - offset))
                    let got = try Posix.preadFully(file.fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
                    guard got == want else { throw StoreError.internal("part file shorter than its committed size") }
                    try checkWriteFault()
                    try Posix.writeAll(out, UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                    offset += Int64(got)
                }
                total += size
            }
            try Posix.fsync(out)
            Foundation.close(out)
            return total
        } catch {
            Foundation.close(out)
            Posix.unlinkIfPresent(path)
            throw error
        }
    }

    /// Aborts every upload initiated before `cutoff` (S3's AbortIncompleteMultipartUpload
    /// lifecycle rule, counted from initiation), deleting its parts' files. Works in batches so
    /// that no transaction holds the writer for long; returns how many uploads it aborted. An
    /// UploadPart or Complete racing with it finds the upload gone (NoSuchUpload) at its commit.
    @discardableResult
    public func abortUploads(initiatedBefore cutoff: Date, batchSize: Int = 500) async throws -> Int {
        let before = Millis.from(cutoff)
        var aborted = 0
        while true {
            let (count, files): (Int, [String]) = try await write { db in
                let ids = try String.fetchAll(
                    db, sql: "SELECT upload_id FROM upload WHERE initiated_ms < ? LIMIT ?", arguments: [before, batchSize]
                )
                return (ids.count, try ids.flatMap { try Self.deleteUpload(db, $0) })
            }
            removeFiles(files)
            aborted += count
            if count < batchSize { return aborted }
        }
    }
}
