import Foundation
import GRDB
import NIOCore
import Testing
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

/// Keys chosen for byte-order edge cases: '-' (0x2D) and '.' (0x2E) sort before '/' (0x2F);
/// upper case before lower; 'ｚ' (U+FF5A, EF BD 9A) before '😀' (U+1F600, F0 9F 98 80) in UTF-8
/// although UTF-16 orders them the other way; 'é' precomposed (C3 A9) vs decomposed
/// ('e' + U+0301) are different keys.
let listingKeys: [String] = [
    "a", "a-b", "a.b", "a/b", "a/c", "a/d/e", "a/d/f", "a0", "A", "b", "b/", "b//c", "photos/2024/jan/1.jpg",
    "photos/2024/jan/2.jpg", "photos/2024/feb/1.jpg", "photos/2025/x.jpg", "photos/readme", "é", "e\u{301}", "ｚ", "😀",
    "😀/x", "z", "z z", "%2e%2e", "../up",
]

/// The reference model: S3 semantics written the slow, obvious way.
func referenceListing(_ keys: [String], prefix: String, delimiter: String?) -> [(item: String, isPrefix: Bool)] {
    let sorted = keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    var out: [(String, Bool)] = []
    for key in sorted where key.utf8.starts(with: prefix.utf8) {
        let rest = Array(key.utf8.dropFirst(prefix.utf8.count))
        if let delimiter, !delimiter.isEmpty, let range = findBytes(rest, Array(delimiter.utf8)) {
            let common = prefix + String(decoding: rest[..<range], as: UTF8.self)
            if out.last?.0 != common { out.append((common, true)) }
        } else {
            out.append((key, false))
        }
    }
    return out
}

private func findBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Int? {
    guard haystack.count >= needle.count else { return nil }
    for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle { return i + needle.count }
    return nil
}

@Suite struct ListingTests {
    static func filledStore(_ box: Sandbox) async throws -> LocalObjectStore {
        let store = try box.open()
        try await store.createBucket("list")
        for key in listingKeys { try await store.put("list", key, key) }
        return store
    }

