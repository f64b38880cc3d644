import TollgateStore
import Foundation
import GRDB
import TollgateCrypto

/// The metadata schema. Keys are stored as BLOBs of their UTF-8 bytes, so SQLite's memcmp
/// ordering is exactly S3's byte order, and (bucket, key) is the clustered primary key the
/// listing walks.
enum Schema {
    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE bucket (
                    name TEXT NOT NULL PRIMARY KEY,
                    created_ms INTEGER NOT NULL
                ) WITHOUT ROWID;

                CREATE TABLE object (
                    bucket TEXT NOT NULL REFERENCES bucket(name),
                    key BLOB NOT NULL,
                    size INTEGER NOT NULL,
                    etag TEXT NOT NULL,
                    last_modified_ms INTEGER NOT NULL,
                    content_type TEXT,
                    content_encoding TEXT,
                    content_disposition TEXT,
                    cache_control TEXT,
                    expires TEXT,
                    content_language TEXT,
                    user_metadata TEXT NOT NULL,
                    file_id TEXT NOT NULL,
                    appendable INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (bucket, key)
                ) WITHOUT ROWID;

                CREATE TABLE upload (
                    upload_id TEXT NOT NULL PRIMARY KEY,
                    bucket TEXT NOT NULL REFERENCES bucket(name),
                    key BLOB NOT NULL,
                    initiated_ms INTEGER NOT NULL,
                    content_type TEXT,
                    content_encoding TEXT,
                    content_disposition TEXT,
                    cache_control TEXT,
                    expires TEXT,
                    content_language TEXT,
                    user_metadata TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX upload_by_key ON upload(bucket, key, upload_id);

                CREATE TABLE part (
                    upload_id TEXT NOT NULL REFERENCES upload(upload_id) ON DELETE CASCADE,
                    part_number INTEGER NOT NULL,
                    size INTEGER NOT NULL,
                    etag TEXT NOT NULL,
                    last_modified_ms INTEGER NOT NULL,
                    file_id TEXT NOT NULL,
                    PRIMARY KEY (upload_id, part_number)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2-completed-uploads") { db in
            // Uploads completed lately, so that a retried CompleteMultipartUpload (the first
            // answer lost on the way) gets the same answer; pruned with expired uploads.
            try db.execute(sql: """
                CREATE TABLE completed_upload (
                    upload_id TEXT NOT NULL PRIMARY KEY,
                    bucket TEXT NOT NULL,
                    key BLOB NOT NULL,
                    etag TEXT NOT NULL,
                    completed_ms INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3-object-tags") { db in
            try db.execute(sql: """
                ALTER TABLE object ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
                ALTER TABLE upload ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
                """)
        }
        migrator.registerMigration("v4-checksums") { db in
            // An object's (and a part's) additional checksum and CRC-64; the checksum an upload
            // was created to get.
            try db.execute(sql: """
                ALTER TABLE object ADD COLUMN checksum_algorithm TEXT;
                ALTER TABLE object ADD COLUMN checksum BLOB;
                ALTER TABLE object ADD COLUMN checksum_parts INTEGER;
                ALTER TABLE object ADD COLUMN crc64ecma INTEGER;
                ALTER TABLE part ADD COLUMN checksum_algorithm TEXT;
                ALTER TABLE part ADD COLUMN checksum BLOB;
                ALTER TABLE part ADD COLUMN checksum_parts INTEGER;
                ALTER TABLE part ADD COLUMN crc64ecma INTEGER;
                ALTER TABLE upload ADD COLUMN checksum_algorithm TEXT;
                ALTER TABLE upload ADD COLUMN checksum_full_object INTEGER NOT NULL DEFAULT 0;
                """)
        }
        migrator.registerMigration("v5-bucket-cors") { db in
            // A bucket's CORS rules: its CORSConfiguration as JSON (`BucketCORSColumn`).
            try db.execute(sql: """
                CREATE TABLE bucket_cors (
                    bucket TEXT NOT NULL PRIMARY KEY REFERENCES bucket(name),
                    configuration TEXT NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v6-object-extents") { db in
            // An object made of several files (a completed multipart upload: its parts, in
            // order, never copied): `object.extents` counts them, `object.file_id` is the first,
            // and `extent` lists them all. A single-file object has `extents = 0` and no rows here.
            try db.execute(sql: """
                ALTER TABLE object ADD COLUMN extents INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE extent (
                    bucket TEXT NOT NULL,
                    key BLOB NOT NULL,
                    seq INTEGER NOT NULL,
                    file_id TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    PRIMARY KEY (bucket, key, seq)
                ) WITHOUT ROWID;
                """)
        }
        return migrator
    }
}

/// The checksum columns shared by `object` and `part`.
enum ChecksumColumns {
    static let names = "checksum_algorithm, checksum, checksum_parts, crc64ecma"

    static func arguments(_ c: ObjectChecksums) -> [(any DatabaseValueConvertible)?] {
        // SQLite integers are signed: the CRC's 64 bits are stored as they are.
        [c.additional?.algorithm.rawValue, c.additional.map { Data($0.digest) }, c.additional?.partCount,
         c.crc64ecma.map { Int64(bitPattern: $0) }]
    }

    static func decode(_ row: Row) throws -> ObjectChecksums {
        var checksums = ObjectChecksums()
        if let name: String = row["checksum_algorithm"] {
            guard let algorithm = ChecksumAlgorithm(rawValue: name), let digest: Data = row["checksum"], digest.count == algorithm.digestSize else {
                throw StoreError.corrupted("a stored checksum is not one the store writes")
            }
            checksums.additional = AdditionalChecksum(algorithm: algorithm, digest: [UInt8](digest), partCount: row["checksum_parts"])
        }
        if let crc: Int64 = row["crc64ecma"] { checksums.crc64ecma = UInt64(bitPattern: crc) }
        return checksums
    }
}

/// The metadata columns shared by `object` and `upload`.
enum MetadataColumns {
    static let names = "content_type, content_encoding, content_disposition, cache_control, expires, content_language, user_metadata, tags"

    static func arguments(_ m: ObjectMetadata) throws -> [(any DatabaseValueConvertible)?] {
        [m.contentType, m.contentEncoding, m.contentDisposition, m.cacheControl, m.expires, m.contentLanguage,
         try json(m.userMetadata), try json(m.tags)]
    }

    /// `?, ?, …`: one placeholder per argument.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    static func json(_ map: [String: String]) throws -> String {
        if map.isEmpty { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(map), as: UTF8.self)
    }

    static func map(_ json: String) throws -> [String: String] {
        json == "{}" ? [:] : try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
    }

    static func decode(_ row: Row) throws -> ObjectMetadata {
        ObjectMetadata(
            contentType: row["content_type"], contentEncoding: row["content_encoding"],
            contentDisposition: row["content_disposition"], cacheControl: row["cache_control"],
            expires: row["expires"], contentLanguage: row["content_language"], userMetadata: try map(row["user_metadata"]),
            tags: try map(row["tags"])
        )
    }
}

extension String {
    /// The key as stored: its UTF-8 bytes.
    var keyBlob: Data { Data(utf8) }
}
