import Foundation
import NIOCore
import Testing
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

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

    /// A write drops the entries of what it wrote, and only those: lookups of other keys keep
    /// hitting, also a lookup that raced it; one that raced a write to its own key fills nothing,
    /// and neither does one older than the writes the cache remembers.
    @Test func writesDropOnlyTheKeysTheyWrote() {
        let cache = ObjectInfoCache(capacity: 64)
        func row(_ bucket: String, _ key: String) -> StoredObject {
            StoredObject(info: ObjectInfo(bucket: bucket, key: key, size: 1, etag: "\"e\"", lastModified: Date(), metadata: ObjectMetadata(),
                                          isAppendable: false), fileID: "id-\(bucket)-\(key)")
        }
        for key in ["hot1", "hot2", "cold"] { cache.fill(row("b", key), generation: cache.get(bucket: "b", key: key).generation) }
        cache.fill(row("other", "hot1"), generation: cache.get(bucket: "other", key: "hot1").generation)
        let racedOther = cache.get(bucket: "b", key: "new")
        let racedSame = cache.get(bucket: "b", key: "cold")
        cache.invalidate(.keys(bucket: "b", ["cold", "new2"]))
        cache.invalidate(.nothing)
        #expect(cache.unwritten(bucket: "b", key: "new", since: racedOther.generation))
        #expect(!cache.unwritten(bucket: "b", key: "cold", since: racedSame.generation))
        #expect(cache.get(bucket: "b", key: "hot1").object != nil && cache.get(bucket: "b", key: "hot2").object != nil)
        #expect(cache.get(bucket: "b", key: "cold").object == nil)
        cache.fill(row("b", "new"), generation: racedOther.generation)
        #expect(cache.get(bucket: "b", key: "new").object != nil, "a write to another key does not void a lookup")
        cache.fill(row("b", "cold"), generation: racedSame.generation)
        #expect(cache.get(bucket: "b", key: "cold").object == nil, "a write to its own key does")
        cache.invalidate(.bucket("b"))
        #expect(cache.get(bucket: "b", key: "hot1").object == nil && cache.get(bucket: "other", key: "hot1").object != nil)
        let ancient = cache.get(bucket: "b", key: "late")
        for index in 0...ObjectInfoCache.rememberedWrites { cache.invalidate(.keys(bucket: "b", ["k\(index)"])) }
        cache.fill(row("b", "late"), generation: ancient.generation)
        #expect(!cache.unwritten(bucket: "b", key: "late", since: ancient.generation), "older than the writes remembered: cannot tell")
        #expect(cache.get(bucket: "b", key: "late").object == nil, "older than the writes remembered: not stored")
        let stats = cache.statistics
        #expect(stats.hits > 0 && stats.misses > 0)
    }

    /// Through the store: a hot object stays cached while other keys are written.
    @Test func aHotObjectStaysCachedWhileOthersAreWritten() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("cache")
        try await store.put("cache", "hot", "hot-bytes")
        #expect(try await store.content("cache", "hot") == "hot-bytes")
        let before = store.objectCache.statistics
        for index in 0..<20 {
            try await store.put("cache", "cold\(index)", "x")
            #expect(try await store.content("cache", "hot") == "hot-bytes")
        }
        let after = store.objectCache.statistics
        #expect(after.hits - before.hits >= 20, "every read of the hot object after the first was a hit")
        try await store.put("cache", "hot", "changed")
        #expect(try await store.content("cache", "hot") == "changed")
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
        // Past the byte budget, entries are dropped until the new body fits.
        cache.fill(row("c", 4), body: ByteBuffer(string: "cccc"), generation: cache.get(bucket: "b", key: "c").generation)
        #expect(cache.cachedBodyBytes == 4)
        #expect(cache.get(bucket: "b", key: "a").object == nil)
        #expect(cache.get(bucket: "b", key: "c").body == ByteBuffer(string: "cccc"))
    }
}

