import Foundation
import NIOCore
import Testing
import TollgateCrypto
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

@Suite struct AppendTests {
    func append(_ store: LocalObjectStore, _ key: String, at position: Int64, _ content: String, metadata: ObjectMetadata = ObjectMetadata()) async throws -> ObjectInfo {
        try await store.appendObject(bucket: "logs", key: key, position: position, body: Chunks(content), metadata: metadata, options: WriteOptions())
    }

    @Test func appendsGrowTheObject() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("logs")
        let first = try await append(store, "app.log", at: 0, "line1\n", metadata: ObjectMetadata(contentType: "text/plain"))
        #expect(first.isAppendable && first.nextAppendPosition == 6)
        #expect(first.etag == (try quotedMD5(Array("line1\n".utf8))))
        let second = try await append(store, "app.log", at: 6, "line2\n")
        #expect(second.nextAppendPosition == 12)
        #expect(second.etag != first.etag)
        #expect(second.metadata.contentType == "text/plain")
        #expect(try await store.content("logs", "app.log") == "line1\nline2\n")
        #expect(try await store.headObject(bucket: "logs", key: "app.log") == second)
        #expect(box.objectFiles.count == 1)
    }

    @Test func appendErrors() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("logs")
        #expect(await storeError { _ = try await append(store, "new", at: 3, "x") } == .positionNotEqualToLength(next: 0))
        _ = try await append(store, "a", at: 0, "abc")
        #expect(await storeError { _ = try await append(store, "a", at: 2, "x") } == .positionNotEqualToLength(next: 3))
        #expect(await storeError { _ = try await append(store, "a", at: 0, "x") } == .positionNotEqualToLength(next: 3))
        try await store.put("logs", "plain", "normal object")
        #expect(await storeError { _ = try await append(store, "plain", at: 13, "x") } == .objectNotAppendable)
        // A PUT over an appendable object makes it a normal object.
        try await store.put("logs", "a", "replaced")
        #expect(await storeError { _ = try await append(store, "a", at: 8, "x") } == .objectNotAppendable)
        #expect(try await store.content("logs", "a") == "replaced")
    }

    @Test func readersAreBoundedByTheCommittedSize() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("logs")
        let info = try await append(store, "a", at: 0, "committed")
        let before = try await store.getObject(bucket: "logs", key: "a", range: nil)
        // Simulate a crash mid-append: bytes past the committed size, no commit.
        _ = info
        let handle = try #require(FileHandle(forWritingAtPath: try store.layout.objectPath(try await store.fileID("logs", "a"))))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("GARBAGE".utf8))
        try handle.close()
        #expect(try await store.content("logs", "a") == "committed")
        // The next append at the committed length overwrites the uncommitted tail.
        _ = try await append(store, "a", at: 9, "+more")
        #expect(try await store.content("logs", "a") == "committed+more")
        // A reader opened before the append still sees exactly its version.
        #expect(try await string(before.body) == "committed")
    }

    @Test func failedAppendLeavesObjectUnchanged() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("logs")
        let info = try await append(store, "a", at: 0, "base")
        await #expect(throws: ClientAborted.self) {
            _ = try await store.appendObject(bucket: "logs", key: "a", position: 4, body: FailingBody(chunk: [65, 66], good: 2), metadata: ObjectMetadata(), options: WriteOptions())
        }
        #expect(try await store.headObject(bucket: "logs", key: "a") == info)
        #expect(try await store.content("logs", "a") == "base")
        let attrs = try FileManager.default.attributesOfItem(atPath: try store.layout.objectPath(try await store.fileID("logs", "a")))
        #expect((attrs[.size] as? NSNumber)?.intValue == 4)
    }

    @Test func concurrentAppendsAtTheSamePositionHaveOneWinner() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("logs")
        _ = try await append(store, "a", at: 0, "0")
        let errors = await withTaskGroup(of: StoreError?.self) { group in
            for i in 0..<6 {
                group.addTask { await storeError { _ = try await append(store, "a", at: 1, "\(i)") } }
            }
            var all: [StoreError?] = []
            for await e in group { all.append(e) }
            return all
        }
        #expect(errors.filter { $0 == nil }.count == 1)
        #expect(errors.filter { $0 == .positionNotEqualToLength(next: 2) }.count == 5)
        #expect(try await store.content("logs", "a").count == 2)
    }
}

