import Foundation
import NIOCore
import Testing
@testable import TollgateStore

/// The in-memory cache of object rows must never answer with a row a write has replaced.
@Suite struct ObjectCacheTests {
    @Test func appendAndMultipartAreSeenAtOnce() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 1)
        try await store.createBucket("cache")
        _ = try await store.appendObject(bucket: "cache", key: "log", position: 0, body: Chunks("ab"), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(try await store.content("cache", "log") == "ab")
        #expect(store.objectCache.count == 1)
        _ = try await store.appendObject(bucket: "cache", key: "log", position: 2, body: Chunks("cd"), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(try await store.headObject(bucket: "cache", key: "log").size == 4)
        #expect(try await store.content("cache", "log") == "abcd")

        try await store.put("cache", "mp", "before")
        #expect(try await store.content("cache", "mp") == "before")
        let upload = try await store.createMultipartUpload(bucket: "cache", key: "mp", metadata: ObjectMetadata())
        let part = try await store.uploadPart(bucket: "cache", key: "mp", uploadID: upload.uploadID, partNumber: 1, body: Chunks("after"), options: WriteOptions())
        _ = try await store.completeMultipartUpload(bucket: "cache", key: "mp", uploadID: upload.uploadID,
                                                    parts: [.init(partNumber: 1, etag: part.etag)], preconditions: .none)
        #expect(try await store.content("cache", "mp") == "after")
    }

    @Test func overwriteDeleteAndCopyAreSeenAtOnce() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("cache")
        try await store.put("cache", "src", "source-bytes")
        try await store.put("cache", "k", "one")
        #expect(try await store.content("cache", "k") == "one")

        _ = try await store.copyObject(from: ObjectLocation(bucket: "cache", key: "src"), to: ObjectLocation(bucket: "cache", key: "k"), metadata: nil)
        #expect(try await store.content("cache", "k") == "source-bytes")

        try await store.deleteObject(bucket: "cache", key: "k")
        await #expect(throws: StoreError.noSuchKey(bucket: "cache", key: "k")) { try await store.headObject(bucket: "cache", key: "k") }

        try await store.put("cache", "k", "again")
        _ = try await store.deleteObjects(bucket: "cache", keys: ["k"])
        await #expect(throws: StoreError.noSuchKey(bucket: "cache", key: "k")) { try await store.getObject(bucket: "cache", key: "k") }
    }

    /// A lookup that started before a write ended must not fill the cache with what it read.
    @Test func aMissThatRacedAWriteIsNotStored() {
        let cache = ObjectInfoCache(capacity: 8)
        let row = ObjectInfo(bucket: "b", key: "k", size: 1, etag: "\"e\"", lastModified: Date(), metadata: ObjectMetadata(),
                             storageID: "id", isAppendable: false)
        let miss = cache.get(bucket: "b", key: "k")
        #expect(miss.info == nil)
        cache.invalidate()
        cache.fill(row, generation: miss.generation)
        #expect(cache.get(bucket: "b", key: "k").info == nil)

        let fresh = cache.get(bucket: "b", key: "k")
        cache.fill(row, generation: fresh.generation)
        #expect(cache.get(bucket: "b", key: "k").info == row)
        cache.invalidate()
        #expect(cache.get(bucket: "b", key: "k").info == nil)
    }

    @Test func aFullCacheStaysWithinItsCapacity() {
        let cache = ObjectInfoCache(capacity: 4)
        for index in 0..<10 {
            let row = ObjectInfo(bucket: "b", key: "k\(index)", size: 1, etag: "\"e\"", lastModified: Date(),
                                 metadata: ObjectMetadata(), storageID: "id", isAppendable: false)
            cache.fill(row, generation: cache.get(bucket: "b", key: row.key).generation)
            #expect(cache.count <= 4)
        }
        #expect(cache.get(bucket: "b", key: "k9").info != nil)
    }
}