/// Larger objects keep their files open in the cache, so that a GET of cached pages opens
/// nothing and needs no pool job (`readAtOnce`); no write may leave a replaced or deleted file
/// open, nor a read see one.
@Suite struct OpenFileCacheTests {
    /// Descriptors of this process open on deleted files under `directory`.
    func deletedFilesOpen(under directory: String) -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
            .filter { $0.hasPrefix(directory) && $0.hasSuffix("(deleted)") }
    }

    /// The bytes a read at once hands over as one span of its file.
    func spanBytes(_ read: ObjectRead) throws -> [UInt8] {
        let span = try #require(read.body.zeroCopy?.whole)
        var bytes = [UInt8](repeating: 0, count: span.range.count)
        #expect(pread(span.descriptor, &bytes, bytes.count, off_t(span.range.lowerBound)) == bytes.count)
        return bytes
    }

    @Test func largerObjectsAreReadAtOnceFromTheirOpenFileUntilTheNextWrite() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("cache")
        let content = String(repeating: "0123456789abcdef", count: 4096)  // 64 KiB: no bytes kept
        try await store.put("cache", "k", content)
        #expect(try store.readAtOnce(bucket: "cache", key: "k", range: nil) == nil, "nothing read yet")
        #expect(try await store.content("cache", "k") == content)
        #expect(store.objectCache.openFiles == 1 && store.objectCache.cachedBodyBytes == 0)

        // At once: the whole object, or a range, as a span of the open file. (Each read holds
        // the file open while it lives, as a body being sent does.)
        do {
            let whole = try #require(try store.readNow("cache", "k"))
            #expect(!whole.isPartial && whole.range == 0..<65536)
            #expect(try spanBytes(whole) == Array(content.utf8))
            let ranged = try #require(try store.readNow("cache", "k", range: ByteRange.parse("bytes=16-25")))
            #expect(ranged.isPartial && ranged.contentRange == "bytes 16-25/65536")
            #expect(try spanBytes(ranged) == Array("0123456789".utf8))
        }
        #expect(throws: StoreError.invalidRange(size: 65536)) { try store.readAtOnce(bucket: "cache", key: "k", range: ByteRange.parse("bytes=70000-")) }

        // Pages not in the page cache: not at once, but read through the open file as before.
        let file = try #require(box.objectFiles.first)
        let fd = open(box.data + "/objects/" + file, O_RDONLY)
        #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        close(fd)
        #expect(try store.readAtOnce(bucket: "cache", key: "k", range: nil) == nil)
        #expect(try await store.content("cache", "k") == content)

        // A write closes every kept file before it deletes the replaced one: nothing deleted stays
        // open, and the next read is the new version's.
        let second = String(content.reversed())
        try await store.put("cache", "k", second)
        #expect(store.objectCache.openFiles == 0)
        #expect(try store.readAtOnce(bucket: "cache", key: "k", range: nil) == nil)
        #expect(deletedFilesOpen(under: box.data).isEmpty)
        #expect(try await store.content("cache", "k") == second)
        do {
            let again = try #require(try store.readNow("cache", "k"))
            #expect(try spanBytes(again) == Array(second.utf8))
        }
        try await store.deleteObject(bucket: "cache", key: "k")
        #expect(try store.readAtOnce(bucket: "cache", key: "k", range: nil) == nil)
        #expect(store.objectCache.openFiles == 0 && deletedFilesOpen(under: box.data).isEmpty)
    }

    /// A body longer than a segment and a chunk comes in pieces: once the row is cached,
    /// `readAtOnce` says so at once, for the whole object or such a range, open file or not; a
    /// shorter range of it is still read at once from the open file.
    @Test func bodiesLongerThanOnePieceAreKnownToComeInPieces() async throws {
        let box = try Sandbox()
        let store = try box.open(readChunkSize: 16 * 1024, sendSegmentSize: 64 * 1024)
        try await store.createBucket("cache")
        let content = String(repeating: "0123456789abcdef", count: 12 * 1024)  // 192 KiB
        try await store.put("cache", "big", content)
        #expect(try store.readAtOnce(bucket: "cache", key: "big", range: nil) == nil, "row not read yet")
        #expect(try await store.content("cache", "big") == content)
        func inPieces(_ range: String?) throws -> Bool {
            guard case .inPieces? = try store.readAtOnce(bucket: "cache", key: "big", range: range.flatMap(ByteRange.parse)) else { return false }
            return true
        }
        #expect(try inPieces(nil))
        #expect(try inPieces("bytes=0-65536"), "one byte more than a segment")
        #expect(try !inPieces("bytes=0-65535"))
        let short = try #require(try store.readNow("cache", "big", range: ByteRange.parse("bytes=16-25")))
        #expect(try spanBytes(short) == Array("0123456789".utf8))
        #expect(throws: StoreError.invalidRange(size: 196608)) { try store.readAtOnce(bucket: "cache", key: "big", range: ByteRange.parse("bytes=200000-")) }

        // The open file closed by a write: the new row is known in pieces once it is read.
        try await store.put("cache", "big", String(content.reversed()))
        #expect(store.objectCache.openFiles == 0)
        #expect(try store.readAtOnce(bucket: "cache", key: "big", range: nil) == nil)
        _ = try await store.headObject(bucket: "cache", key: "big")
        #expect(try inPieces(nil))
    }

    /// At most an eighth of the descriptors the process may open, and never more than 256.
    @Test func keptFilesLeaveMostDescriptorsToConnections() throws {
        var limit = rlimit()
        #if os(Linux)
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #else
        try #require(getrlimit(RLIMIT_NOFILE, &limit) == 0)
        #endif
        let kept = LocalObjectStore.keptFiles()
        #expect(kept > 0 && kept <= 256 && UInt64(kept) <= UInt64(limit.rlim_cur) / 8)
        #expect(try Sandbox().open().objectCache.fileCapacity == kept)
    }

    @Test func keptFilesStayWithinTheirCapacityAndMatchTheirRows() throws {
        let cache = ObjectInfoCache(capacity: 8, fileCapacity: 2)
        let modified = Date()
        func row(_ key: String) -> StoredObject {
            StoredObject(info: ObjectInfo(bucket: "b", key: key, size: 100_000, etag: "\"e\"", lastModified: modified, metadata: ObjectMetadata(),
                                          isAppendable: false), fileID: "id-" + key)
        }
        func devNull() -> TollgateLocalStore.FileDescriptor { TollgateLocalStore.FileDescriptor(open("/dev/null", O_RDONLY)) }
        // Not kept for a row the cache does not hold, nor after a write ended since the lookup.
        cache.keepOpen(devNull(), of: row("a"), generation: cache.get(bucket: "b", key: "a").generation)
        #expect(cache.openFiles == 0)
        let before = cache.get(bucket: "b", key: "a").generation
        cache.fill(row("a"), generation: before)
        cache.invalidate()
        cache.fill(row("a"), generation: cache.get(bucket: "b", key: "a").generation)
        cache.keepOpen(devNull(), of: row("a"), generation: before)
        #expect(cache.openFiles == 0)
        // Kept for the row it was opened for, and handed out with it.
        for key in ["a", "b", "c"] {
            let lookup = cache.get(bucket: "b", key: key)
            if lookup.object == nil { cache.fill(row(key), generation: lookup.generation) }
            cache.keepOpen(devNull(), of: row(key), generation: lookup.generation)
            #expect(cache.openFiles <= 2)
            #expect(cache.get(bucket: "b", key: key).file != nil)
        }
        // A row replaced in the cache by another version does not take the old version's file.
        cache.keepOpen(devNull(), of: StoredObject(info: row("c").info, fileID: "other"), generation: cache.get(bucket: "b", key: "c").generation)
        #expect(cache.get(bucket: "b", key: "c").file != nil && cache.openFiles <= 2)
        cache.invalidate()
        #expect(cache.openFiles == 0 && cache.get(bucket: "b", key: "c").file == nil)
    }
}
