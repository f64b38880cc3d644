import TollgateStore
import Foundation
import GRDB
import TollgateCORS

/// Buckets' CORS rules, one row per bucket that has any: its `CORSConfiguration` as JSON.
extension MetadataIndex {
    /// Every bucket with its rules, in one read (`BucketCache` keeps them).
    func allBuckets() async throws -> [String: CachedBucket] {
        try await read { db in
            var all: [String: CachedBucket] = [:]
            let rows = try Row.fetchAll(db, sql: """
                SELECT bucket.name, bucket.created_ms, bucket_cors.configuration FROM bucket
                LEFT JOIN bucket_cors ON bucket_cors.bucket = bucket.name
                """)
            for row in rows {
                let name: String = row[0]
                let cors: String? = row[2]
                all[name] = CachedBucket(
                    info: BucketInfo(name: name, creationDate: Millis.date(row[1])),
                    cors: cors.map { json in Result { () throws(StoreError) in try BucketCORSColumn.decode(json, bucket: name) } }
                )
            }
            return all
        }
    }

    func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws {
        let json = try BucketCORSColumn.encode(configuration)
        try await write(.nothing) { db in
            try Self.requireBucket(db, bucket)
            try db.execute(sql: "INSERT OR REPLACE INTO bucket_cors (bucket, configuration) VALUES (?, ?)", arguments: [bucket, json])
        }
    }

    func deleteBucketCORS(_ bucket: String) async throws {
        try await write(.nothing) { db in
            try Self.requireBucket(db, bucket)
            try db.execute(sql: "DELETE FROM bucket_cors WHERE bucket = ?", arguments: [bucket])
        }
    }
}

/// The `bucket_cors.configuration` column: the configuration's JSON (`CORSConfiguration`'s
/// coding keys), so that a rule stored by one version reads back the same in the next.
enum BucketCORSColumn {
    static func encode(_ configuration: CORSConfiguration) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(configuration), as: UTF8.self)
    }

    static func decode(_ json: String, bucket: String) throws(StoreError) -> CORSConfiguration {
        do { return try JSONDecoder().decode(CORSConfiguration.self, from: Data(json.utf8)) } catch {
            throw StoreError.corrupted("bucket \(bucket): unreadable CORS rules")
        }
    }
}
