import Foundation
import GRDB
import NIOCore
import Synchronization
import Testing
import TollgateCrypto
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

@Suite struct ObjectTests {
    @Test func putGetRoundTripWithKnownETags() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("photos")
        let hello = try await store.put("photos", "hello.txt", "hello world")
        #expect(hello.etag == "\"5eb63bbbe01eeed093cb22bb8f5acdc3\"")
        #expect(hello.size == 11)
        let empty = try await store.put("photos", "empty", "")
        #expect(empty.etag == "\"d41d8cd98f00b204e9800998ecf8427e\"")
        #expect(try await store.content("photos", "hello.txt") == "hello world")
        #expect(try await store.content("photos", "empty") == "")
        let head = try await store.headObject(bucket: "photos", key: "hello.txt")
        #expect(head == hello)
        #expect(StorageLayout.isValidID(try await store.fileID("photos", "hello.txt")))
    }

    /// Every commit syncs the WAL (synchronous = FULL on the connection that commits), also
    /// after a reopen: with GRDB's default for a pool (NORMAL), an acknowledged PUT could vanish
    /// in a power cut, and with it the old version, whose file is deleted after the commit.
    @Test func commitsSyncTheWriteAheadLog() async throws {
        let box = try Sandbox()
        for _ in 0..<2 {
            let store = try box.open()
            let level = try await store.index.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
            #expect(level == 2)
            try store.close()
        }
    }

    @Test func metadataRoundTripsExactly() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("meta")
        let metadata = ObjectMetadata(
            contentType: "text/plain; charset=UTF-8", contentEncoding: "gzip",
            contentDisposition: "attachment; filename=\"r\u{e9}sum\u{e9}.pdf\"", cacheControl: "max-age=60, must-revalidate",
            expires: "Thu, 01 Dec 1994 16:00:00 GMT", contentLanguage: "de-CH",
            userMetadata: ["Author": "Zoë  O'Brien", "empty": "", "slash/ish": "a/b\\c", "json": "{\"k\": [1]}", "日本": "語"]
        )
        let put = try await store.put("meta", "k", "x", metadata: metadata)
        #expect(put.metadata == metadata)
        let head = try await store.headObject(bucket: "meta", key: "k")
        #expect(head.metadata == metadata)
        #expect(head.lastModified == put.lastModified)
        // Millisecond precision stored; whole seconds for HTTP.
        let ms = head.lastModified.timeIntervalSince1970 * 1000
        #expect(ms == ms.rounded())
        #expect(head.lastModifiedSeconds.timeIntervalSince1970 == head.lastModified.timeIntervalSince1970.rounded(.down))
        // Absent headers stay absent.
        let plain = try await store.put("meta", "plain", "y")
        #expect(try await store.headObject(bucket: "meta", key: "plain").metadata == ObjectMetadata())
        #expect(plain.metadata.contentType == nil)
    }

    @Test func overwriteReplacesAndRemovesOldFile() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("b-1")
        try await store.put("b-1", "k", "one")
        let first = try await store.fileID("b-1", "k")
        try await store.put("b-1", "k", "two!")
        let second = try await store.fileID("b-1", "k")
        #expect(first != second)
        #expect(try await store.content("b-1", "k") == "two!")
        #expect(box.objectFiles.count == 1)
        #expect(box.objectFiles.first?.hasSuffix(second) == true)
    }

    /// New object files go to the 256 directories `objects/ab/00`: 400 objects make no other
    /// directory, and their ids keep 120 random bits (all distinct, first bytes spread).
    @Test func newFilesGoToTwoHundredFiftySixDirectories() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("fan")
        for i in 0..<400 { try await store.put("fan", "k\(i)", "\(i)") }
        let files = box.objectFiles
        #expect(files.count == 400)
        #expect(files.allSatisfy { $0.split(separator: "/")[1] == "00" })
        let ids = files.map { String($0.split(separator: "/")[2]) }
        #expect(Set(ids).count == 400)
        #expect(ids.allSatisfy { StorageLayout.isValidID($0) && $0.dropFirst(2).hasPrefix("00") })
        #expect(Set(ids.map { $0.prefix(2) }).count > 150)
    }

    /// A file under another `ab/cd`, as earlier versions named them, is still read, listed,
    /// kept by start-up recovery and removed when its object is overwritten.
    @Test func filesOfTheEarlierLayoutStillRead() async throws {
        let box = try Sandbox()
        var store = try box.open()
        try await store.createBucket("old")
        try await store.put("old", "k", "earlier bytes")
        let id = try await store.fileID("old", "k")
        var earlier = Array(id)
        earlier[2] = "7"; earlier[3] = "f"
        let earlierID = String(earlier)
        let directory = box.data + "/objects/" + id.prefix(2) + "/7f"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: try store.layout.objectPath(id), toPath: directory + "/" + earlierID)
        try await store.index.pool.write { db in
            try db.execute(sql: "UPDATE object SET file_id = ? WHERE file_id = ?", arguments: [earlierID, id])
        }
        try store.close()
        store = try box.open()
        #expect(try await store.content("old", "k") == "earlier bytes")
        #expect(box.objectFiles == [id.prefix(2) + "/7f/" + earlierID])
        try await store.put("old", "k", "new bytes")
        #expect(try await store.content("old", "k") == "new bytes")
        #expect(box.objectFiles.count == 1)
        #expect(box.objectFiles.first?.contains("/00/") == true)
    }

    @Test func readerKeepsOldBytesAcrossConcurrentOverwrite() async throws {
        let box = try Sandbox()
        let store = try box.open(readChunkSize: 4)
        try await store.createBucket("bkt")
        try await store.put("bkt", "k", "old-version-bytes")
        let read = try await store.getObject(bucket: "bkt", key: "k", range: nil)
        try await store.put("bkt", "k", "NEW")
        try await store.deleteObject(bucket: "bkt", key: "k")
        #expect(try await string(read.body) == "old-version-bytes")
    }

    /// A range that fits in one read chunk is read when the object is opened, so the response
    /// can go out in one write; a larger one streams chunk by chunk.
    @Test func smallBodiesAreReadAtOpenLargeOnesStream() async throws {
        let box = try Sandbox()
        let store = try box.open(readChunkSize: 8)
        try await store.createBucket("bkt")
        try await store.put("bkt", "small", "12345678")
        try await store.put("bkt", "large", "123456789")
        let small = try await store.getObject(bucket: "bkt", key: "small", range: nil)
        #expect(small.body.singleBuffer.map { String(buffer: $0) } == "12345678")
        let large = try await store.getObject(bucket: "bkt", key: "large", range: nil)
        #expect(large.body.singleBuffer == nil)
        #expect(try await string(large.body) == "123456789")
        let ranged = try await store.getObject(bucket: "bkt", key: "large", range: ByteRange.parse("bytes=1-3"))
        #expect(ranged.body.singleBuffer.map { String(buffer: $0) } == "234")
    }

    /// Whether a range's pages are cached is asked of cachestat(2) (Linux 6.5 and later), else of
    /// mincore: the two agree on every range, cached or not, page-aligned or not.
    @Test func cachestatAndMincoreAgreeOnWhatIsCached() throws {
        try BlockingWork.allowing { try cachestatAndMincoreAgree() }
    }

    private func cachestatAndMincoreAgree() throws {
        let box = try Sandbox()
        let path = box.data + "/resident"
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let bytes = [UInt8](repeating: 0x5A, count: 5 * page + 100)
        try FileManager.default.createDirectory(atPath: box.data, withIntermediateDirectories: true)
        try #require(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        let file = FileDescriptor(fd)
        let ranges: [Range<Int64>] = [0..<Int64(bytes.count), 1..<2, Int64(page - 1)..<Int64(page + 1), Int64(2 * page)..<Int64(5 * page + 100)]
        // Linux before 6.5 has no cachestat: then every answer is mincore's.
        let release = ProcessInfo.processInfo.operatingSystemVersion
        let hasCachestat = release.majorVersion > 6 || (release.majorVersion == 6 && release.minorVersion >= 5)
        #expect(fsync(fd) == 0)
        for range in ranges {
            #expect(FileSegments.cachedByMincore(file, range), "\(range)")
            if hasCachestat { #expect(FileSegments.cachedByCachestat(file, range) == true, "\(range)") }
            #expect(FileSegments.isCached(file, range))
        }
        // Clean pages dropped from the cache: none of the ranges is cached any more.
        #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        for range in ranges {
            #expect(!FileSegments.cachedByMincore(file, range), "\(range)")
            if hasCachestat { #expect(FileSegments.cachedByCachestat(file, range) == false, "\(range)") }
            #expect(!FileSegments.isCached(file, range))
        }
        // One page read back (no readahead): a range within it is cached, one that reaches the
        // next page is not.
        #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0)
        var one = [UInt8](repeating: 0, count: 1)
        #expect(pread(fd, &one, 1, off_t(page)) == 1)
        for (range, cached) in [(Int64(page)..<Int64(page + 10), true), (Int64(page)..<Int64(2 * page + 1), false)] {
            #expect(FileSegments.cachedByMincore(file, range) == cached, "\(range)")
            if hasCachestat { #expect(FileSegments.cachedByCachestat(file, range) == cached, "\(range)") }
        }
    }

    /// A file-backed body also comes as segments: spans of the file where its pages are in the
    /// page cache (a sender passes them to the kernel), bytes read on the pool where they are not.
    @Test func largeBodiesComeAsCachedSpansOrBytesRead() async throws {
        let box = try Sandbox()
        let store = try box.open(readChunkSize: 8, sendSegmentSize: 8192)
        try await store.createBucket("bkt")
        let content = String(repeating: "0123456789abcdef", count: 1543)  // 24688 bytes: 3 segments and 112 bytes
        try await store.put("bkt", "k", content)
        func segments(_ range: ByteRange?) async throws -> [(cached: Bool, range: Range<Int64>, bytes: String)] {
            let read = try await store.getObject(bucket: "bkt", key: "k", range: range)
            var result: [(cached: Bool, range: Range<Int64>, bytes: String)] = []
            var offset = read.range.lowerBound
            for try await segment in try #require(read.body.zeroCopy) {
                switch segment {
                case .region(let span):
                    var bytes = [UInt8](repeating: 0, count: span.range.count)
                    #expect(pread(span.descriptor, &bytes, bytes.count, off_t(span.range.lowerBound)) == bytes.count)
                    result.append((true, span.range, String(decoding: bytes, as: UTF8.self)))
                case .bytes(let buffer):
                    result.append((false, offset..<offset + Int64(buffer.readableBytes), String(buffer: buffer)))
                }
                offset = result.last!.range.upperBound
            }
            return result
        }
        let cached = try await segments(nil)
        #expect(cached.map(\.range) == [0..<8192, 8192..<16384, 16384..<24576, 24576..<24688])
        #expect(cached.allSatisfy { $0.cached })
        #expect(cached.map(\.bytes).joined() == content)

        let file = try #require(box.objectFiles.first)
        let fd = open(box.data + "/objects/" + file, O_RDONLY)
        #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        close(fd)
        let evicted = try await segments(.closed(100, 20000))
        #expect(evicted.map(\.range) == [100..<8292, 8292..<16484, 16484..<20001])
        // The first was read (and the kernel's readahead may have cached the next ones).
        #expect(evicted.first?.cached == false)
        #expect(evicted.map(\.bytes).joined() == String(decoding: Array(content.utf8)[100...20000], as: UTF8.self))
        // Reading them cached them.
        #expect(try await segments(.closed(100, 20000)).allSatisfy { $0.cached })
    }

    @Test(arguments: [
        ("bytes=0-4", "01234", true),
        ("bytes=6-", "6789", true),
        ("bytes=-3", "789", true),
        ("bytes=8-100", "89", true),
        ("bytes=-100", "0123456789", true),
        ("bytes=9-9", "9", true),
    ])
    func ranges(header: String, expected: String, partial: Bool) async throws {
        let box = try Sandbox()
        let store = try box.open(readChunkSize: 3)
        try await store.createBucket("rng")
        try await store.put("rng", "digits", "0123456789")
        let range = try #require(ByteRange.parse(header))
        let read = try await store.getObject(bucket: "rng", key: "digits", range: range)
        #expect(try await string(read.body) == expected)
        #expect(read.isPartial == partial)
        #expect(read.contentLength == Int64(expected.utf8.count))
    }

    @Test func contentRangeAndUnsatisfiableRanges() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("rng")
        try await store.put("rng", "digits", "0123456789")
        try await store.put("rng", "empty", "")
        let read = try await store.getObject(bucket: "rng", key: "digits", range: .closed(2, 5))
        #expect(read.contentRange == "bytes 2-5/10")
        for range in [ByteRange.from(10), .closed(10, 20), .suffix(0)] {
            #expect(await storeError { _ = try await store.getObject(bucket: "rng", key: "digits", range: range) } == .invalidRange(size: 10))
        }
        #expect(await storeError { _ = try await store.getObject(bucket: "rng", key: "empty", range: .suffix(5)) } == .invalidRange(size: 0))
        #expect(await storeError { _ = try await store.getObject(bucket: "rng", key: "empty", range: .from(0)) } == .invalidRange(size: 0))
        // Whole empty object without a range is fine.
        #expect(try await store.getObject(bucket: "rng", key: "empty", range: nil).contentLength == 0)
    }

    @Test(arguments: [
        ("bytes=0-0", ByteRange.closed(0, 0)),
        ("bytes=5-", .from(5)),
        ("bytes=-7", .suffix(7)),
        ("Bytes= 1-2 ", .closed(1, 2)),
    ])
    func rangeParsing(header: String, expected: ByteRange) {
        #expect(ByteRange.parse(header) == expected)
    }

    @Test(arguments: ["bytes=5-1", "bytes=0-1,4-5", "items=0-1", "bytes=-", "bytes=a-b", "bytes=1", "", "bytes=--1", "bytes=+1-2"])
    func invalidRangeHeadersAreIgnored(header: String) {
        #expect(ByteRange.parse(header) == nil)
    }

    @Test func missingObjectsAndBuckets() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("here")
        #expect(await storeError { _ = try await store.headObject(bucket: "here", key: "nope") } == .noSuchKey(bucket: "here", key: "nope"))
        #expect(await storeError { _ = try await store.getObject(bucket: "here", key: "nope", range: nil) } == .noSuchKey(bucket: "here", key: "nope"))
        #expect(await storeError { _ = try await store.headObject(bucket: "gone", key: "k") } == .noSuchBucket(bucket: "gone"))
        #expect(await storeError { try await store.put("gone", "k", "x") } == .noSuchBucket(bucket: "gone"))
        #expect(await storeError { try await store.deleteObject(bucket: "gone", key: "k") } == .noSuchBucket(bucket: "gone"))
        #expect(box.tmpFiles.isEmpty && box.objectFiles.isEmpty)
    }

    @Test func deleteIsIdempotentAndRemovesFiles() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("del")
        try await store.put("del", "a", "1")
        try await store.put("del", "b", "2")
        try await store.deleteObject(bucket: "del", key: "a")
        try await store.deleteObject(bucket: "del", key: "a")
        try await store.deleteObject(bucket: "del", key: "never-existed")
        #expect(box.objectFiles.count == 1)
        let results = try await store.deleteObjects(bucket: "del", keys: ["b", "missing", ""])
        #expect(results.map(\.key) == ["b", "missing", ""])
        #expect(results[0].error == nil && results[1].error == nil)
        #expect(results[2].error == .emptyKey)
        #expect(box.objectFiles.isEmpty)
        #expect(await storeError { _ = try await store.headObject(bucket: "del", key: "b") } == .noSuchKey(bucket: "del", key: "b"))
    }

    @Test func keyValidation() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("keys")
        let longest = String(repeating: "é", count: 512)  // 1024 bytes
        try await store.put("keys", longest, "ok")
        #expect(try await store.content("keys", longest) == "ok")
        #expect(await storeError { try await store.put("keys", longest + "x", "no") } == .keyTooLong)
        #expect(await storeError { try await store.put("keys", "", "no") } == .emptyKey)
        #expect(await storeError { try await store.put("keys", "a\u{0}b", "no") } == .keyContainsNUL)
        #expect(box.tmpFiles.isEmpty && box.objectFiles.count == 1)
    }

    /// One open store per directory: a second is refused, naming the holder's pid, until the
    /// first is closed or gone; the objects are untouched by the refused open's would-be recovery.
    @Test func aSecondStoreOnTheSameDirectoryIsRefused() async throws {
        let box = try Sandbox()
        var first: LocalObjectStore? = try box.open()
        try await first!.createBucket("held")
        try await first!.put("held", "k", "bytes")
        let directory = URL(fileURLWithPath: box.data).standardizedFileURL.path
        #expect(throws: StoreOpenError.inUse(directory: directory, pid: Int(getpid()))) { try box.open() }
        #expect("\(StoreOpenError.inUse(directory: directory, pid: 42))".contains("in use by another tollgate process (pid 42)"))
        try first!.close()
        let second = try box.open()
        #expect(try await second.content("held", "k") == "bytes")
        #expect(throws: StoreOpenError.self) { try box.open() }
        try second.close()
        // Released when the store goes away without a close, too.
        first = try box.open()
        first = nil
        let third = try box.open()
        #expect(try await third.content("held", "k") == "bytes")
    }

    @Test func hostileKeysStayInsideTheDataDirectory() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("jail")
        let keys = [
            "../../etc/passwd", "../escaped", "%2e%2e/x", "%2e%2e%2fx", "/abs", "//double", "..", ".", "a/../../b",
            "..\\..\\windows", "dir/", "trailing space ", "\u{202e}rtl", "tab\there", "日本語/キー", "💾/../💾",
            "100% sure", "+plus+", "new\nline", "\(box.root)/outside", "~/home",
        ]
        for (i, key) in keys.enumerated() {
            try await store.put("jail", key, "value-\(i)")
        }
        for (i, key) in keys.enumerated() {
            #expect(try await store.content("jail", key) == "value-\(i)")
        }
        let listed = try await store.listObjects(bucket: "jail", query: ListQuery())
        #expect(Set(listed.objects.map(\.key)) == Set(keys))
        // Nothing but the data directory in the sandbox, nothing but our layout in it.
        #expect(box.rootEntries == ["data"])
        let all = box.files(under: box.data)
        for file in all {
            let ok = file.hasPrefix("objects/") || file.hasPrefix("meta.sqlite") || file == "lock"
            #expect(ok, "unexpected file \(file)")
        }
        #expect(box.objectFiles.count == keys.count)
        for file in box.objectFiles {
            let name = String(file.split(separator: "/").last!)
            #expect(StorageLayout.isValidID(name))
        }
        #expect(!FileManager.default.fileExists(atPath: box.root + "/outside"))
        #expect(!FileManager.default.fileExists(atPath: box.root + "/escaped"))
    }

    @Test func abortedBodyLeavesNothing() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("abort")
        await #expect(throws: ClientAborted.self) {
            _ = try await store.putObject(bucket: "abort", key: "k", body: FailingBody(chunk: Array(repeating: 7, count: 4096), good: 10), metadata: ObjectMetadata(), options: WriteOptions())
        }
        #expect(await storeError { _ = try await store.headObject(bucket: "abort", key: "k") } == .noSuchKey(bucket: "abort", key: "k"))
        #expect(box.tmpFiles.isEmpty)
        #expect(box.objectFiles.isEmpty)
        // An aborted overwrite keeps the old version.
        try await store.put("abort", "k", "old")
        await #expect(throws: ClientAborted.self) {
            _ = try await store.putObject(bucket: "abort", key: "k", body: FailingBody(chunk: [1, 2, 3], good: 2), metadata: ObjectMetadata(), options: WriteOptions())
        }
        #expect(try await store.content("abort", "k") == "old")
        #expect(box.tmpFiles.isEmpty && box.objectFiles.count == 1)
    }

    @Test func ifNoneMatchStarRaceHasExactlyOneWinner() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("race")
        let outcomes = try await withThrowingTaskGroup(of: (Int, StoreError?).self) { group in
            for i in 0..<8 {
                group.addTask {
                    let error = await storeError {
                        try await store.put("race", "once", "writer-\(i)", options: WriteOptions(preconditions: .init(ifNoneMatch: "*")))
                    }
                    return (i, error)
                }
            }
            var all: [(Int, StoreError?)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        let winners = outcomes.filter { $0.1 == nil }
        #expect(winners.count == 1)
        #expect(outcomes.filter { $0.1 == .preconditionFailed }.count == 7)
        let winner = try #require(winners.first).0
        #expect(try await store.content("race", "once") == "writer-\(winner)")
        #expect(box.objectFiles.count == 1)
        #expect(box.tmpFiles.isEmpty)
    }

    @Test func preconditionIsCheckedAtCommitNotAtStart() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("race")
        // A slow upload with If-None-Match: * starts while the key is absent…
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
        continuation.yield(ByteBuffer(string: "slow-"))
        let slow = Task {
            await storeError {
                try await store.putObject(bucket: "race", key: "k", body: stream, metadata: ObjectMetadata(), options: WriteOptions(preconditions: .init(ifNoneMatch: "*")))
            }
        }
        // …a fast writer creates it meanwhile…
        try await store.put("race", "k", "fast")
        continuation.yield(ByteBuffer(string: "writer"))
        continuation.finish()
        // …so the slow one must fail and leave the fast one's bytes.
        #expect(await slow.value == .preconditionFailed)
        #expect(try await store.content("race", "k") == "fast")
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
    }

    @Test func ifMatch() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("cond")
        #expect(await storeError { try await store.put("cond", "k", "x", options: .init(preconditions: .init(ifMatch: "*"))) } == .preconditionFailed)
        let v1 = try await store.put("cond", "k", "v1")
        #expect(await storeError { try await store.put("cond", "k", "x", options: .init(preconditions: .init(ifMatch: "\"0123\""))) } == .preconditionFailed)
        #expect(await storeError { try await store.put("cond", "k", "x", options: .init(preconditions: .init(ifNoneMatch: v1.etag))) } == .preconditionFailed)
        // Quoted or unquoted ETags both match.
        let v2 = try await store.put("cond", "k", "v2", options: .init(preconditions: .init(ifMatch: ETag.normalize(v1.etag))))
        try await store.put("cond", "k", "v3", options: .init(preconditions: .init(ifMatch: v2.etag, ifNoneMatch: v1.etag)))
        #expect(try await store.content("cond", "k") == "v3")
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
    }

    /// A body is written in batches of exactly `writeBatchSize` bytes (body parts split at a
    /// batch's end), one pool job and one write call each, the last with the fsync: a body of
    /// whole batches costs no extra job for an empty last batch, and every size around a batch
    /// boundary is stored intact. (Batches of "at least" the size would take two jobs for
    /// 2.5 MiB in 700,000-byte parts, and one write call per part.)
    @Test(arguments: [
        (0, 1000), (1, 1000), (1_048_576, 262_144), (1_048_576, 1000), (1_048_575, 262_144), (1_048_577, 262_144),
        (2_097_152, 262_144), (2_097_152, 1_048_576), (2_097_153, 1_048_576), (3_145_728, 300_000), (2_621_440, 700_000),
    ] as [(Int, Int)])
    func bodiesAreWrittenInWholeBatches(size: Int, chunkSize: Int) async throws {
        let box = try Sandbox()
        let writes = Atomic<Int>(0)
        let store = try LocalObjectStore(configuration: .init(directory: box.data, writeFault: {
            writes.add(1, ordering: .relaxed)
            return nil
        }))
        try await store.createBucket("batches")
        let expected = try await GeneratedBody(total: size, chunkSize: chunkSize).md5()
        let before = store.io.submitted.load(ordering: .relaxed)
        let info = try await store.putObject(bucket: "batches", key: "k", body: GeneratedBody(total: size, chunkSize: chunkSize), metadata: ObjectMetadata())
        let jobs = store.io.submitted.load(ordering: .relaxed) - before
        let batches = max(1, (size + LocalObjectStore.writeBatchSize - 1) / LocalObjectStore.writeBatchSize)
        #expect(jobs == batches)
        #expect(writes.load(ordering: .relaxed) == (size == 0 ? 0 : batches))
        #expect(info.size == Int64(size))
        #expect(info.etag == "\"" + Hex.encode(expected) + "\"")
        let read = try await collect(store.getObject(bucket: "batches", key: "k", range: nil).body)
        #expect(read.count == size && read.enumerated().allSatisfy { $0.element == GeneratedBody.byte(at: $0.offset) })
    }

    /// A body in tiny parts (a client sending a few bytes per packet) is joined into a few
    /// buffers per batch, not kept part by part; the bytes and their order are the body's.
    @Test(arguments: [(1, 100_000), (7, 1_048_576 + 5), (16_383, 2_000_000), (16_384, 300_000)] as [(Int, Int)])
    func smallPartsAreJoined(partSize: Int, total: Int) async throws {
        let box = try Sandbox()
        let store = try box.open()
        let writer = try FileWriter(path: box.data + "/batches-test", mode: .append(at: 0), fault: nil)
        _ = FileManager.default.createFile(atPath: writer.path, contents: nil)
        let last = try await store.writeBatches(GeneratedBody(total: total, chunkSize: partSize), to: writer)
        let lastBytes = last.reduce(0) { $0 + $1.readableBytes }
        #expect(lastBytes == (total % LocalObjectStore.writeBatchSize == 0 ? LocalObjectStore.writeBatchSize : total % LocalObjectStore.writeBatchSize))
        // Small parts share 64 KiB buffers; parts of 16 KiB and more stay as they came.
        let most = partSize < LocalObjectStore.smallPart ? (lastBytes + LocalObjectStore.joinedSize - 1) / LocalObjectStore.joinedSize * 2
                                                        : (lastBytes + partSize - 1) / partSize + 1
        #expect(last.count <= most, "\(last.count) buffers for \(lastBytes) bytes")
        // Blocking calls, here in the test's task: the store makes them on its pool.
        _ = try BlockingWork.allowing {
            try writer.write(last)
            return try writer.finish()
        }
        let written = try Data(contentsOf: URL(fileURLWithPath: writer.path))
        #expect(written.count == total)
        #expect(written.enumerated().allSatisfy { $0.element == GeneratedBody.byte(at: $0.offset) })
    }

    /// `Posix.pwriteAll` writes any number of buffers (more than one call takes, empty ones
    /// among them) back to back at the offset, leaving what is before it alone.
    @Test func vectorWritesLandInOrder() throws {
        try BlockingWork.allowing { try vectorWrites() }
    }

    private func vectorWrites() throws {
        let box = try Sandbox()
        let path = box.root + "/vectors"
        let fd = try Posix.open(path, O_RDWR | O_CREAT | O_EXCL)
        defer { close(fd) }
        try Posix.pwriteAll(fd, [ByteBuffer(string: "head")], at: 0)
        let count = Posix.maxVectors * 2 + 5
        let buffers = (0..<count).map { (index: Int) -> ByteBuffer in
            let bytes: [UInt8] = index % 7 == 0 ? [] : [UInt8(index % 251), UInt8(index % 13)]
            return ByteBuffer(bytes: bytes)
        }
        try Posix.pwriteAll(fd, buffers, at: 4)
        let expected: [UInt8] = Array("head".utf8) + buffers.flatMap { Array($0.readableBytesView) }
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(Array(written) == expected)
    }

    /// The files of replaced or deleted versions are removed even by a request whose task was
    /// cancelled (a client that hung up): otherwise they would stay until a restart.
    @Test func filesAreRemovedByACancelledTask() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("gone")
        try await store.put("gone", "k", "v")
        let ids = box.objectFiles.map { ($0 as NSString).lastPathComponent }
        #expect(ids.count == 1)
        await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            #expect(Task.isCancelled)
            await store.removeFiles(ids)
        }.value
        #expect(box.objectFiles.isEmpty)
    }

    @Test func largeObjectStreamsInBoundedChunks() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("big")
        let total = 64 * 1024 * 1024
        let expectedETag = "\"" + Hex.encode(try await GeneratedBody(total: total, chunkSize: 1 << 20).md5()) + "\""
        let info = try await store.putObject(bucket: "big", key: "blob", body: GeneratedBody(total: total, chunkSize: 1 << 20), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(info.size == Int64(total))
        #expect(info.etag == expectedETag)

        let read = try await store.getObject(bucket: "big", key: "blob", range: nil)
        let digest = try StreamingDigest(.md5)
        var chunks = 0
        var largest = 0
        var offset = 0
        var mismatch = false
        for try await buffer in read.body {
            chunks += 1
            largest = max(largest, buffer.readableBytes)
            if buffer.readableBytesView.first != GeneratedBody.byte(at: offset) { mismatch = true }
            offset += buffer.readableBytes
            try buffer.withUnsafeReadableBytes { try digest.update($0) }
        }
        #expect(offset == total)
        #expect(!mismatch)
        #expect(largest == 256 * 1024)
        #expect(chunks == total / (256 * 1024))
        #expect("\"" + Hex.encode(try digest.finalize()) + "\"" == expectedETag)
    }
}