    @Test func fullListingIsInUTF8ByteOrder() async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        let result = try await store.listObjects(bucket: "list", query: ListQuery())
        #expect(result.objects.map(\.key) == [
            "%2e%2e", "../up", "A", "a", "a-b", "a.b", "a/b", "a/c", "a/d/e", "a/d/f", "a0", "b", "b/", "b//c", "e\u{301}",
            "photos/2024/feb/1.jpg", "photos/2024/jan/1.jpg", "photos/2024/jan/2.jpg", "photos/2025/x.jpg", "photos/readme",
            "z", "z z", "é", "ｚ", "😀", "😀/x",
        ])
        #expect(!result.isTruncated && result.nextMarker == nil && result.nextContinuationToken == nil)
        let a = try #require(result.objects.first { $0.key == "a-b" })
        let expectedETag = try quotedMD5(Array("a-b".utf8))
        #expect(a.size == 3 && a.etag == expectedETag)
    }

    @Test func delimiterGroupsCommonPrefixes() async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        let root = try await store.listObjects(bucket: "list", query: ListQuery(delimiter: "/"))
        #expect(root.commonPrefixes == ["../", "a/", "b/", "photos/", "😀/"])
        #expect(root.objects.map(\.key) == ["%2e%2e", "A", "a", "a-b", "a.b", "a0", "b", "e\u{301}", "z", "z z", "é", "ｚ", "😀"])
        let photos = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "photos/2024/", delimiter: "/"))
        #expect(photos.commonPrefixes == ["photos/2024/feb/", "photos/2024/jan/"])
        #expect(photos.objects.isEmpty)
        let b = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "b/", delimiter: "/"))
        #expect(b.objects.map(\.key) == ["b/"])
        #expect(b.commonPrefixes == ["b//"])
        // Multi-character delimiter.
        let jpg = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "photos/", delimiter: ".jpg"))
        #expect(jpg.commonPrefixes == ["photos/2024/feb/1.jpg", "photos/2024/jan/1.jpg", "photos/2024/jan/2.jpg", "photos/2025/x.jpg"])
        #expect(jpg.objects.map(\.key) == ["photos/readme"])
    }

    @Test func commonPrefixesCountAgainstMaxKeys() async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        let page = try await store.listObjects(bucket: "list", query: ListQuery(delimiter: "/", maxKeys: 3))
        #expect(page.objects.map(\.key) == ["%2e%2e", "A"])
        #expect(page.commonPrefixes == ["../"])
        #expect(page.keyCount == 3)
        #expect(page.isTruncated)
        #expect(page.nextMarker == "A")
        let exact = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "a/", maxKeys: 4))
        #expect(exact.keyCount == 4 && !exact.isTruncated && exact.nextContinuationToken == nil)
        let zero = try await store.listObjects(bucket: "list", query: ListQuery(maxKeys: 0))
        #expect(zero.keyCount == 0 && !zero.isTruncated)
        let capped = try await store.listObjects(bucket: "list", query: ListQuery(maxKeys: 5000))
        #expect(capped.keyCount == listingKeys.count)
    }

    @Test func markersAndStartAfter() async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        let afterA = try await store.listObjects(bucket: "list", query: ListQuery(startAfter: "a/c", maxKeys: 3))
        #expect(afterA.objects.map(\.key) == ["a/d/e", "a/d/f", "a0"])
        // A marker that is not itself a key, and one before the prefix.
        let between = try await store.listObjects(bucket: "list", query: ListQuery(startAfter: "a/cz"))
        #expect(between.objects.first?.key == "a/d/e")
        let beforePrefix = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "photos/", startAfter: "a"))
        #expect(beforePrefix.objects.count == 5)
        let pastPrefix = try await store.listObjects(bucket: "list", query: ListQuery(prefix: "b", startAfter: "c"))
        #expect(pastPrefix.keyCount == 0 && !pastPrefix.isTruncated)
        // A marker equal to a common prefix skips everything under it.
        let afterCommon = try await store.listObjects(bucket: "list", query: ListQuery(delimiter: "/", startAfter: "a/"))
        #expect(afterCommon.objects.first?.key == "a0")
        #expect(!afterCommon.commonPrefixes.contains("a/"))
        // A continuation token takes precedence over start-after.
        let first = try await store.listObjects(bucket: "list", query: ListQuery(maxKeys: 2))
        let second = try await store.listObjects(bucket: "list", query: ListQuery(startAfter: "z", continuationToken: first.nextContinuationToken, maxKeys: 2))
        #expect(second.objects.map(\.key) == ["A", "a"])
    }

    @Test func invalidContinuationToken() async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        for token in ["!!!", "", "a"] {
            #expect(await storeError { _ = try await store.listObjects(bucket: "list", query: ListQuery(continuationToken: token)) } == .invalidContinuationToken)
        }
        #expect(await storeError { _ = try await store.listObjects(bucket: "nope", query: ListQuery()) } == .noSuchBucket(bucket: "nope"))
    }

    /// Paging with v1 markers and with v2 tokens, at every page size, reproduces the reference.
    @Test(arguments: [
        ("", nil as String?), ("", "/"), ("a", "/"), ("a/", "/"), ("photos/", "/"), ("photos/2024/", "/"), ("b", "/"),
        ("", "a"), ("photos", "2"), ("😀", "/"), ("zz", "/"), ("", "//"),
    ])
    func pagingMatchesReference(prefix: String, delimiter: String?) async throws {
        let box = try Sandbox()
        let store = try await Self.filledStore(box)
        let expected = referenceListing(listingKeys, prefix: prefix, delimiter: delimiter)
        for maxKeys in [1, 2, 3, 7, 1000] {
            for v2 in [false, true] {
                var items: [(String, Bool)] = []
                var marker: String?
                var token: String?
                var pages = 0
                while true {
                    let page = try await store.listObjects(bucket: "list", query: ListQuery(
                        prefix: prefix, delimiter: delimiter, startAfter: v2 ? nil : marker, continuationToken: v2 ? token : nil, maxKeys: maxKeys
                    ))
                    pages += 1
                    #expect(page.keyCount <= maxKeys)
                    // Objects and prefixes interleave in key order within a page.
                    let merged = (page.objects.map { ($0.key, false) } + page.commonPrefixes.map { ($0, true) })
                        .sorted { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
                    items += merged
                    if !page.isTruncated { break }
                    #expect(page.nextMarker == merged.last?.0)
                    marker = page.nextMarker
                    token = page.nextContinuationToken
                    if pages > 100 { Issue.record("no progress"); break }
                }
                #expect(items.map(\.0) == expected.map(\.item), "maxKeys \(maxKeys) v2 \(v2)")
                #expect(items.map(\.1) == expected.map(\.isPrefix))
            }
        }
    }
    /// 100k keys: a delimiter listing seeks past each common prefix instead of scanning its keys. The rows read are
    /// counted, not timed (the listing bench, `bench/start.sh`, times pages).
    @Test func largeBucketListsByIndexSeeks() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("huge")
        // Metadata rows only (listing never opens files): 20 folders × 5,000 keys.
        try await store.index.pool.write { db in
            let statement = try db.makeStatement(sql: """
                INSERT INTO object (bucket, key, size, etag, last_modified_ms, user_metadata, file_id) VALUES ('huge', ?, 1, '"e"', 0, '{}', ?)
                """)
            for folder in 0..<20 {
                for i in 0..<5_000 {
                    let key = String(format: "dir%02d/file%05d", folder, i)
                    try statement.execute(arguments: [key.keyBlob, String(format: "%032x", folder * 5_000 + i)])
                }
            }
        }
        let (root, rootRows) = try await store.listObjectsCountingRows(bucket: "huge", query: ListQuery(delimiter: "/"))
        #expect(root.commonPrefixes.count == 20)
        #expect(root.objects.isEmpty)
        #expect(rootRows <= 21)
        // A page deep inside the bucket reads one page of rows, not everything before it.
        let (deep, deepRows) = try await store.listObjectsCountingRows(bucket: "huge", query: ListQuery(prefix: "dir17/", startAfter: "dir17/file04000", maxKeys: 500))
        #expect(deep.objects.first?.key == "dir17/file04001")
        #expect(deep.keyCount == 500 && deep.isTruncated)
        #expect(deepRows <= 501)
        let page = try await store.listObjects(bucket: "huge", query: ListQuery(continuationToken: deep.nextContinuationToken))
        #expect(page.keyCount == 1000 && page.objects.first?.key == "dir17/file04501")
    }
}
