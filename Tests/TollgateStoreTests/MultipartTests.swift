import Foundation
import GRDB
import NIOCore
import Testing
import TollgateCrypto
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

@Suite struct MultipartTests {
    static let mib = 1024 * 1024

    static func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    /// The S3 multipart ETag, computed independently from the part bytes.
    static func multipartETag(_ parts: [[UInt8]]) throws -> String {
        var md5s: [UInt8] = []
        for part in parts { md5s += try Crypto.md5(part) }
        return "\"" + Hex.encode(try Crypto.md5(md5s)) + "-\(parts.count)\""
    }

    @Test func completeConcatenatesPartsWithMD5OfMD5sETag() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let metadata = ObjectMetadata(contentType: "video/mp4", userMetadata: ["origin": "camera 1"])
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "movies/clip.mp4", metadata: metadata)
        #expect(StorageLayout.isValidID(upload.uploadID))
        let p1 = Self.bytes(5 * Self.mib, seed: 1)
        let p2 = Self.bytes(5 * Self.mib + 3, seed: 2)
        let p3 = Self.bytes(1234, seed: 3)
        // Out of order upload, with part 2 first uploaded wrong and then replaced.
        let i3 = try await store.uploadPart(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumber: 3, body: Chunks(p3), options: WriteOptions())
        _ = try await store.uploadPart(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumber: 2, body: Chunks("wrong"), options: WriteOptions())
        let i2 = try await store.uploadPart(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumber: 2, body: Chunks([Array(p2[..<100]), Array(p2[100...])]), options: WriteOptions())
        let i1 = try await store.uploadPart(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumber: 1, body: Chunks(p1), options: WriteOptions())
        #expect(i1.etag == (try quotedMD5(p1)))
        #expect(i2.size == Int64(p2.count))
        #expect(box.objectFiles.count == 3)

        let listed = try await store.listParts(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 1000)
        #expect(listed.parts.map(\.partNumber) == [1, 2, 3])
        #expect(listed.parts.map(\.etag) == [i1.etag, i2.etag, i3.etag])
        #expect(listed.upload.metadata == metadata)

        let info = try await store.completeMultipartUpload(
            bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID,
            parts: [CompletedPart(partNumber: 1, etag: i1.etag), CompletedPart(partNumber: 2, etag: ETag.normalize(i2.etag)), CompletedPart(partNumber: 3, etag: i3.etag)],
            preconditions: .none
        )
        #expect(info.etag == (try Self.multipartETag([p1, p2, p3])))
        #expect(info.size == Int64(p1.count + p2.count + p3.count))
        #expect(info.metadata == metadata)
        let read = try await store.getObject(bucket: "mpu", key: "movies/clip.mp4", range: nil)
        #expect(try await collect(read.body) == p1 + p2 + p3)
        #expect(try await store.headObject(bucket: "mpu", key: "movies/clip.mp4").etag == info.etag)
        // The upload is gone; the object is its three part files (the replaced part 2's is gone).
        #expect(box.objectFiles.count == 3 && box.tmpFiles.isEmpty)
        #expect(await storeError { _ = try await store.listParts(bucket: "mpu", key: "movies/clip.mp4", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10) } == .noSuchUpload(uploadID: upload.uploadID))
        try await store.deleteObject(bucket: "mpu", key: "movies/clip.mp4")
        try await store.deleteBucket("mpu")
    }

    @Test func completeUsesOnlyListedPartsAndMayOmitSome() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 4)
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        var etags: [Int: String] = [:]
        for n in [1, 2, 5] {
            etags[n] = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: n, body: Chunks("part\(n)"), options: WriteOptions()).etag
        }
        let info = try await store.completeMultipartUpload(
            bucket: "mpu", key: "k", uploadID: upload.uploadID,
            parts: [CompletedPart(partNumber: 1, etag: etags[1]!), CompletedPart(partNumber: 5, etag: etags[5]!)], preconditions: .none
        )
        #expect(try await store.content("mpu", "k") == "part1part5")
        #expect(info.etag == (try Self.multipartETag([Array("part1".utf8), Array("part5".utf8)])))
        #expect(box.objectFiles.count == 2, "parts 1 and 5; part 2's file is deleted")
    }

    /// OSS clients send back the upper-case ETags OSS writes: the part list and the conditions
    /// on the object it replaces compare them without regard to case.
    @Test func upperCaseETagsMatch() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 4)
        try await store.createBucket("mpu")
        let old = try await store.put("mpu", "k", "old")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let i1 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part1"), options: WriteOptions())
        let i2 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 2, body: Chunks("part2"), options: WriteOptions())
        let info = try await store.completeMultipartUpload(
            bucket: "mpu", key: "k", uploadID: upload.uploadID,
            parts: [CompletedPart(partNumber: 1, etag: i1.etag.uppercased()), CompletedPart(partNumber: 2, etag: ETag.normalize(i2.etag).uppercased())],
            preconditions: WritePreconditions(ifMatch: old.etag.uppercased())
        )
        #expect(info.etag == (try Self.multipartETag([Array("part1".utf8), Array("part2".utf8)])))
        #expect(ETag.matches("\"0000\", " + info.etag.uppercased(), info.etag))
        #expect(ETag.normalize("W/\"ABCDEF-2\"") == "abcdef-2")
    }

    @Test func minimumPartSizeCanBeLoweredPerCompletion() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let p1 = Self.bytes(100 * 1024, seed: 4)
        let p2 = Self.bytes(10, seed: 5)
        let i1 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 1, body: Chunks(p1), options: WriteOptions())
        let i2 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 2, body: Chunks(p2), options: WriteOptions())
        let parts = [CompletedPart(partNumber: 1, etag: i1.etag), CompletedPart(partNumber: 2, etag: i2.etag)]
        let tooSmall = await storeError {
            _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: parts, preconditions: .none, minimumPartSize: 100 * 1024 + 1)
        }
        #expect(tooSmall == .entityTooSmall(partNumber: 1))
        let info = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: parts, preconditions: .none, minimumPartSize: 100 * 1024)
        #expect(info.size == Int64(p1.count + p2.count))
        #expect(info.etag == (try Self.multipartETag([p1, p2])))
    }

    @Test func completeErrors() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let id = upload.uploadID
        let small1 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: 1, body: Chunks("tiny"), options: WriteOptions())
        let small2 = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: 2, body: Chunks("tail"), options: WriteOptions())
        func complete(_ parts: [CompletedPart]) async -> StoreError? {
            await storeError { _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: id, parts: parts, preconditions: .none) }
        }
        #expect(await complete([.init(partNumber: 2, etag: small2.etag), .init(partNumber: 1, etag: small1.etag)]) == .invalidPartOrder)
        #expect(await complete([.init(partNumber: 1, etag: small1.etag), .init(partNumber: 1, etag: small1.etag)]) == .invalidPartOrder)
        #expect(await complete([.init(partNumber: 1, etag: small2.etag)]) == .invalidPart(partNumber: 1))
        #expect(await complete([.init(partNumber: 1, etag: small1.etag), .init(partNumber: 3, etag: small2.etag)]) == .invalidPart(partNumber: 3))
        #expect(await complete([.init(partNumber: 1, etag: small1.etag), .init(partNumber: 2, etag: small2.etag)]) == .entityTooSmall(partNumber: 1))
        #expect(await complete([]) == .noPartsGiven)
        #expect(await complete([.init(partNumber: 0, etag: small1.etag)]) == .invalidPartNumber(0))
        // A single small part is fine (the last part has no minimum).
        #expect(await complete([.init(partNumber: 2, etag: small2.etag)]) == nil)
        #expect(try await store.content("mpu", "k") == "tail")
        // The same completion again is answered as the first (S3's idempotent retry), another is not.
        #expect(await complete([.init(partNumber: 2, etag: small2.etag)]) == nil)
        #expect(await complete([.init(partNumber: 1, etag: small1.etag)]) == .noSuchUpload(uploadID: id))
        #expect(try await store.content("mpu", "k") == "tail")
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
    }

    @Test func partNumbersAndUnknownUploads() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        for n in [0, -1, 10_001] {
            #expect(await storeError { _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: n, body: Chunks("x"), options: WriteOptions()) } == .invalidPartNumber(n))
        }
        _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 10_000, body: Chunks("x"), options: WriteOptions())
        // The upload id is bound to its key and bucket.
        #expect(await storeError { _ = try await store.uploadPart(bucket: "mpu", key: "other", uploadID: upload.uploadID, partNumber: 1, body: Chunks("x"), options: WriteOptions()) } == .noSuchUpload(uploadID: upload.uploadID))
        #expect(await storeError { _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: "deadbeef", partNumber: 1, body: Chunks("x"), options: WriteOptions()) } == .noSuchUpload(uploadID: "deadbeef"))
        #expect(await storeError { _ = try await store.createMultipartUpload(bucket: "nope", key: "k", metadata: ObjectMetadata()) } == .noSuchBucket(bucket: "nope"))
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
    }

    @Test func abortRemovesPartsAndLaterCallsSeeNoSuchUpload() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let id = upload.uploadID
        let part = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: 1, body: Chunks("data"), options: WriteOptions())
        // A failed part upload leaves nothing.
        await #expect(throws: ClientAborted.self) {
            _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: 2, body: FailingBody(chunk: [1], good: 3), options: WriteOptions())
        }
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
        try await store.abortMultipartUpload(bucket: "mpu", key: "k", uploadID: id)
        #expect(box.objectFiles.isEmpty)
        #expect(await storeError { try await store.abortMultipartUpload(bucket: "mpu", key: "k", uploadID: id) } == .noSuchUpload(uploadID: id))
        #expect(await storeError { _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: 1, body: Chunks("x"), options: WriteOptions()) } == .noSuchUpload(uploadID: id))
        #expect(await storeError { _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: id, parts: [.init(partNumber: 1, etag: part.etag)], preconditions: .none) } == .noSuchUpload(uploadID: id))
        #expect(await storeError { _ = try await store.headObject(bucket: "mpu", key: "k") } == .noSuchKey(bucket: "mpu", key: "k"))
        #expect(box.objectFiles.isEmpty && box.tmpFiles.isEmpty)
        try await store.deleteBucket("mpu")
    }

    @Test func listPartsPaging() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        for n in [1, 2, 3, 7, 9] {
            _ = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: n, body: Chunks("p\(n)"), options: WriteOptions())
        }
        let first = try await store.listParts(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 2)
        #expect(first.parts.map(\.partNumber) == [1, 2] && first.isTruncated && first.nextPartNumberMarker == 2)
        let second = try await store.listParts(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumberMarker: 2, maxParts: 2)
        #expect(second.parts.map(\.partNumber) == [3, 7] && second.nextPartNumberMarker == 7)
        let last = try await store.listParts(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumberMarker: 7, maxParts: 2)
        #expect(last.parts.map(\.partNumber) == [9] && !last.isTruncated && last.nextPartNumberMarker == nil)
        #expect(last.parts.first?.size == 2)
    }

    @Test func listMultipartUploads() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        var ids: [String: [String]] = [:]
        for key in ["a/1", "a/2", "b", "b", "c/x/y"] {
            ids[key, default: []].append(try await store.createMultipartUpload(bucket: "mpu", key: key, metadata: ObjectMetadata()).uploadID)
        }
        let bIDs = ids["b"]!.sorted()
        let all = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery())
        #expect(all.uploads.map(\.key) == ["a/1", "a/2", "b", "b", "c/x/y"])
        #expect(all.uploads.filter { $0.key == "b" }.map(\.uploadID) == bIDs)
        #expect(!all.isTruncated)

        let prefixed = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery(prefix: "a/"))
        #expect(prefixed.uploads.map(\.key) == ["a/1", "a/2"])
        let grouped = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery(delimiter: "/"))
        #expect(grouped.commonPrefixes == ["a/", "c/"])
        #expect(grouped.uploads.map(\.key) == ["b", "b"])

        let page1 = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery(maxUploads: 3))
        #expect(page1.uploads.map(\.key) == ["a/1", "a/2", "b"])
        #expect(page1.isTruncated && page1.nextKeyMarker == "b" && page1.nextUploadIDMarker == bIDs[0])
        let page2 = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery(keyMarker: page1.nextKeyMarker, uploadIDMarker: page1.nextUploadIDMarker, maxUploads: 3))
        #expect(page2.uploads.map(\.key) == ["b", "c/x/y"])
        #expect(page2.uploads.first?.uploadID == bIDs[1])
        #expect(!page2.isTruncated)
        // key-marker alone skips every upload of that key.
        let afterB = try await store.listMultipartUploads(bucket: "mpu", query: ListUploadsQuery(keyMarker: "b"))
        #expect(afterB.uploads.map(\.key) == ["c/x/y"])
    }

    @Test func uploadPartCopyTakesARange() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 1)
        try await store.createBucket("mpu")
        try await store.put("mpu", "source", "0123456789")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "dest", metadata: ObjectMetadata())
        let p1 = try await store.uploadPartCopy(bucket: "mpu", key: "dest", uploadID: upload.uploadID, partNumber: 1, source: .init(bucket: "mpu", key: "source"), range: .closed(5, 9), options: CopyOptions())
        let p2 = try await store.uploadPartCopy(bucket: "mpu", key: "dest", uploadID: upload.uploadID, partNumber: 2, source: .init(bucket: "mpu", key: "source"), range: nil, options: CopyOptions())
        #expect(p1.etag == (try quotedMD5(Array("56789".utf8))))
        _ = try await store.completeMultipartUpload(bucket: "mpu", key: "dest", uploadID: upload.uploadID, parts: [.init(partNumber: 1, etag: p1.etag), .init(partNumber: 2, etag: p2.etag)], preconditions: .none)
        #expect(try await store.content("mpu", "dest") == "567890123456789")
    }

    @Test func completeHonoursIfNoneMatch() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("mpu")
        try await store.put("mpu", "k", "existing")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let p = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: 1, body: Chunks("new"), options: WriteOptions())
        #expect(await storeError {
            _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: [.init(partNumber: 1, etag: p.etag)], preconditions: .init(ifNoneMatch: "*"))
        } == .preconditionFailed)
        #expect(try await store.content("mpu", "k") == "existing")
        // The upload survives a failed precondition, with its part's file.
        #expect(try await store.listParts(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10).parts.count == 1)
        #expect(box.objectFiles.count == 2 && box.tmpFiles.isEmpty)
    }

    /// Files under `objects/`, by name alone.
    static func fileNames(_ box: Sandbox) -> Set<String> { Set(box.objectFiles.map { ($0 as NSString).lastPathComponent }) }

    @Test func completionCopiesNothingAndTheObjectReadsAsItsParts() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 3, readChunkSize: 4, sendSegmentSize: 4)
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        let contents = ["abcdefg", "hij", "left out", "klmnopqrstu", "v"]
        var etags: [String] = []
        for (index, content) in contents.enumerated() {
            etags.append(try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: index + 1, body: Chunks(content)).etag)
        }
        let partFiles = Self.fileNames(box)
        #expect(partFiles.count == 5)
        let submitted = store.io.submitted.load(ordering: .relaxed)
        let used = [1, 2, 4, 5]
        let info = try await store.completeMultipartUpload(
            bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: used.map { CompletedPart(partNumber: $0, etag: etags[$0 - 1]) }
        )
        // No file was written: the object is the four parts' files, and part 3's is deleted.
        #expect(store.io.submitted.load(ordering: .relaxed) - submitted == 1, "one job: deleting part 3's file")
        let whole = "abcdefghijklmnopqrstuv"
        #expect(info.size == Int64(whole.utf8.count))
        let objectFiles = Self.fileNames(box)
        #expect(objectFiles.count == 4 && objectFiles.isSubset(of: partFiles))
        let stored = try await store.index.object(bucket: "mpu", key: "k")
        #expect(stored.extents.map(\.size) == [7, 3, 11, 1] && Set(stored.fileIDs) == objectFiles)
        #expect(try await store.content("mpu", "k") == whole)
        // Every range, across and inside part boundaries, as bytes and as pieces to send.
        let bytes = Array(whole.utf8)
        for lower in 0..<bytes.count {
            for upper in lower..<bytes.count {
                let read = try await store.getObject(bucket: "mpu", key: "k", range: .closed(Int64(lower), Int64(upper)))
                #expect(try await collect(read.body) == Array(bytes[lower...upper]), "bytes \(lower)-\(upper)")
                var sent: [UInt8] = []
                for try await piece in try #require(read.body.zeroCopy) {
                    switch piece {
                    case .bytes(let buffer): sent += Array(buffer.readableBytesView)
                    case .region(let region):
                        var buffer = [UInt8](repeating: 0, count: region.range.count)
                        #expect(pread(region.descriptor, &buffer, buffer.count, off_t(region.range.lowerBound)) == buffer.count)
                        sent += buffer
                    }
                }
                #expect(sent == Array(bytes[lower...upper]), "pieces \(lower)-\(upper)")
            }
        }
        // Still there after a restart: start-up recovery counts the object's files as referenced.
        try store.close()
        let reopened = try box.open(minimumPartSize: 3, readChunkSize: 4, sendSegmentSize: 4)
        #expect(reopened.recovery.removedOrphanFiles == 0 && reopened.recovery.missingFiles == 0)
        #expect(try await reopened.content("mpu", "k") == whole)
        // A copy is a file of its own; replacing and deleting the object deletes its files.
        _ = try await reopened.copyObject(from: .init(bucket: "mpu", key: "k"), to: .init(bucket: "mpu", key: "copy"), metadata: .source)
        #expect(try await reopened.content("mpu", "copy") == whole)
        try await reopened.put("mpu", "k", "replaced")
        #expect(Self.fileNames(box).isDisjoint(with: objectFiles) && box.objectFiles.count == 2)
        try await reopened.deleteObject(bucket: "mpu", key: "copy")
        try await reopened.deleteObject(bucket: "mpu", key: "k")
        #expect(box.objectFiles.isEmpty)
        #expect(try await reopened.index.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM extent") } == 0)
    }

    @Test func aMultipartObjectBeingReadOutlivesItsReplacement() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 3, readChunkSize: 4, sendSegmentSize: 4)
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        var parts: [CompletedPart] = []
        for (index, content) in ["first part", "second part", "third"].enumerated() {
            let info = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: index + 1, body: Chunks(content))
            parts.append(CompletedPart(partNumber: index + 1, etag: info.etag))
        }
        _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: parts)
        let files = Self.fileNames(box)
        var read: ObjectRead? = try await store.getObject(bucket: "mpu", key: "k", range: nil)
        var iterator: ObjectBody.AsyncIterator? = read!.body.makeAsyncIterator()
        var received = Array(try #require(try await iterator!.next()).readableBytesView)
        // Replaced, then deleted, while the read holds the first file open and the rest closed.
        try await store.put("mpu", "k", "new")
        try await store.deleteObject(bucket: "mpu", key: "k")
        #expect(Self.fileNames(box) == files, "leased files are kept")
        while let buffer = try await iterator!.next() { received += Array(buffer.readableBytesView) }
        #expect(String(decoding: received, as: UTF8.self) == "first partsecond partthird")
        // The read ends: its files go (deleted on the store's pool, soon after).
        read = nil
        iterator = nil
        for _ in 0..<500 where !box.objectFiles.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(box.objectFiles.isEmpty && store.leases.leased == 0)
    }

    /// A GET of an object made of parts reads the index once when its row is not cached, and
    /// not at all when it is: the check that its files are still the row's is the cache's
    /// while no write to the key ended since the row was read. After a write, the new row.
    @Test func aMultipartGETReadsTheIndexOnlyForARowNotCached() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 3)
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata())
        var parts: [CompletedPart] = []
        for (index, content) in ["first part", "second"].enumerated() {
            let info = try await store.uploadPart(bucket: "mpu", key: "k", uploadID: upload.uploadID, partNumber: index + 1, body: Chunks(content))
            parts.append(CompletedPart(partNumber: index + 1, etag: info.etag))
        }
        _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: upload.uploadID, parts: parts)
        /// The content, and the index reads its GET made.
        func read() async throws -> (content: String, lookups: Int) {
            let before = store.index.lookups.load(ordering: .relaxed)
            let content = try await store.content("mpu", "k")
            return (content, store.index.lookups.load(ordering: .relaxed) - before)
        }
        #expect(try await read() == ("first partsecond", 1), "the row")
        #expect(try await read() == ("first partsecond", 0), "cached, and no write since")
        try await store.put("mpu", "other", "x")
        #expect(try await read() == ("first partsecond", 0), "a write to another key")
        try await store.put("mpu", "k", "replaced")
        #expect(try await store.content("mpu", "k") == "replaced")
    }
}