@Suite struct ProtocolTests {
    /// The HTTP layer holds `any ObjectStore`; the generic streaming calls work through it.
    @Test func worksThroughTheExistential() async throws {
        let box = try Sandbox()
        let store: any ObjectStore = try box.open()
        try await store.createBucket("proto")
        let info = try await store.putObject(bucket: "proto", key: "k", body: Chunks(["ab", "cd"].map { Array($0.utf8) }))
        #expect(info.size == 4)
        #expect(try await string(store.getObject(bucket: "proto", key: "k").body) == "abcd")
    }

    @Test func bodiesInMemoryOrFromAnySequence() async throws {
        let memory = ObjectBody(ByteBuffer(string: "hello"))
        #expect(memory.singleBuffer == ByteBuffer(string: "hello"))
        #expect(try await string(memory) == "hello")
        #expect(try await string(memory) == "hello", "iterable more than once")
        #expect(ObjectBody(ByteBuffer()).singleBuffer == nil)
        #expect(try await collect(ObjectBody(ByteBuffer())).isEmpty)
        let stream = ObjectBody(Chunks(["he", "llo"].map { Array($0.utf8) }))
        #expect(stream.singleBuffer == nil)
        #expect(try await string(stream) == "hello")
        #expect(try await string(stream) == "hello", "iterable more than once")
    }