@Suite struct CopyTests {
    @Test func copyKeepsOrReplacesMetadata() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("src")
        try await store.createBucket("dst")
        let original = ObjectMetadata(contentType: "image/png", userMetadata: ["a": "1"])
        let source = try await store.put("src", "pic.png", "PNGDATA", metadata: original)
        let copied = try await store.copyObject(from: .init(bucket: "src", key: "pic.png"), to: .init(bucket: "dst", key: "copy.png"), metadata: .source, options: CopyOptions())
        #expect(copied.metadata == original)
        #expect(copied.etag == source.etag)
        #expect(try await store.fileID("dst", "copy.png") != store.fileID("src", "pic.png"))
        #expect(try await store.content("dst", "copy.png") == "PNGDATA")
        let replaced = ObjectMetadata(contentType: "application/octet-stream", userMetadata: ["b": "2"])
        let second = try await store.copyObject(from: .init(bucket: "src", key: "pic.png"), to: .init(bucket: "dst", key: "copy.png"), metadata: .replacing(replaced), options: CopyOptions())
        #expect(try await store.headObject(bucket: "dst", key: "copy.png").metadata == replaced)
        #expect(second.etag == source.etag)
        // Deleting the source does not affect the copy.
        try await store.deleteObject(bucket: "src", key: "pic.png")
        #expect(try await store.content("dst", "copy.png") == "PNGDATA")
        #expect(box.objectFiles.count == 1)
    }

    @Test func copyOntoItselfWithReplace() async throws {
        let box = try Sandbox()
        let store = try box.open()
        try await store.createBucket("b-b")
        let before = try await store.put("b-b", "k", "same bytes", metadata: ObjectMetadata(contentType: "text/plain"))
        let after = try await store.copyObject(from: .init(bucket: "b-b", key: "k"), to: .init(bucket: "b-b", key: "k"), metadata: .replacing(ObjectMetadata(contentType: "text/markdown")), options: CopyOptions())
        #expect(after.etag == before.etag)
        #expect(try await store.headObject(bucket: "b-b", key: "k").metadata.contentType == "text/markdown")
        #expect(try await store.content("b-b", "k") == "same bytes")
        #expect(box.objectFiles.count == 1 && box.tmpFiles.isEmpty)
    }

    @Test func copyFromMultipartGetsContentMD5AndChecksRun() async throws {
        let box = try Sandbox()
        let store = try box.open(minimumPartSize: 1)
        try await store.createBucket("b-b")
        let upload = try await store.createMultipartUpload(bucket: "b-b", key: "mp", metadata: ObjectMetadata())
        let p1 = try await store.uploadPart(bucket: "b-b", key: "mp", uploadID: upload.uploadID, partNumber: 1, body: Chunks("ab"), options: WriteOptions())
        let p2 = try await store.uploadPart(bucket: "b-b", key: "mp", uploadID: upload.uploadID, partNumber: 2, body: Chunks("cd"), options: WriteOptions())
        let mp = try await store.completeMultipartUpload(bucket: "b-b", key: "mp", uploadID: upload.uploadID, parts: [.init(partNumber: 1, etag: p1.etag), .init(partNumber: 2, etag: p2.etag)], preconditions: .none)
        #expect(mp.etag.hasSuffix("-2\""))
        let copy = try await store.copyObject(from: .init(bucket: "b-b", key: "mp"), to: .init(bucket: "b-b", key: "single"), metadata: .source, options: CopyOptions())
        #expect(copy.etag == (try quotedMD5(Array("abcd".utf8))))

        #expect(await storeError {
            _ = try await store.copyObject(from: .init(bucket: "b-b", key: "mp"), to: .init(bucket: "b-b", key: "x"), metadata: .source,
                                           options: CopyOptions(sourceConditions: .init(ifMatch: copy.etag)))
        } == .copySourceConditionFailed(.ifMatch))
        #expect(await storeError { _ = try await store.copyObject(from: .init(bucket: "b-b", key: "mp"), to: .init(bucket: "b-b", key: "single"), metadata: .source, options: CopyOptions(preconditions: .init(ifNoneMatch: "*"))) } == .preconditionFailed)
        #expect(await storeError { _ = try await store.copyObject(from: .init(bucket: "b-b", key: "missing"), to: .init(bucket: "b-b", key: "x"), metadata: .source, options: CopyOptions()) } == .noSuchKey(bucket: "b-b", key: "missing"))
        #expect(await storeError { _ = try await store.copyObject(from: .init(bucket: "b-b", key: "mp"), to: .init(bucket: "nope", key: "x"), metadata: .source, options: CopyOptions()) } == .noSuchBucket(bucket: "nope"))
        // The multipart object's two part files and the copy's one file.
        #expect(box.objectFiles.count == 3 && box.tmpFiles.isEmpty)
    }
}

