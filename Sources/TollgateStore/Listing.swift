import Foundation
import TollgateCrypto

/// Byte-string helpers for listing. Keys compare by their UTF-8 bytes (S3 order), exactly as
/// SQLite compares the BLOB column.
package enum KeyBytes {
    /// The smallest byte string greater than every string that starts with `prefix`, or nil
    /// when there is none (empty prefix, or all 0xFF).
    package static func successor(_ prefix: [UInt8]) -> [UInt8]? {
        var bytes = prefix
        while let last = bytes.last {
            if last < 0xFF {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
            bytes.removeLast()
        }
        return nil
    }

    /// The common prefix `key` rolls up into: `prefix` + everything up to and including the
    /// first `delimiter` after it; nil when the key contains no delimiter after the prefix.
    package static func rollup(_ key: [UInt8], prefix: [UInt8], delimiter: [UInt8]) -> [UInt8]? {
        guard !delimiter.isEmpty, key.count >= prefix.count + delimiter.count else { return nil }
        var i = prefix.count
        while i + delimiter.count <= key.count {
            if key[i] == delimiter[0], key[i..<(i + delimiter.count)].elementsEqual(delimiter) {
                return Array(key[0..<(i + delimiter.count)])
            }
            i += 1
        }
        return nil
    }

    package static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    package static func string(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}

/// Where a listing resumes: keys `>= bound` (inclusive) or `> bound`.
package struct ListCursor {
    package var bound: [UInt8]
    package var inclusive: Bool

    package init(bound: [UInt8], inclusive: Bool) {
        self.bound = bound
        self.inclusive = inclusive
    }

    /// The cursor for a marker / start-after / decoded continuation token. A marker that is
    /// itself a common prefix (the last item of a delimited page) resumes past every key under it.
    package static func start(prefix: [UInt8], delimiter: [UInt8]?, after: [UInt8]?) -> ListCursor {
        guard let after, !KeyBytes.less(after, prefix) else { return ListCursor(bound: prefix, inclusive: true) }
        if let delimiter, KeyBytes.rollup(after, prefix: prefix, delimiter: delimiter) == after {
            if let next = KeyBytes.successor(after) { return ListCursor(bound: next, inclusive: true) }
        }
        return ListCursor(bound: after, inclusive: false)
    }

    /// True when `key` is at or past the cursor.
    package func admits(_ key: [UInt8]) -> Bool {
        inclusive ? !KeyBytes.less(key, bound) : KeyBytes.less(bound, key)
    }
}

/// One ListObjects v1/v2 page, walked over any index that can seek in key order (SQLite's
/// primary key, a sorted array). When a key rolls up into a common prefix, the walk seeks again
/// at the prefix's successor, so a prefix holding any number of keys costs one seek. Common
/// prefixes count against max-keys, as in S3.
package struct ListWalk {
    /// The next key and a way to make its summary (only called for keys that do not roll up,
    /// before the next call), or nil at the end.
    package typealias Next = () throws -> (key: [UInt8], summary: () throws -> ObjectSummary)?

    package let prefix: [UInt8]
    package let delimiter: [UInt8]?
    package let start: ListCursor
    /// Keys are below this bound (the prefix's successor), when there is one.
    package let upper: [UInt8]?
    /// 0...1000.
    package let maxKeys: Int

    package init(_ query: ListQuery) throws(StoreError) {
        maxKeys = Swift.max(0, Swift.min(query.maxKeys, 1000))
        prefix = Array(query.prefix.utf8)
        delimiter = query.delimiter.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        var after: [UInt8]?
        if let token = query.continuationToken {
            guard let decoded = Base64.decode(token), !decoded.isEmpty else { throw .invalidContinuationToken }
            after = decoded
        } else if let startAfter = query.startAfter, !startAfter.isEmpty {
            after = Array(startAfter.utf8)
        }
        start = ListCursor.start(prefix: prefix, delimiter: delimiter, after: after)
        upper = KeyBytes.successor(prefix)
    }

    /// Walks the page. `seek(cursor, limit)` yields, in byte order, at most `limit` keys from
    /// `cursor` and below `upper`.
    package func run(_ seek: (ListCursor, Int) throws -> Next) throws -> ListResult {
        var objects: [ObjectSummary] = []
        var prefixes: [String] = []
        var lastItem: [UInt8]?
        var truncated = false
        var cursor = start
        var count = 0

        scan: while maxKeys > 0 {
            let limit = maxKeys - count + 1
            let next = try seek(cursor, limit)
            var fetched = 0
            while let (key, summary) = try next() {
                fetched += 1
                if count == maxKeys {
                    truncated = true
                    break scan
                }
                if let delimiter, let common = KeyBytes.rollup(key, prefix: prefix, delimiter: delimiter) {
                    prefixes.append(KeyBytes.string(common))
                    count += 1
                    lastItem = common
                    guard let next = KeyBytes.successor(common) else { break scan }
                    cursor = ListCursor(bound: next, inclusive: true)
                    continue scan
                }
                objects.append(try summary())
                count += 1
                lastItem = key
                cursor = ListCursor(bound: key, inclusive: false)
            }
            if fetched < limit { break scan }
        }
        let next = truncated ? lastItem : nil
        return ListResult(
            objects: objects, commonPrefixes: prefixes, isTruncated: truncated,
            nextMarker: next.map(KeyBytes.string), nextContinuationToken: next.map { Base64.encodeURL($0) }
        )
    }
}

/// One ListMultipartUploads page over every upload of a bucket, for stores that have them all at
/// hand (the in-memory twin; the S3 store, which reads its backend's without markers or
/// delimiter, whose handling differs between backends). Uploads are ordered by key, then id.
package enum UploadListing {
    package static func page(_ uploads: [MultipartUpload], query: ListUploadsQuery) -> ListUploadsResult {
        let maxUploads = Swift.max(0, Swift.min(query.maxUploads, 1000))
        let prefix = Array(query.prefix.utf8)
        let delimiter: [UInt8]? = query.delimiter.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        let upper = KeyBytes.successor(prefix)
        let keyMarker = query.keyMarker.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
        let all = uploads.map { (key: Array($0.key.utf8), upload: $0) }
            .sorted { KeyBytes.less($0.key, $1.key) || ($0.key == $1.key && $0.upload.uploadID < $1.upload.uploadID) }
        // The marker key's uploads after the upload-id-marker come first, then the keys past the marker.
        var items: [(key: [UInt8], upload: MultipartUpload?)] = []
        if let keyMarker, let uploadIDMarker = query.uploadIDMarker, !uploadIDMarker.isEmpty, !KeyBytes.less(keyMarker, prefix),
           delimiter.flatMap({ KeyBytes.rollup(keyMarker, prefix: prefix, delimiter: $0) }) == nil {
            items += all.filter { $0.key == keyMarker && $0.upload.uploadID > uploadIDMarker }.map { ($0.key, $0.upload) }
        }
        let start = ListCursor.start(prefix: prefix, delimiter: delimiter, after: keyMarker)
        var rolledUp: [UInt8]?
        for entry in all where start.admits(entry.key) && upper.map({ KeyBytes.less(entry.key, $0) }) ?? true {
            if let rolledUp, entry.key.starts(with: rolledUp) { continue }
            if let delimiter, let common = KeyBytes.rollup(entry.key, prefix: prefix, delimiter: delimiter) {
                rolledUp = common
                items.append((common, nil))
            } else {
                items.append((entry.key, entry.upload))
            }
        }
        let page = items.prefix(maxUploads)
        let truncated = maxUploads > 0 && items.count > maxUploads
        return ListUploadsResult(
            uploads: page.compactMap(\.upload), commonPrefixes: page.filter { $0.upload == nil }.map { KeyBytes.string($0.key) },
            isTruncated: truncated, nextKeyMarker: truncated ? page.last.map { KeyBytes.string($0.key) } : nil,
            nextUploadIDMarker: truncated ? page.last?.upload?.uploadID : nil
        )
    }
}