    /// A body made of batches iterates as their parts, in order, and hands the batches over as
    /// they came; any other body's `batches` are its parts one by one.
    @Test func batchedBodiesIterateAsPartsAndHandOverTheirBatches() async throws {
        let parts = ["ab", "", "cde", "f", "gh"].map { ByteBuffer(string: $0) }
        let batched = ObjectBody(batches: BatchList(batches: [[parts[0], parts[1]], [parts[2]], [], [parts[3], parts[4]]]))
        #expect(try await string(batched) == "abcdefgh")
        #expect(try await string(batched) == "abcdefgh", "iterable more than once")
        var handed: [[String]] = []
        for try await batch in batched.batches { handed.append(batch.map { String(buffer: $0) }) }
        #expect(handed == [["ab", ""], ["cde"], [], ["f", "gh"]])
        var single: [[String]] = []
        for try await batch in ObjectBody(Chunks(["he", "llo"].map { Array($0.utf8) })).batches {
            single.append(batch.map { String(buffer: $0) })
        }
        #expect(single == [["he"], ["llo"]])
        var memory: [[String]] = []
        for try await batch in ObjectBody(ByteBuffer(string: "hello")).batches { memory.append(batch.map { String(buffer: $0) }) }
        #expect(memory == [["hello"]])
    }

