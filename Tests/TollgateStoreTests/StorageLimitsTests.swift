import Foundation
import GRDB
import NIOCore
import Synchronization
import Testing
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

/// A switchable write failure for the store's fault-injection seam, and a record of the
/// storage-full changes the store reported.
final class DiskFault: Sendable {
    private let errno = Mutex<Int32?>(nil)
    private let reported = Mutex<[Bool]>([])

    func fail(with code: Int32?) { errno.withLock { $0 = code } }
    var changes: [Bool] { reported.withLock { $0 } }

    func open(_ box: Sandbox, maxUploadsPerBucket: Int = 1000, now: @escaping @Sendable () -> Date = { Date() }) throws -> LocalObjectStore {
        try LocalObjectStore(configuration: .init(
            directory: box.data, minimumPartSize: 1, maxUploadsPerBucket: maxUploadsPerBucket, now: now,
            storageFullChanged: { full, _ in self.reported.withLock { $0.append(full) } },
            writeFault: { self.errno.withLock { $0 } }
        ))
    }
}

/// A clock the test moves.
final class TestClock: Sendable {
    private let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { time.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

@Suite struct StorageFullTests {
    @Test("ENOSPC and EDQUOT are storageFull (the gateway answers 507), not an I/O error", arguments: [ENOSPC, EDQUOT])
    func fullDiskRefusesWritesAndKeepsEveryObject(code: Int32) async throws {
        let box = try Sandbox()
        let fault = DiskFault()
        let store = try fault.open(box)
        try await store.createBucket("bkt")
        let kept = try await store.put("bkt", "kept", "the original bytes")
        let appendable = try await store.appendObject(bucket: "bkt", key: "log", position: 0, body: Chunks("line 1\n"), metadata: ObjectMetadata())
        let upload = try await store.createMultipartUpload(bucket: "bkt", key: "big", metadata: ObjectMetadata())
        let part = try await store.uploadPart(bucket: "bkt", key: "big", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part one"))
        let filesBefore = box.objectFiles

        fault.fail(with: code)
        for attempt in [
            { _ = try await store.put("bkt", "kept", "an overwrite") },
            { _ = try await store.put("bkt", "new", "a new object") },
            { _ = try await store.appendObject(bucket: "bkt", key: "log", position: appendable.size, body: Chunks("line 2\n"), metadata: ObjectMetadata()) },
            { _ = try await store.uploadPart(bucket: "bkt", key: "big", uploadID: upload.uploadID, partNumber: 2, body: Chunks("part two")) },
            { _ = try await store.copyObject(from: ObjectLocation(bucket: "bkt", key: "kept"), to: ObjectLocation(bucket: "bkt", key: "copy"), metadata: .source) },
        ] as [() async throws -> Void] {
            let error = await storeError(attempt)
            guard case .storageFull = error else {
                Issue.record("expected storageFull, got \(String(describing: error))")
                continue
            }
        }

        // Every object stored before is intact, the upload and its part too, nothing half-written.
        #expect(try await store.content("bkt", "kept") == "the original bytes")
        #expect(try await store.headObject(bucket: "bkt", key: "kept") == kept)
        #expect(try await store.content("bkt", "log") == "line 1\n")
        #expect(await storeError { _ = try await store.headObject(bucket: "bkt", key: "new") } == .noSuchKey(bucket: "bkt", key: "new"))
        #expect(await storeError { _ = try await store.headObject(bucket: "bkt", key: "big") } == .noSuchKey(bucket: "bkt", key: "big"))
        let parts = try await store.listParts(bucket: "bkt", key: "big", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10)
        #expect(parts.parts.map(\.partNumber) == [1])
        #expect(box.objectFiles == filesBefore)
        #expect(box.tmpFiles.isEmpty)
        #expect(fault.changes == [true], "five refused writes, one report")

        // Completing an upload writes no object bytes: it succeeds on the full disk.
        _ = try await store.completeMultipartUpload(
            bucket: "bkt", key: "big", uploadID: upload.uploadID, parts: [CompletedPart(partNumber: 1, etag: part.etag)]
        )
        #expect(try await store.content("bkt", "big") == "part one")
        #expect(box.objectFiles == filesBefore)

        // Space again: writes succeed, and that is reported once.
        fault.fail(with: nil)
        try await store.put("bkt", "new", "a new object")
        try await store.put("bkt", "newer", "another")
        #expect(fault.changes == [true, false])
    }

    @Test func otherWriteErrorsAreIOErrors() async throws {
        let box = try Sandbox()
        let fault = DiskFault()
        let store = try fault.open(box)
        try await store.createBucket("bkt")
        fault.fail(with: EIO)
        guard case .io = await storeError({ try await store.put("bkt", "k", "x") }) else {
            Issue.record("EIO must be an I/O error")
            return
        }
        #expect(fault.changes.isEmpty)
    }

    @Test func fullDatabaseIsStorageFullToo() async throws {
        let box = try Sandbox()
        let fault = DiskFault()
        let store = try fault.open(box)
        try await store.createBucket("bkt")
        try await store.put("bkt", "kept", "original")
        // Cap the database at its current size: the next row that needs a page fails SQLITE_FULL.
        try await store.index.pool.write { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(pages)")
        }
        let big = ObjectMetadata(userMetadata: ["filler": String(repeating: "x", count: 256 * 1024)])
        let error = await storeError { try await store.put("bkt", "kept", "replacement", metadata: big) }
        guard case .storageFull = error else {
            Issue.record("expected storageFull, got \(String(describing: error))")
            return
        }
        #expect(try await store.content("bkt", "kept") == "original")
        #expect(box.objectFiles.count == 1, "the staged file of the refused write is removed")
        #expect(fault.changes == [true])
    }
}

@Suite struct UploadLimitTests {
    @Test func createMultipartUploadIsRefusedBeyondTheBucketsLimit() async throws {
        let box = try Sandbox()
        let store = try DiskFault().open(box, maxUploadsPerBucket: 3)
        try await store.createBucket("full")
        try await store.createBucket("other")
        var uploads: [MultipartUpload] = []
        for n in 0..<3 {
            uploads.append(try await store.createMultipartUpload(bucket: "full", key: "k\(n)", metadata: ObjectMetadata()))
        }
        let refused = await storeError { _ = try await store.createMultipartUpload(bucket: "full", key: "k3", metadata: ObjectMetadata()) }
        #expect(refused == .tooManyUploads(bucket: "full", limit: 3))
        // The limit is per bucket, and finishing an upload makes room.
        _ = try await store.createMultipartUpload(bucket: "other", key: "k", metadata: ObjectMetadata())
        try await store.abortMultipartUpload(bucket: "full", key: "k0", uploadID: uploads[0].uploadID)
        _ = try await store.createMultipartUpload(bucket: "full", key: "k3", metadata: ObjectMetadata())
        let listed = try await store.listMultipartUploads(bucket: "full", query: ListUploadsQuery())
        #expect(listed.uploads.map(\.key) == ["k1", "k2", "k3"])
    }

    @Test func theLimitChangesWhileTheStoreIsOpen() async throws {
        let box = try Sandbox()
        let store = try DiskFault().open(box, maxUploadsPerBucket: 1)
        try await store.createBucket("bkt")
        _ = try await store.createMultipartUpload(bucket: "bkt", key: "k0", metadata: ObjectMetadata())
        #expect(await storeError { _ = try await store.createMultipartUpload(bucket: "bkt", key: "k1", metadata: ObjectMetadata()) }
            == .tooManyUploads(bucket: "bkt", limit: 1))
        store.setMaxUploadsPerBucket(2)
        _ = try await store.createMultipartUpload(bucket: "bkt", key: "k1", metadata: ObjectMetadata())
        store.setMaxUploadsPerBucket(1)
        #expect(await storeError { _ = try await store.createMultipartUpload(bucket: "bkt", key: "k2", metadata: ObjectMetadata()) }
            == .tooManyUploads(bucket: "bkt", limit: 1))
        #expect(try await store.listMultipartUploads(bucket: "bkt", query: ListUploadsQuery()).uploads.count == 2, "uploads in progress are kept")
    }
}

@Suite struct UploadExpiryTests {
    @Test func uploadsInitiatedBeforeTheCutoffAreAbortedWithTheirParts() async throws {
        let box = try Sandbox()
        let clock = TestClock()
        let store = try DiskFault().open(box) { clock.now }
        try await store.createBucket("bkt")
        try await store.put("bkt", "object", "stays")
        let old = try await store.createMultipartUpload(bucket: "bkt", key: "old", metadata: ObjectMetadata())
        for n in 1...3 {
            _ = try await store.uploadPart(bucket: "bkt", key: "old", uploadID: old.uploadID, partNumber: n, body: Chunks("old \(n)"))
        }
        clock.advance(3600)
        let recent = try await store.createMultipartUpload(bucket: "bkt", key: "recent", metadata: ObjectMetadata())
        let kept = try await store.uploadPart(bucket: "bkt", key: "recent", uploadID: recent.uploadID, partNumber: 1, body: Chunks("recent"))
        #expect(box.objectFiles.count == 5)

        let aborted = try await store.abortUploads(initiatedBefore: old.initiated.addingTimeInterval(1), batchSize: 2)
        #expect(aborted == 1)
        let listed = try await store.listMultipartUploads(bucket: "bkt", query: ListUploadsQuery())
        #expect(listed.uploads.map(\.uploadID) == [recent.uploadID])
        #expect(box.objectFiles.count == 2, "the object and the recent upload's part; the old parts' files are deleted")
        // A client still uploading to the expired upload is told it is gone.
        #expect(await storeError {
            _ = try await store.uploadPart(bucket: "bkt", key: "old", uploadID: old.uploadID, partNumber: 4, body: Chunks("late"))
        } == .noSuchUpload(uploadID: old.uploadID))
        #expect(box.objectFiles.count == 2)
        let info = try await store.completeMultipartUpload(
            bucket: "bkt", key: "recent", uploadID: recent.uploadID, parts: [CompletedPart(partNumber: 1, etag: kept.etag)]
        )
        #expect(info.size == 6)
        #expect(try await store.content("bkt", "object") == "stays")
    }

    @Test func expiryWorksInBatches() async throws {
        let box = try Sandbox()
        let store = try DiskFault().open(box)
        try await store.createBucket("bkt")
        for n in 0..<7 { _ = try await store.createMultipartUpload(bucket: "bkt", key: "k\(n)", metadata: ObjectMetadata()) }
        #expect(try await store.abortUploads(initiatedBefore: Date().addingTimeInterval(60), batchSize: 3) == 7)
        #expect(try await store.listMultipartUploads(bucket: "bkt", query: ListUploadsQuery()).uploads.isEmpty)
        #expect(try await store.abortUploads(initiatedBefore: Date().addingTimeInterval(60)) == 0)
    }
}
