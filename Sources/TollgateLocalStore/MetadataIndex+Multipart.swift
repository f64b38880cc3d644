import TollgateStore
import Foundation
import GRDB
import TollgateCrypto

/// Multipart uploads and their parts in the index.
extension MetadataIndex {
    static let uploadColumns = "upload_id, bucket, key, initiated_ms, \(MetadataColumns.names), checksum_algorithm, checksum_full_object"

    static func decodeUpload(_ row: Row) throws -> MultipartUpload {
        let keyData: Data = row["key"]
        var checksum: UploadChecksum?
        if let name: String = row["checksum_algorithm"] {
            guard let algorithm = ChecksumAlgorithm(rawValue: name) else { throw StoreError.corrupted("an upload's checksum algorithm is unknown") }
            checksum = UploadChecksum(algorithm: algorithm, fullObject: row["checksum_full_object"])
        }
        return MultipartUpload(
            bucket: row["bucket"], key: String(decoding: keyData, as: UTF8.self), uploadID: row["upload_id"],
            initiated: Millis.date(row["initiated_ms"]), metadata: try MetadataColumns.decode(row), checksum: checksum
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

    static func fetchParts(_ db: Database, uploadID: String, after marker: Int = 0, limit: Int = -1) throws -> [PartRow] {
        try Row.fetchAll(db, sql: """
            SELECT part_number, size, etag, last_modified_ms, file_id, \(ChecksumColumns.names) FROM part
            WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?
            """, arguments: [uploadID, marker, limit]).map { row in
            PartRow(
                info: PartInfo(partNumber: row["part_number"], etag: row["etag"], size: row["size"], lastModified: Millis.date(row["last_modified_ms"]),
                               checksums: try ChecksumColumns.decode(row)),
                fileID: row["file_id"]
            )
        }
    }

    /// Deletes an upload's rows; returns its part files, to delete after the commit.
    static func deleteUpload(_ db: Database, _ uploadID: String) throws -> [String] {
        let files = try String.fetchAll(db, sql: "SELECT file_id FROM part WHERE upload_id = ?", arguments: [uploadID])
        try db.execute(sql: "DELETE FROM part WHERE upload_id = ?", arguments: [uploadID])
        try db.execute(sql: "DELETE FROM upload WHERE upload_id = ?", arguments: [uploadID])
        return files
    }

    /// Records a new upload unless the bucket already holds `limit` (`tooManyUploads`).
    func createUpload(_ upload: MultipartUpload, limit: Int) async throws {
        try await write(.nothing) { db in
            try Self.requireBucket(db, upload.bucket)
            let inProgress = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM upload WHERE bucket = ?", arguments: [upload.bucket]) ?? 0
            guard inProgress < limit else { throw StoreError.tooManyUploads(bucket: upload.bucket, limit: limit) }
            var arguments: [(any DatabaseValueConvertible)?] = [upload.uploadID, upload.bucket, upload.key.keyBlob, Millis.from(upload.initiated)]
            arguments += try MetadataColumns.arguments(upload.metadata)
            arguments += [upload.checksum?.algorithm.rawValue, upload.checksum?.fullObject ?? false]
            try db.execute(
                sql: "INSERT INTO upload (\(Self.uploadColumns)) VALUES (\(MetadataColumns.placeholders(arguments.count)))",
                arguments: StatementArguments(arguments)
            )
        }
    }

    func upload(bucket: String, key: String, uploadID: String) async throws -> MultipartUpload {
        try await read { db in try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID) }
    }

    /// The upload and all its parts, from one snapshot.
    func uploadWithParts(bucket: String, key: String, uploadID: String) async throws -> (MultipartUpload, [PartRow]) {
        try await read { db in
            (try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID), try Self.fetchParts(db, uploadID: uploadID))
        }
    }

    /// Records a part, replacing an earlier part with the same number; returns the replaced
    /// part's file. The upload must still exist (an abort or complete may have won the race).
    func commitPart(bucket: String, key: String, uploadID: String, part: PartRow) async throws -> String? {
        try await write(.nothing) { db in
            _ = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
            let old = try String.fetchOne(
                db, sql: "SELECT file_id FROM part WHERE upload_id = ? AND part_number = ?", arguments: [uploadID, part.info.partNumber]
            )
            var arguments: [(any DatabaseValueConvertible)?] = [
                uploadID, part.info.partNumber, part.info.size, part.info.etag, Millis.from(part.info.lastModified), part.fileID,
            ]
            arguments += ChecksumColumns.arguments(part.info.checksums)
            try db.execute(sql: """
                INSERT OR REPLACE INTO part (upload_id, part_number, size, etag, last_modified_ms, file_id, \(ChecksumColumns.names))
                VALUES (\(MetadataColumns.placeholders(arguments.count)))
                """, arguments: StatementArguments(arguments))
            return old
        }
    }

    func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int, maxParts: Int) async throws -> ListPartsResult {
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

    /// Deletes the upload's rows; returns its part files.
    func abortUpload(bucket: String, key: String, uploadID: String) async throws -> [String] {
        try await write(.nothing) { db in
            _ = try Self.fetchUpload(db, bucket: bucket, key: key, uploadID: uploadID)
            return try Self.deleteUpload(db, uploadID)
        }
    }

    /// The upload `uploadID` as it was completed, if it was completed since the last prune.
    func completedUpload(_ uploadID: String) async throws -> CompletedUploadRecord? {
        try await lookup { db in
            try Row.fetchOne(db, sql: "SELECT bucket, key, etag FROM completed_upload WHERE upload_id = ?", arguments: [uploadID]).map { row in
                CompletedUploadRecord(bucket: row["bucket"], key: String(decoding: (row["key"] as Data), as: UTF8.self), etag: row["etag"])
            }
        }
    }

    /// Deletes up to `limit` uploads initiated before `cutoff`, and the records of uploads
    /// completed before it; returns how many uploads and their part files.
    func abortUploads(initiatedBefore cutoff: Date, limit: Int) async throws -> (count: Int, files: [String]) {
        let before = Millis.from(cutoff)
        return try await write(.nothing) { db in
            try db.execute(sql: "DELETE FROM completed_upload WHERE completed_ms < ?", arguments: [before])
            let ids = try String.fetchAll(
                db, sql: "SELECT upload_id FROM upload WHERE initiated_ms < ? LIMIT ?", arguments: [before, limit]
            )
            return (ids.count, try ids.flatMap { try Self.deleteUpload(db, $0) })
        }
    }

    /// ListMultipartUploads: uploads ordered by key, then upload id; keys rolling up into a
    /// common prefix are skipped with one seek, as in `ListWalk`.
    func listUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
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
}