    /// Checksums are rows in SQLite: they survive a restart, for objects, uploads and parts; a
    /// row written before checksums existed (schema v3) reads as having none.
    @Test func checksumsSurviveARestartAndOlderRowsHaveNone() async throws {
        let box = try Sandbox()
        try FileManager.default.createDirectory(atPath: box.data, withIntermediateDirectories: true)
        do {
            // A database as version 3 of the schema left it, with one object row.
            let old = try DatabaseQueue(path: box.data + "/meta.sqlite")
            try Schema.migrator().migrate(old, upTo: "v3-object-tags")
            try await old.write { db in
                try db.execute(sql: "INSERT INTO bucket (name, created_ms) VALUES ('sums', 0)")
                try db.execute(sql: """
                    INSERT INTO object (bucket, key, size, etag, last_modified_ms, user_metadata, file_id)
                    VALUES ('sums', ?, 0, '"d41d8cd98f00b204e9800998ecf8427e"', 0, '{}', 'gone')
                    """, arguments: ["old".keyBlob])
            }
        }
        let sums = ObjectChecksums(additional: AdditionalChecksum(algorithm: .crc64nvme, digest: [1, 2, 3, 4, 5, 6, 7, 8]), crc64ecma: UInt64.max - 1)
        let upload: MultipartUpload
        do {
            let store = try box.open()
            #expect(try await store.headObject(bucket: "sums", key: "old").checksums == .none)
            try await store.put("sums", "k", "bytes", options: WriteOptions(bodyChecksums: { sums }))
            upload = try await store.createMultipartUpload(bucket: "sums", key: "m", metadata: ObjectMetadata(), checksum: UploadChecksum(algorithm: .crc64nvme, fullObject: true))
            _ = try await store.uploadPart(bucket: "sums", key: "m", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part"), options: WriteOptions(bodyChecksums: { sums }))
            try store.close()
        }
        let store = try box.open()
        #expect(try await store.headObject(bucket: "sums", key: "k").checksums == sums)
        let parts = try await store.listParts(bucket: "sums", key: "m", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10)
        #expect(parts.upload.checksum == UploadChecksum(algorithm: .crc64nvme, fullObject: true))
        #expect(parts.parts.map(\.checksums) == [sums])
    }
}

/// Batches of buffers, handed over as given.
struct BatchList: AsyncSequence, Sendable {
    typealias Element = [ByteBuffer]
    let batches: [[ByteBuffer]]

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rest: batches[...]) }

    struct AsyncIterator: AsyncIteratorProtocol {
        var rest: ArraySlice<[ByteBuffer]>
        mutating func next() async throws -> [ByteBuffer]? { rest.popFirst() }
    }
}
