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

        _ = try await store.copyObject(from: ObjectLocation(bucket: "cache", key: "src"), to: ObjectLocation(bucket: "cache", key: "k"), metadata: .source)
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
        let row = StoredObject(info: ObjectInfo(bucket: "b", key: "k", size: 1, etag: "\"e\"", lastModified: Date(), metadata: ObjectMetadata(),
                                                isAppendable: false), fileID: "id")
        let miss = cache.get(bucket: "b", key: "k")
        #expect(miss.object == nil)
        cache.invalidate()
        cache.fill(row, generation: miss.generation)
        #expect(cache.get(bucket: "b", key: "k").object == nil)

        let fresh = cache.get(bucket: "b", key: "k")
        cache.fill(row, generation: fresh.generation)
        #expect(cache.get(bucket: "b", key: "k").object == row)
        cache.invalidate()
        #expect(cache.get(bucket: "b", key: "k").object == nil)
    }

    @Test func aFullCacheStaysWithinItsCapacity() {
        let cache = ObjectInfoCache(capacity: 4)
        for index in 0..<10 {
            let row = StoredObject(info: ObjectInfo(bucket: "b", key: "k\(index)", size: 1, etag: "\"e\"", lastModified: Date(),
                                                    metadata: ObjectMetadata(), isAppendable: false), fileID: "id")
            cache.fill(row, generation: cache.get(bucket: "b", key: row.info.key).generation)
            #expect(cache.count <= 4)
        }
        #expect(cache.get(bucket: "b", key: "k9").object != nil)
    }
}

/// Small objects keep their bytes in the cache; what is served from there must be exactly the
/// committed version's bytes, whole or ranged, and never outlive a write.
@Suite struct ObjectBodyCacheTests {
    @Test func smallBodiesAreServedFromMemoryUntilTheNextWrite() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("cache")
        try await store.put("cache", "k", "first-version")
        #expect(try await store.content("cache", "k") == "first-version")
        #expect(store.objectCache.cachedBodyBytes == 13)
        // Served from memory: even with the file gone (damage from outside), the bytes are there.
        for file in box.objectFiles { try FileManager.default.removeItem(atPath: box.data + "/objects/" + file) }
        #expect(try await store.content("cache", "k") == "first-version")
        let ranged = try await store.getObject(bucket: "cache", key: "k", range: ByteRange.parse("bytes=6-12"))
        #expect(ranged.isPartial && ranged.range == 6..<13)
        #expect(try await string(ranged.body) == "version")
        await #expect(throws: StoreError.invalidRange(size: 13)) {
            try await store.getObject(bucket: "cache", key: "k", range: ByteRange.parse("bytes=20-30"))
        }

        try await store.put("cache", "k", "second")
        #expect(store.objectCache.cachedBodyBytes == 0)
        #expect(try await store.content("cache", "k") == "second")
    }

    @Test func onlySmallWholeBodiesAreKept() {
        let cache = ObjectInfoCache(capacity: 8, maximumBodySize: 4, bodyCapacity: 6)
        func row(_ key: String, _ size: Int64) -> StoredObject {
            StoredObject(info: ObjectInfo(bucket: "b", key: key, size: size, etag: "\"e\"", lastModified: Date(), metadata: ObjectMetadata(),
                                          isAppendable: false), fileID: "id")
        }
        cache.fill(row("big", 5), body: ByteBuffer(string: "12345"), generation: cache.get(bucket: "b", key: "big").generation)
        #expect(cache.get(bucket: "b", key: "big").object != nil)
        #expect(cache.get(bucket: "b", key: "big").body == nil)
        // A body that is not the whole object is not kept.
        cache.fill(row("part", 4), body: ByteBuffer(string: "12"), generation: cache.get(bucket: "b", key: "part").generation)
        #expect(cache.get(bucket: "b", key: "part").body == nil)
        cache.fill(row("a", 4), body: ByteBuffer(string: "aaaa"), generation: cache.get(bucket: "b", key: "a").generation)
        #expect(cache.cachedBodyBytes == 4)
        // Past the byte budget the cache starts over instead of growing.
        cache.fill(row("c", 4), body: ByteBuffer(string: "cccc"), generation: cache.get(bucket: "b", key: "c").generation)
        #expect(cache.cachedBodyBytes == 4)
        #expect(cache.get(bucket: "b", key: "a").object == nil)
        #expect(cache.get(bucket: "b", key: "c").body == ByteBuffer(string: "cccc"))
    }
}
