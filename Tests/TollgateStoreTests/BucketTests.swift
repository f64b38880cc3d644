import Foundation
import GRDB
import NIOCore
import Testing
import TollgateCORS
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

@Suite struct BucketTests {
    @Test(arguments: ["abc", "my-bucket", "my.bucket.name", "a1-b2.c3", "123", String(repeating: "a", count: 63)])
    func validBucketNames(name: String) {
        #expect(StoreNames.isValidBucketName(name))
    }

    @Test(arguments: [
        "ab", String(repeating: "a", count: 64), "MyBucket", "-abc", "abc-", ".abc", "abc.", "a..b", "a.-b", "a-.b",
        "a_b", "a b", "192.168.1.1", "xn--abc", "abc-s3alias", "../x", "a/b", "%2e%2e", "ab\u{0}", "ümlaut",
    ])
    func invalidBucketNames(name: String) async throws {
        #expect(!StoreNames.isValidBucketName(name))
        let box = try Sandbox()
        let store = try box.open()
        #expect(await storeError { try await store.createBucket(name) } == .invalidBucketName(bucket: name))
    }

    /// The local store reads every bucket's CORS rules once and answers from memory until they
    /// change (or a bucket goes): a preflight costs no SQLite read, for any bucket name.
    @Test func corsRulesAreReadOnceUntilTheyChange() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("web")
        let rules = CORSConfiguration(rules: [CORSRule(allowedOrigins: ["*"], allowedMethods: ["GET"])])
        try await store.setBucketCORS("web", rules)
        for _ in 0..<3 {
            #expect(try await store.bucketCORS("web") == rules)
            #expect(try await store.bucketCORS("never-created-\(UUID().uuidString.lowercased())") == nil)
        }
        #expect(store.buckets.misses == 1)
        try await store.deleteBucketCORS("web")
        #expect(try await store.bucketCORS("web") == nil)
        #expect(try await store.bucketCORS("web") == nil)
        #expect(store.buckets.misses == 2)
        try await store.setBucketCORS("web", rules)
        #expect(try await store.bucketCORS("web") == rules)
        try await store.deleteBucket("web")
        #expect(try await store.bucketCORS("web") == nil)
        #expect(store.buckets.misses == 4)
        // Object writes leave the rules cached.
        try await store.createBucket("busy")
        try await store.setBucketCORS("busy", rules)
        #expect(try await store.bucketCORS("busy") == rules)
        try await store.put("busy", "k", "v")
        #expect(try await store.bucketCORS("busy") == rules)
        #expect(store.buckets.misses == 5)
    }

    /// The bucket check every write starts with reads the same cached map: buckets are read
    /// from SQLite once, and again only after a bucket is created or deleted, which the next
    /// check sees.
    @Test func bucketChecksAreReadOnceUntilBucketsChange() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("one")
        for i in 0..<3 {
            try await store.put("one", "k\(i)", "v")
            #expect(try await store.headBucket("one").name == "one")
            #expect(await storeError { try await store.headBucket("none") } == .noSuchBucket(bucket: "none"))
        }
        #expect(store.buckets.misses == 1)
        #expect(await storeError { try await store.put("two", "k", "v") } == .noSuchBucket(bucket: "two"))
        try await store.createBucket("two")
        try await store.put("two", "k", "v")
        #expect(store.buckets.misses == 2)
        try await store.deleteObject(bucket: "two", key: "k")
        try await store.deleteBucket("two")
        #expect(await storeError { try await store.put("two", "k", "v") } == .noSuchBucket(bucket: "two"))
        #expect(await storeError { try await store.headBucket("two") } == .noSuchBucket(bucket: "two"))
        #expect(try await store.ensureBuckets(["three"]) == ["three"])
        #expect(try await store.headBucket("three").name == "three")
        #expect(store.buckets.misses == 4)
    }

    /// Unreadable CORS rules (a damaged row) fail that bucket's CORS lookups only: every
    /// bucket still takes writes, and other buckets' rules still read.
    @Test func unreadableCORSRulesFailOnlyThatBucketsRules() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("web")
        try await store.createBucket("other")
        try await store.index.pool.write { db in
            try db.execute(sql: "INSERT INTO bucket_cors (bucket, configuration) VALUES ('web', 'not json')")
        }
        store.buckets.invalidate()
        #expect(await storeError { try await store.bucketCORS("web") } == .corrupted("bucket web: unreadable CORS rules"))
        #expect(try await store.bucketCORS("other") == nil)
        #expect(try await store.put("web", "k", "v").size == 1)
        #expect(try await store.put("other", "k", "v").size == 1)
    }

    /// Buckets read before a change are never kept after it.
    @Test func bucketCacheRefusesAFillFromBeforeAChange() {
        let cache = BucketCache()
        let (all, generation) = cache.get()
        #expect(all == nil)
        cache.invalidate()
        cache.fill(["web": CachedBucket(info: BucketInfo(name: "web", creationDate: Date()), cors: nil)], generation: generation)
        #expect(cache.get().all == nil)
        let current = cache.get().generation
        cache.fill([:], generation: current)
        #expect(cache.get().all == [:])
    }

    @Test func lifecycle() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("zeta")
        try await store.createBucket("alpha")
        #expect(await storeError { try await store.createBucket("alpha") } == .bucketExists(bucket: "alpha"))
        #expect(try await store.listBuckets().map(\.name) == ["alpha", "zeta"])
        #expect(try await store.headBucket("alpha").name == "alpha")
        #expect(await storeError { _ = try await store.headBucket("nope") } == .noSuchBucket(bucket: "nope"))

        try await store.put("alpha", "k", "v")
        #expect(await storeError { try await store.deleteBucket("alpha") } == .bucketNotEmpty(bucket: "alpha"))
        try await store.deleteObject(bucket: "alpha", key: "k")
        // An unfinished upload does not keep the bucket: it is aborted, its part files deleted.
        let upload = try await store.createMultipartUpload(bucket: "alpha", key: "m", metadata: ObjectMetadata())
        _ = try await store.uploadPart(bucket: "alpha", key: "m", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part"), options: WriteOptions())
        #expect(!box.objectFiles.isEmpty)
        try await store.deleteBucket("alpha")
        #expect(box.objectFiles.isEmpty)
        #expect(await storeError { try await store.abortMultipartUpload(bucket: "alpha", key: "m", uploadID: upload.uploadID) } != nil)
        #expect(await storeError { try await store.deleteBucket("alpha") } == .noSuchBucket(bucket: "alpha"))
        #expect(try await store.listBuckets().map(\.name) == ["zeta"])
    }

    @Test func ensureBucketsIsIdempotentAndKeepsCreationDate() async throws {
        let box = try Sandbox()
        let store = try box.open()
        #expect(try await store.ensureBuckets(["logs", "media"]) == ["logs", "media"])
        let first = try await store.headBucket("logs")
        try await Task.sleep(for: .milliseconds(5))
        #expect(try await store.ensureBuckets(["logs", "media", "new-one"]) == ["new-one"], "only what it created")
        #expect(try await store.headBucket("logs") == first)
        #expect(try await store.listBuckets().map(\.name) == ["logs", "media", "new-one"])
        #expect(await storeError { try await store.ensureBuckets(["ok-name", "Bad_Name"]) } == .invalidBucketName(bucket: "Bad_Name"))
        #expect(await storeError { _ = try await store.headBucket("ok-name") } == .noSuchBucket(bucket: "ok-name"))
    }
}