@Suite struct RecoveryTests {
    @Test func restartRemovesTempFilesAndOrphansAndKeepsCommittedObjects() async throws {
        let box = try Sandbox()
        var committed: [String: String] = [:]
        do {
            let store = try box.open()
            try await store.createBucket("keep")
            for i in 0..<5 {
                try await store.put("keep", "obj\(i)", "content \(i)")
                committed["obj\(i)"] = "content \(i)"
            }
            let upload = try await store.createMultipartUpload(bucket: "keep", key: "mp", metadata: ObjectMetadata())
            _ = try await store.uploadPart(bucket: "keep", key: "mp", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part"), options: WriteOptions())
            try store.close()
        }
        // What a crash leaves: a half-written temp file, and a renamed-but-uncommitted object file.
        let orphanID = String(repeating: "ab", count: 16)
        let orphanDirectory = box.data + "/objects/ab/ab"
        try FileManager.default.createDirectory(atPath: orphanDirectory, withIntermediateDirectories: true)
        try Data("uncommitted".utf8).write(to: URL(fileURLWithPath: orphanDirectory + "/" + orphanID))
        try Data("half".utf8).write(to: URL(fileURLWithPath: box.data + "/tmp/" + String(repeating: "cd", count: 16)))
        try Data("junk".utf8).write(to: URL(fileURLWithPath: box.data + "/tmp/junk"))
        #expect(box.objectFiles.count == 7)

        let store = try box.open()
        #expect(store.recovery == .init(removedTemporaryFiles: 2, removedOrphanFiles: 1, missingFiles: 0))
        #expect(box.tmpFiles.isEmpty)
        #expect(box.objectFiles.count == 6)
        #expect(!FileManager.default.fileExists(atPath: orphanDirectory + "/" + orphanID))
        for (key, content) in committed {
            #expect(try await store.content("keep", key) == content)
        }
        let uploads = try await store.listMultipartUploads(bucket: "keep", query: ListUploadsQuery())
        #expect(uploads.uploads.count == 1)
        let parts = try await store.listParts(bucket: "keep", key: "mp", uploadID: uploads.uploads[0].uploadID, partNumberMarker: 0, maxParts: 10)
        #expect(parts.parts.count == 1)

        // A clean restart finds nothing to do.
        try store.close()
        let again = try box.open()
        #expect(again.recovery == .init(removedTemporaryFiles: 0, removedOrphanFiles: 0, missingFiles: 0))
    }

    /// Recovery walks the files and the rows side by side in id order: orphans before, between
    /// and after the referenced files, in directories of their own or beside kept files, names
    /// that are not ids or not of their directory, and rows whose file is gone, all counted right.
    @Test func recoveryWalksFilesAndRowsInOrder() async throws {
        let box = try Sandbox()
        var kept: [String] = []
        do {
            let store = try box.open()
            try await store.createBucket("walk")
            for i in 0..<40 { try await store.put("walk", "k\(i)", "v\(i)") }
            try store.close()
        }
        kept = box.objectFiles.map { ($0 as NSString).lastPathComponent }.sorted()
        #expect(kept.count == 40)
        // One row loses its file (damage from outside).
        let lost = kept[17]
        try FileManager.default.removeItem(atPath: box.data + "/objects/" + lost.prefix(2) + "/" + lost.dropFirst(2).prefix(2) + "/" + lost)
        func plant(_ directory: String, _ name: String) throws {
            let path = box.data + "/objects/" + directory
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: URL(fileURLWithPath: path + "/" + name))
        }
        let first = kept[0], last = kept[39]
        let before = String(first.prefix(4)) + String(repeating: "0", count: 28)      // sorts before the first kept id
        let after = String(last.prefix(4)) + String(repeating: "f", count: 28)        // after the last
        try plant(String(first.prefix(2)) + "/" + first.dropFirst(2).prefix(2), before)
        try plant(String(last.prefix(2)) + "/" + last.dropFirst(2).prefix(2), after)
        try plant("00/00", "0000" + String(repeating: "1", count: 28))                 // a directory of its own
        try plant("ff/ff", "ffff" + String(repeating: "e", count: 28))
        try plant(String(first.prefix(2)) + "/" + first.dropFirst(2).prefix(2), "not-an-id")
        try plant("00/00", String(last.prefix(4)) + String(repeating: "2", count: 28))  // an id in another's directory
        let store = try box.open()
        #expect(store.recovery == .init(removedTemporaryFiles: 0, removedOrphanFiles: 6, missingFiles: 1))
        #expect(box.objectFiles.map { ($0 as NSString).lastPathComponent }.sorted() == kept.filter { $0 != lost })
        for i in 0..<40 {
            let info = try await store.headObject(bucket: "walk", key: "k\(i)")
            #expect(info.size > 0)
        }
    }
}
