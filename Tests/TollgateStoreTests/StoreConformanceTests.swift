import Foundation
import NIOCore
import Testing
import TollgateCORS
import TollgateCrypto
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore
@testable import TollgateS3Store

/// The `ObjectStore`s, built with the same rules: the same checks run against each, so the
/// in-memory twin the gateway tests use behaves like the stores the server runs. The S3 store
/// runs when a backend is named (`S3TestBackend`: the Ceph cluster of `.ci/ceph/cluster.sh`,
/// which `.ci/run` starts), each test in buckets of its own prefix.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    case local, memory, s3

    static var allCases: [StoreKind] { S3TestBackend.current == nil ? [.local, .memory] : [.local, .memory, .s3] }

    var testDescription: String { rawValue }

    static let clock: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_700_000_000.123) }

    /// Times are the store's own clock (the tests'), in milliseconds; else the backend's, in seconds.
    var exactClock: Bool { self != .s3 }

    /// The store (and, for the local one, the sandbox that must outlive it).
    func make(minimumPartSize: Int64 = 5, maxUploadsPerBucket: Int = 1000) throws -> (any ObjectStore, Sandbox?) {
        switch self {
        case .s3:
            guard let backend = S3TestBackend.current else { throw S3TestBackend.Missing() }
            return (try backend.store(minimumPartSize: minimumPartSize, maxUploadsPerBucket: maxUploadsPerBucket), nil)
        case .local:
            let box = try Sandbox()
            let store = try LocalObjectStore(configuration: .init(
                directory: box.data, minimumPartSize: minimumPartSize, readChunkSize: 8, maxUploadsPerBucket: maxUploadsPerBucket,
                now: Self.clock
            ))
            return (store, box)
        case .memory:
            return (MemoryObjectStore(minimumPartSize: minimumPartSize, maxUploadsPerBucket: maxUploadsPerBucket, now: Self.clock), nil)
        }
    }
}

private func body(_ string: String) -> Chunks { Chunks(string) }

private func text(_ store: any ObjectStore, _ bucket: String, _ key: String, _ range: ByteRange? = nil) async throws -> String {
    try await string(store.getObject(bucket: bucket, key: key, range: range).body)
}

@Suite struct StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func buckets(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("zeta")
        try await store.createBucket("alpha")
        #expect(await storeError { try await store.createBucket("alpha") } == .bucketExists(bucket: "alpha"))
        #expect(await storeError { try await store.createBucket("Bad_Name") } == .invalidBucketName(bucket: "Bad_Name"))
        #expect(try await store.listBuckets().map(\.name) == ["alpha", "zeta"])
        let created = try await store.headBucket("alpha").creationDate
        #expect(kind.exactClock ? created == Date(timeIntervalSince1970: 1_700_000_000.123) : abs(created.timeIntervalSinceNow) < 120)
        #expect(await storeError { _ = try await store.headBucket("nope") } == .noSuchBucket(bucket: "nope"))
        #expect(try await store.bucketStats("alpha") == BucketStats(objectCount: 0, storageBytes: 0, multipartUploadCount: 0, multipartPartCount: 0, lastModified: nil))
        #expect(await storeError { _ = try await store.bucketStats("nope") } == .noSuchBucket(bucket: "nope"))
        _ = try await store.putObject(bucket: "alpha", key: "k", body: body("v"))
        _ = try await store.putObject(bucket: "alpha", key: "k2", body: body("vvv"))
        let pending = try await store.createMultipartUpload(bucket: "alpha", key: "p", metadata: ObjectMetadata())
        _ = try await store.uploadPart(bucket: "alpha", key: "p", uploadID: pending.uploadID, partNumber: 1, body: body("p1"), options: WriteOptions())
        _ = try await store.uploadPart(bucket: "alpha", key: "p", uploadID: pending.uploadID, partNumber: 2, body: body("p2"), options: WriteOptions())
        let stats = try await store.bucketStats("alpha")
        #expect(stats.objectCount == 2 && stats.storageBytes == 4 && stats.multipartUploadCount == 1 && stats.multipartPartCount == 2)
        #expect(stats.lastModified != nil)
        #expect(try await store.bucketStats("zeta").objectCount == 0)
        // Tags: stored with the object, replaced alone (same ETag and time), kept by a copy.
        let tagged = try await store.putObject(bucket: "alpha", key: "t", body: body("tagged"), metadata: ObjectMetadata(tags: ["a": "1"]), options: WriteOptions())
        #expect(try await store.objectTags(bucket: "alpha", key: "t") == ["a": "1"])
        #expect(try await store.headObject(bucket: "alpha", key: "t").tagCount == 1)
        try await store.setObjectTags(bucket: "alpha", key: "t", tags: ["b": "2", "c": ""])
        let retagged = try await store.headObject(bucket: "alpha", key: "t")
        #expect(try await store.objectTags(bucket: "alpha", key: "t") == ["b": "2", "c": ""])
        #expect(retagged.tagCount == 2 && retagged.etag == tagged.etag && sameTime(retagged.lastModified, tagged.lastModified, kind))
        _ = try await store.copyObject(from: .init(bucket: "alpha", key: "t"), to: .init(bucket: "alpha", key: "t2"), metadata: .source, options: CopyOptions())
        #expect(try await store.objectTags(bucket: "alpha", key: "t2") == ["b": "2", "c": ""])
        #expect(await storeError { try await store.setObjectTags(bucket: "alpha", key: "none", tags: [:]) } == .noSuchKey(bucket: "alpha", key: "none"))
        try await store.deleteObject(bucket: "alpha", key: "t")
        try await store.deleteObject(bucket: "alpha", key: "t2")
        try await store.abortMultipartUpload(bucket: "alpha", key: "p", uploadID: pending.uploadID)
        try await store.deleteObject(bucket: "alpha", key: "k2")
        #expect(await storeError { try await store.deleteBucket("alpha") } == .bucketNotEmpty(bucket: "alpha"))
        try await store.deleteObject(bucket: "alpha", key: "k")
        // Only an unfinished upload left: the bucket goes, and the upload with it, as in S3.
        let upload = try await store.createMultipartUpload(bucket: "alpha", key: "m", metadata: ObjectMetadata())
        _ = try await store.uploadPart(bucket: "alpha", key: "m", uploadID: upload.uploadID, partNumber: 1, body: body("part"), options: WriteOptions())
        try await store.deleteBucket("alpha")
        #expect(await storeError { try await store.abortMultipartUpload(bucket: "alpha", key: "m", uploadID: upload.uploadID) } != nil)
        #expect(await storeError { try await store.deleteBucket("alpha") } == .noSuchBucket(bucket: "alpha"))
        #expect(try await store.ensureBuckets(["zeta", "new-one"]) == ["new-one"])
    }

    @Test(arguments: StoreKind.allCases)
    func bucketCORS(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("web")
        try await store.createBucket("other")
        #expect(try await store.bucketCORS("web") == nil)
        #expect(try await store.bucketCORS("no-such-bucket") == nil)
        let full = CORSConfiguration(rules: [
            CORSRule(id: "upload", allowedOrigins: ["https://app.example.com", "http://localhost:*"], allowedMethods: ["PUT", "POST"],
                     allowedHeaders: ["*"], exposeHeaders: ["ETag", "x-amz-meta-owner"], maxAgeSeconds: 0),
            CORSRule(allowedOrigins: ["*"], allowedMethods: ["GET"]),
        ], responseVary: true)
        try await store.setBucketCORS("web", full)
        #expect(try await store.bucketCORS("web") == full)
        #expect(try await store.bucketCORS("other") == nil)
        // A put replaces the rules whole.
        let narrow = CORSConfiguration(rules: [CORSRule(allowedOrigins: ["https://app.example.com"], allowedMethods: ["GET"], maxAgeSeconds: 60)])
        try await store.setBucketCORS("web", narrow)
        #expect(try await store.bucketCORS("web") == narrow)
        try await store.setBucketCORS("other", full)
        // Delete is idempotent and touches that bucket alone.
        try await store.deleteBucketCORS("web")
        #expect(try await store.bucketCORS("web") == nil)
        try await store.deleteBucketCORS("web")
        #expect(try await store.bucketCORS("other") == full)
        #expect(await storeError { try await store.setBucketCORS("no-such-bucket", full) } == .noSuchBucket(bucket: "no-such-bucket"))
        #expect(await storeError { try await store.deleteBucketCORS("no-such-bucket") } == .noSuchBucket(bucket: "no-such-bucket"))
        #expect(try await store.bucketCORS("no-such-bucket") == nil)
        // The rules go with their bucket: a bucket created again under the name has none.
        try await store.deleteBucket("other")
        #expect(try await store.bucketCORS("other") == nil)
        try await store.createBucket("other")
        #expect(try await store.bucketCORS("other") == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func objectsRangesAndPreconditions(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("b-1")
        let metadata = ObjectMetadata(contentType: "text/plain", cacheControl: "no-cache", userMetadata: ["Mixed-Case": "Value"])
        let info = try await store.putObject(bucket: "b-1", key: "k", body: Chunks(["0123", "456789abcdef"].map { Array($0.utf8) }), metadata: metadata)
        let etag = try quotedMD5(Array("0123456789abcdef".utf8))
        #expect(info.etag == etag)
        #expect(info.size == 16 && info.metadata == metadata && !info.isAppendable)
        #expect(same(try await store.headObject(bucket: "b-1", key: "k"), info, kind))
        #expect(try await text(store, "b-1", "k") == "0123456789abcdef")
        let cases: [(String, String, Range<Int64>)] = [("bytes=2-4", "234", 2..<5), ("bytes=10-", "abcdef", 10..<16),
                                                       ("bytes=-3", "def", 13..<16), ("bytes=4-100", "456789abcdef", 4..<16)]
        for (header, expected, range) in cases {
            let read = try await store.getObject(bucket: "b-1", key: "k", range: ByteRange.parse(header))
            #expect(read.isPartial && read.range == range && read.contentRange == "bytes \(range.lowerBound)-\(range.upperBound - 1)/16")
            #expect(try await string(read.body) == expected, "\(header)")
        }
        #expect(await storeError { _ = try await store.getObject(bucket: "b-1", key: "k", range: .from(16)) } == .invalidRange(size: 16))
        #expect(await storeError { _ = try await store.getObject(bucket: "b-1", key: "nope", range: nil) } == .noSuchKey(bucket: "b-1", key: "nope"))
        #expect(await storeError { _ = try await store.headObject(bucket: "nope", key: "k") } == .noSuchBucket(bucket: "nope"))
        #expect(await storeError { _ = try await store.putObject(bucket: "nope", key: "k", body: body("x")) } == .noSuchBucket(bucket: "nope"))
        #expect(await storeError { _ = try await store.putObject(bucket: "b-1", key: "", body: body("x")) } == .emptyKey)
        #expect(await storeError { _ = try await store.putObject(bucket: "b-1", key: String(repeating: "k", count: 1025), body: body("x")) } == .keyTooLong)

        func put(_ content: String, _ preconditions: WritePreconditions) async -> StoreError? {
            await storeError { _ = try await store.putObject(bucket: "b-1", key: "k", body: body(content), metadata: ObjectMetadata(), options: WriteOptions(preconditions: preconditions)) }
        }
        #expect(await put("x", WritePreconditions(ifNoneMatch: "*")) == .preconditionFailed)
        #expect(await put("x", WritePreconditions(ifMatch: "\"0000\"")) == .preconditionFailed)
        #expect(await put("second", WritePreconditions(ifMatch: info.etag)) == nil)
        #expect(try await text(store, "b-1", "k") == "second")
        #expect(await storeError { _ = try await store.putObject(bucket: "b-1", key: "new", body: body("x"), metadata: ObjectMetadata(), options: WriteOptions(preconditions: WritePreconditions(ifMatch: "*"))) } == .preconditionFailed)

        let empty = try await store.putObject(bucket: "b-1", key: "empty", body: body(""))
        #expect(empty.size == 0 && empty.etag == "\"d41d8cd98f00b204e9800998ecf8427e\"")
        #expect(try await text(store, "b-1", "empty") == "")

        let results = try await store.deleteObjects(bucket: "b-1", keys: ["k", "missing", ""])
        #expect(results == [DeleteResult(key: "k", error: nil), DeleteResult(key: "missing", error: nil), DeleteResult(key: "", error: .emptyKey)])
        #expect(await storeError { _ = try await store.headObject(bucket: "b-1", key: "k") } == .noSuchKey(bucket: "b-1", key: "k"))
        try await store.deleteObject(bucket: "b-1", key: "never-existed")
        #expect(await storeError { try await store.deleteObject(bucket: "nope", key: "k") } == .noSuchBucket(bucket: "nope"))
    }

    @Test(arguments: StoreKind.allCases)
    func copies(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("src")
        try await store.createBucket("dst")
        let original = ObjectMetadata(contentType: "image/png", userMetadata: ["a": "1"])
        let source = try await store.putObject(bucket: "src", key: "pic", body: body("PNGDATA-longer-than-a-chunk"), metadata: original)
        let copied = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "dst", key: "copy"), metadata: .source, options: CopyOptions())
        #expect(copied.metadata == original && copied.etag == source.etag)
        #expect(try await text(store, "dst", "copy") == "PNGDATA-longer-than-a-chunk")
        let replaced = ObjectMetadata(contentType: "text/plain")
        _ = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "dst", key: "copy"), metadata: .replacing(replaced), options: CopyOptions())
        #expect(try await store.headObject(bucket: "dst", key: "copy").metadata == replaced)
        // The source's conditions, as data: each one that fails is named, and nothing is copied.
        let modified = source.lastModifiedSeconds
        let conditions: [(CopySourceConditions, CopySourceConditions.Condition?)] = [
            (.init(ifMatch: source.etag), nil), (.init(ifMatch: "\"0000\""), .ifMatch),
            (.init(ifNoneMatch: source.etag), .ifNoneMatch), (.init(ifNoneMatch: "\"0000\""), nil),
            (.init(ifModifiedSince: modified), .ifModifiedSince), (.init(ifModifiedSince: modified - 60), nil),
            (.init(ifUnmodifiedSince: modified - 60), .ifUnmodifiedSince), (.init(ifUnmodifiedSince: modified), nil),
            // A match overrides an unmodified-since, as in S3.
            (.init(ifMatch: source.etag, ifUnmodifiedSince: modified - 60), nil),
        ]
        for (index, (condition, failing)) in conditions.enumerated() {
            let error = await storeError {
                _ = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "dst", key: "c\(index)"), metadata: .source,
                                               options: CopyOptions(sourceConditions: condition))
            }
            #expect(error == failing.map(StoreError.copySourceConditionFailed), "\(condition)")
            #expect(await storeError { _ = try await store.headObject(bucket: "dst", key: "c\(index)") } == (failing == nil ? nil : .noSuchKey(bucket: "dst", key: "c\(index)")))
        }
        #expect(await storeError { _ = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "dst", key: "copy"), metadata: .source, options: CopyOptions(preconditions: WritePreconditions(ifNoneMatch: "*"))) } == .preconditionFailed)
        #expect(await storeError { _ = try await store.copyObject(from: .init(bucket: "src", key: "gone"), to: .init(bucket: "dst", key: "x"), metadata: .source, options: CopyOptions()) } == .noSuchKey(bucket: "src", key: "gone"))
    }

    /// The metadata and tagging directives differ: each part not given comes from the source
    /// version the copy opens.
    @Test(arguments: StoreKind.allCases)
    func copiesMixGivenAndSourceMetadata(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("src")
        let original = ObjectMetadata(contentType: "image/png", userMetadata: ["a": "1"], tags: ["v": "1"])
        _ = try await store.putObject(bucket: "src", key: "pic", body: body("bytes"), metadata: original)
        let given = ObjectMetadata(contentType: "text/plain", tags: ["given": "yes"])
        let newMetadata = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "src", key: "a"),
                                                     metadata: CopyMetadata(metadata: given), options: CopyOptions())
        #expect(newMetadata.metadata.withoutTags == ObjectMetadata(contentType: "text/plain"))
        #expect(try await store.objectTags(bucket: "src", key: "a") == ["v": "1"])
        let newTags = try await store.copyObject(from: .init(bucket: "src", key: "pic"), to: .init(bucket: "src", key: "b"),
                                                 metadata: CopyMetadata(tags: ["given": "yes"]), options: CopyOptions())
        #expect(newTags.metadata.withoutTags == ObjectMetadata(contentType: "image/png", userMetadata: ["a": "1"]))
        #expect(try await store.objectTags(bucket: "src", key: "b") == ["given": "yes"])
        #expect(try await store.headObject(bucket: "src", key: "b").metadata.withoutTags == newTags.metadata.withoutTags)
    }

    @Test(arguments: StoreKind.allCases)
    func appends(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("logs")
        func append(_ key: String, at position: Int64, _ content: String) async throws -> ObjectInfo {
            try await store.appendObject(bucket: "logs", key: key, position: position, body: body(content), metadata: ObjectMetadata(contentType: "text/log"), options: WriteOptions())
        }
        #expect(await storeError { _ = try await append("a", at: 3, "x") } == .positionNotEqualToLength(next: 0))
        #expect(await storeError { _ = try await append("a", at: -1, "x") } == .negativePosition)
        let first = try await append("a", at: 0, "base")
        let baseETag = try quotedMD5(Array("base".utf8))
        #expect(first.isAppendable && first.nextAppendPosition == 4 && first.etag == baseETag)
        let second = try await append("a", at: 4, "+more")
        #expect(second.size == 9 && second.metadata.contentType == "text/log")
        if kind == .s3 {
            // The backend's own ETag of an appended object, as HEAD gives it.
            let stored = try await store.headObject(bucket: "logs", key: "a").etag
            #expect(second.etag != first.etag && second.etag == stored)
        } else {
            let chained = try Crypto.md5(Array(ETag.normalize(first.etag).utf8) + Crypto.md5(Array("+more".utf8)))
            #expect(second.etag == "\"" + Hex.encode(chained) + "\"")
        }
        #expect(try await text(store, "logs", "a") == "base+more")
        #expect(await storeError { _ = try await append("a", at: 4, "x") } == .positionNotEqualToLength(next: 9))
        _ = try await store.putObject(bucket: "logs", key: "plain", body: body("p"))
        #expect(await storeError { _ = try await append("plain", at: 1, "x") } == .objectNotAppendable)
        #expect(await storeError { _ = try await append("plain", at: 0, "x") } == .objectNotAppendable)
    }

    /// `WriteOptions.expectedMD5` (the client's `Content-MD5`): a put, a part and an append
    /// whose body has another MD5 are refused with `badDigest`, and leave what was stored as it
    /// was (no row, no part, no appended byte, no file); with the right MD5 each is stored.
    @Test(arguments: StoreKind.allCases)
    func expectedMD5(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("digests")
        func md5(_ text: String) throws -> [UInt8] { try Crypto.md5(Array(text.utf8)) }
        func stating(_ text: String) throws -> WriteOptions { WriteOptions(expectedMD5: try md5(text)) }
        let old = try await store.putObject(bucket: "digests", key: "k", body: body("old"), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(await storeError {
            _ = try await store.putObject(bucket: "digests", key: "k", body: body("new"), metadata: ObjectMetadata(), options: try stating("other"))
        } == .badDigest)
        #expect(try await text(store, "digests", "k") == "old")
        #expect(try await store.headObject(bucket: "digests", key: "k").etag == old.etag)
        #expect(await storeError {
            _ = try await store.putObject(bucket: "digests", key: "fresh", body: body("new"), metadata: ObjectMetadata(), options: try stating("other"))
        } == .badDigest)
        #expect(await storeError { _ = try await store.headObject(bucket: "digests", key: "fresh") } == .noSuchKey(bucket: "digests", key: "fresh"))
        let new = try await store.putObject(bucket: "digests", key: "k", body: body("new"), metadata: ObjectMetadata(), options: try stating("new"))
        #expect(try new.etag == quotedMD5(Array("new".utf8)))
        #expect(try await text(store, "digests", "k") == "new")

        let upload = try await store.createMultipartUpload(bucket: "digests", key: "m", metadata: ObjectMetadata())
        #expect(await storeError {
            _ = try await store.uploadPart(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumber: 1, body: body("part"), options: try stating("trap"))
        } == .badDigest)
        #expect(try await store.listParts(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 1000).parts.isEmpty)
        let part = try await store.uploadPart(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumber: 1, body: body("part"), options: try stating("part"))
        #expect(try part.etag == quotedMD5(Array("part".utf8)))

        func append(at position: Int64, _ content: String, stating stated: String) async throws -> ObjectInfo {
            try await store.appendObject(bucket: "digests", key: "a", position: position, body: body(content), metadata: ObjectMetadata(), options: try stating(stated))
        }
        #expect(await storeError { _ = try await append(at: 0, "base", stating: "bass") } == .badDigest)
        #expect(await storeError { _ = try await store.headObject(bucket: "digests", key: "a") } == .noSuchKey(bucket: "digests", key: "a"))
        let first = try await append(at: 0, "base", stating: "base")
        #expect(await storeError { _ = try await append(at: 4, "+more", stating: "+mire") } == .badDigest)
        #expect(try await text(store, "digests", "a") == "base")
        #expect(try await store.headObject(bucket: "digests", key: "a").etag == first.etag)
        #expect(try await append(at: 4, "+more", stating: "+more").size == 9)
        #expect(try await text(store, "digests", "a") == "base+more")
        if let box {
            // One file per row and part: the refused writes left none behind.
            #expect(box.objectFiles.count == 3)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func multipart(kind: StoreKind) async throws {
        let (store, box) = try kind.make(minimumPartSize: 5, maxUploadsPerBucket: 2)
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("mpu")
        let upload = try await store.createMultipartUpload(bucket: "mpu", key: "k", metadata: ObjectMetadata(contentType: "a/b"))
        let id = upload.uploadID
        func part(_ n: Int, _ content: String) async throws -> PartInfo {
            try await store.uploadPart(bucket: "mpu", key: "k", uploadID: id, partNumber: n, body: body(content), options: WriteOptions())
        }
        func complete(_ parts: [CompletedPart]) async -> StoreError? {
            await storeError { _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: id, parts: parts, preconditions: .none, minimumPartSize: nil) }
        }
        let p1 = try await part(1, "abc")
        let p2 = try await part(2, "defgh")
        let p3 = try await part(3, "ij")
        #expect(await storeError { _ = try await part(0, "x") } == .invalidPartNumber(0))
        #expect(await storeError { _ = try await part(10_001, "x") } == .invalidPartNumber(10_001))
        #expect(await storeError { _ = try await store.uploadPart(bucket: "mpu", key: "other", uploadID: id, partNumber: 1, body: body("x"), options: WriteOptions()) } == .noSuchUpload(uploadID: id))
        let listed = try await store.listParts(bucket: "mpu", key: "k", uploadID: id, partNumberMarker: 1, maxParts: 1)
        #expect(listed.parts == [p2] && listed.isTruncated && listed.nextPartNumberMarker == 2 && listed.upload == upload)
        #expect(await complete([]) == .noPartsGiven)
        #expect(await complete([.init(partNumber: 2, etag: p2.etag), .init(partNumber: 1, etag: p1.etag)]) == .invalidPartOrder)
        #expect(await complete([.init(partNumber: 1, etag: p2.etag)]) == .invalidPart(partNumber: 1))
        #expect(await complete([.init(partNumber: 1, etag: p1.etag), .init(partNumber: 2, etag: p2.etag)]) == .entityTooSmall(partNumber: 1))
        _ = try await store.createMultipartUpload(bucket: "mpu", key: "k2", metadata: ObjectMetadata())
        #expect(await storeError { _ = try await store.createMultipartUpload(bucket: "mpu", key: "k3", metadata: ObjectMetadata()) } == .tooManyUploads(bucket: "mpu", limit: 2))
        // Parts 2 and 3, leaving out part 1. RGW completes an upload only with its parts in
        // sequence from the first uploaded one: the S3 store says so, and part 1 is replaced.
        var chosen: [CompletedPart] = [.init(partNumber: 2, etag: p2.etag), .init(partNumber: 3, etag: p3.etag)]
        var expected = "defghij"
        if kind == .s3 {
            guard case .notSupported? = await complete(chosen) else { Issue.record("a completion leaving out an uploaded part"); return }
            let p1 = try await part(1, "abcde")
            chosen.insert(.init(partNumber: 1, etag: p1.etag), at: 0)
            expected = "abcdedefghij"
        }
        let done = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: id, parts: chosen, preconditions: .none, minimumPartSize: nil)
        #expect(done.etag.hasSuffix("-\(chosen.count)\"") && done.size == Int64(expected.utf8.count) && done.metadata.contentType == "a/b")
        #expect(try await text(store, "mpu", "k") == expected)
        // Completing again with the same parts answers the same object (a retry whose first
        // answer was lost); other parts, another key, or the object replaced since: NoSuchUpload.
        let again = try await store.completeMultipartUpload(bucket: "mpu", key: "k", uploadID: id, parts: chosen, preconditions: .none, minimumPartSize: nil)
        #expect(again == done)
        #expect(await complete([.init(partNumber: 2, etag: p2.etag)]) == .noSuchUpload(uploadID: id))
        #expect(await storeError {
            _ = try await store.completeMultipartUpload(bucket: "mpu", key: "k2", uploadID: id, parts: chosen, preconditions: .none, minimumPartSize: nil)
        } == .noSuchUpload(uploadID: id))
        // The OSS override of the minimum part size.
        let small = try await store.createMultipartUpload(bucket: "mpu", key: "s", metadata: ObjectMetadata())
        let s1 = try await store.uploadPart(bucket: "mpu", key: "s", uploadID: small.uploadID, partNumber: 1, body: body("ab"), options: WriteOptions())
        let s2 = try await store.uploadPartCopy(bucket: "mpu", key: "s", uploadID: small.uploadID, partNumber: 2, source: .init(bucket: "mpu", key: "k"), range: .closed(0, 2), options: CopyOptions())
        _ = try await store.completeMultipartUpload(bucket: "mpu", key: "s", uploadID: small.uploadID, parts: [.init(partNumber: 1, etag: s1.etag), .init(partNumber: 2, etag: s2.etag)], preconditions: .none, minimumPartSize: 2)
        #expect(try await text(store, "mpu", "s") == "ab" + expected.prefix(3))
        _ = try await store.putObject(bucket: "mpu", key: "k", body: body("replaced"), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(await complete(chosen) == .noSuchUpload(uploadID: id))
    }

    /// Listings of both stores agree on every page of a set of queries over the same keys.
    /// What the gateway passes for a body: its real checksums.
    static func checksums(_ content: String, _ algorithm: ChecksumAlgorithm? = nil) throws -> ObjectChecksums {
        let bytes = Array(content.utf8)
        return ObjectChecksums(
            additional: try algorithm.map { AdditionalChecksum(algorithm: $0, digest: try StreamingChecksum.checksum($0, bytes)) },
            crc64ecma: ReflectedCRC<UInt64>.ecma.update(0, bytes)
        )
    }

    static func writing(_ content: String, _ algorithm: ChecksumAlgorithm? = nil) throws -> WriteOptions {
        let checksums = try checksums(content, algorithm)
        return WriteOptions(bodyChecksums: { checksums })
    }

    @Test(arguments: StoreKind.allCases)
    func checksumsOfPutsCopiesAndAppends(kind: StoreKind) async throws {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("sums")
        // Stored as the body's producer gave them, returned by HEAD and GET, kept by a retag.
        let put = try await store.putObject(bucket: "sums", key: "k", body: body("hello"), metadata: ObjectMetadata(), options: try Self.writing("hello", .sha256))
        #expect(put.checksums == (try Self.checksums("hello", .sha256)))
        #expect(try await store.headObject(bucket: "sums", key: "k").checksums == put.checksums)
        #expect(try await store.getObject(bucket: "sums", key: "k").info.checksums == put.checksums)
        try await store.setObjectTags(bucket: "sums", key: "k", tags: ["t": "1"])
        #expect(try await store.headObject(bucket: "sums", key: "k").checksums == put.checksums)
        // Tags given with the write stay with it when the checksums are known only after the body.
        _ = try await store.putObject(bucket: "sums", key: "tagged", body: body("hello"), metadata: ObjectMetadata(tags: ["t": "2"]),
                                      options: try Self.writing("hello"))
        #expect(try await store.objectTags(bucket: "sums", key: "tagged") == ["t": "2"])
        #expect(try await store.headObject(bucket: "sums", key: "tagged").checksums == (try Self.checksums("hello")))
        // Without them, none.
        #expect(try await store.putObject(bucket: "sums", key: "plain", body: body("x")).checksums == .none)
        // A copy has the same bytes: the same checksums.
        let copy = try await store.copyObject(from: .init(bucket: "sums", key: "k"), to: .init(bucket: "sums", key: "c"), metadata: .source, options: CopyOptions())
        #expect(copy.checksums == put.checksums)
        // Appends: the CRC-64 combined from the pieces' is the CRC-64 of the whole.
        _ = try await store.appendObject(bucket: "sums", key: "a", position: 0, body: body("abc"), metadata: ObjectMetadata(), options: try Self.writing("abc"))
        let appended = try await store.appendObject(bucket: "sums", key: "a", position: 3, body: body("defgh"), metadata: ObjectMetadata(), options: try Self.writing("defgh"))
        #expect(appended.checksums == ObjectChecksums(crc64ecma: try Self.checksums("abcdefgh").crc64ecma))
        #expect(try await store.headObject(bucket: "sums", key: "a").checksums == appended.checksums)
        // An append without a CRC-64 leaves the object without one (rather than a wrong one).
        let unknown = try await store.appendObject(bucket: "sums", key: "a", position: 8, body: body("i"), metadata: ObjectMetadata(), options: WriteOptions())
        #expect(unknown.checksums == .none)
    }

    @Test(arguments: StoreKind.allCases)
    func checksumsOfMultipartUploads(kind: StoreKind) async throws {
        let (store, box) = try kind.make(minimumPartSize: 1)
        defer { withExtendedLifetime(box) {} }
        try await store.createBucket("sums")
        let pieces = ["first part ", "second", " and third"]
        let whole = pieces.joined()
        func upload(_ checksum: UploadChecksum?, _ key: String) async throws -> (MultipartUpload, [PartInfo]) {
            let upload = try await store.createMultipartUpload(bucket: "sums", key: key, metadata: ObjectMetadata(), checksum: checksum)
            var parts: [PartInfo] = []
            for (index, piece) in pieces.enumerated() {
                parts.append(try await store.uploadPart(bucket: "sums", key: key, uploadID: upload.uploadID, partNumber: index + 1, body: body(piece),
                                                        options: try Self.writing(piece, checksum?.algorithm)))
            }
            return (upload, parts)
        }
        func listed(_ parts: [PartInfo]) -> [CompletedPart] {
            parts.map { CompletedPart(partNumber: $0.partNumber, etag: $0.etag, checksum: $0.checksums.additional) }
        }

        // COMPOSITE: the digest of the parts' digests, with their count; the CRC-64 of the whole.
        let (composite, compositeParts) = try await upload(UploadChecksum(algorithm: .sha1, fullObject: false), "composite")
        #expect(try await store.listParts(bucket: "sums", key: "composite", uploadID: composite.uploadID, partNumberMarker: 0, maxParts: 10).upload.checksum
                == UploadChecksum(algorithm: .sha1, fullObject: false))
        #expect(try await store.listParts(bucket: "sums", key: "composite", uploadID: composite.uploadID, partNumberMarker: 0, maxParts: 10).parts.map(\.checksums)
                == (try pieces.map { try Self.checksums($0, .sha1) }))
        // A part listed with another checksum than its own is not that part.
        var wrong = listed(compositeParts)
        wrong[1].checksum = AdditionalChecksum(algorithm: .sha1, digest: [UInt8](repeating: 0, count: 20))
        #expect(await storeError { _ = try await store.completeMultipartUpload(bucket: "sums", key: "composite", uploadID: composite.uploadID, parts: wrong) }
                == .invalidPart(partNumber: 2))
        let completed = try await store.completeMultipartUpload(bucket: "sums", key: "composite", uploadID: composite.uploadID, parts: listed(compositeParts))
        let digestOfDigests = try Crypto.sha1(compositeParts.flatMap { $0.checksums.additional!.digest })
        #expect(completed.checksums == ObjectChecksums(additional: AdditionalChecksum(algorithm: .sha1, digest: digestOfDigests, partCount: 3),
                                                       crc64ecma: try Self.checksums(whole).crc64ecma))
        #expect(try await store.headObject(bucket: "sums", key: "composite").checksums == completed.checksums)
        // A copy of it keeps the CRC-64 but not the composite checksum, which describes parts.
        let copy = try await store.copyObject(from: .init(bucket: "sums", key: "composite"), to: .init(bucket: "sums", key: "copy"), metadata: .source, options: CopyOptions())
        #expect(copy.checksums == ObjectChecksums(crc64ecma: completed.checksums.crc64ecma))

        // FULL_OBJECT: the parts' CRCs combined into the CRC of the whole; a stated checksum must match.
        let (full, fullParts) = try await upload(UploadChecksum(algorithm: .crc32c, fullObject: true), "full")
        let expected = try Self.checksums(whole, .crc32c)
        var off = expected.additional!
        off.digest[0] ^= 1
        #expect(await storeError {
            _ = try await store.completeMultipartUpload(bucket: "sums", key: "full", uploadID: full.uploadID, parts: listed(fullParts),
                                                        options: CompleteOptions(expectedChecksum: off))
        } == .checksumMismatch(.crc32c))
        let fullObject = try await store.completeMultipartUpload(bucket: "sums", key: "full", uploadID: full.uploadID, parts: listed(fullParts),
                                                                 options: CompleteOptions(expectedChecksum: expected.additional))
        #expect(fullObject.checksums == expected)
        // Tags given at initiation are the object's once it completes.
        let tagged = try await store.createMultipartUpload(bucket: "sums", key: "tagged-mp", metadata: ObjectMetadata(tags: ["m": "1"]), checksum: nil)
        let taggedPart = try await store.uploadPart(bucket: "sums", key: "tagged-mp", uploadID: tagged.uploadID, partNumber: 1, body: body("p"),
                                                    options: try Self.writing("p"))
        _ = try await store.completeMultipartUpload(bucket: "sums", key: "tagged-mp", uploadID: tagged.uploadID, parts: listed([taggedPart]))
        #expect(try await store.objectTags(bucket: "sums", key: "tagged-mp") == ["m": "1"])

        // A part with another algorithm than its upload's is refused; one without any leaves the
        // object without the upload's checksum.
        let mixed = try await store.createMultipartUpload(bucket: "sums", key: "mixed", metadata: ObjectMetadata(), checksum: UploadChecksum(algorithm: .crc32, fullObject: false))
        #expect(await storeError {
            _ = try await store.uploadPart(bucket: "sums", key: "mixed", uploadID: mixed.uploadID, partNumber: 1, body: body("x"), options: try Self.writing("x", .sha256))
        } == .checksumAlgorithmMismatch(expected: .crc32, actual: .sha256))
        let bare = try await store.uploadPart(bucket: "sums", key: "mixed", uploadID: mixed.uploadID, partNumber: 1, body: body("x"), options: WriteOptions())
        let mixedObject = try await store.completeMultipartUpload(bucket: "sums", key: "mixed", uploadID: mixed.uploadID, parts: listed([bare]))
        #expect(mixedObject.checksums == .none)
    }

    @Test func listingsAgree() async throws {
        let keys = ["a", "a/", "a/b", "a/b/c", "a/c", "a//d", "ab", "b/x", "b/y/z", "c", "é/1", "é/2", "z"]
        var stores: [any ObjectStore] = []
        var boxes: [Sandbox?] = []
        for kind in StoreKind.allCases {
            let (store, box) = try kind.make(maxUploadsPerBucket: 100)
            try await store.createBucket("list")
            for key in keys {
                _ = try await store.putObject(bucket: "list", key: key, body: body(key))
                _ = try await store.createMultipartUpload(bucket: "list", key: key, metadata: ObjectMetadata())
            }
            stores.append(store)
            boxes.append(box)
        }
        defer { withExtendedLifetime(boxes) {} }
        var queries: [ListQuery] = []
        for prefix in ["", "a", "a/", "b/", "é", "zz"] {
            for delimiter in [nil, "/", "b", "//"] {
                for maxKeys in [0, 1, 2, 1000] {
                    for startAfter in [nil, "a/", "a/b", "b"] {
                        queries.append(ListQuery(prefix: prefix, delimiter: delimiter, startAfter: startAfter, maxKeys: maxKeys))
                    }
                }
            }
        }
        for query in queries {
            var pages: [[ListResult]] = []
            for store in stores {
                var all: [ListResult] = []
                var next = query
                while all.count < 20 {
                    let page = try await store.listObjects(bucket: "list", query: next)
                    all.append(page)
                    guard page.isTruncated, let token = page.nextContinuationToken else { break }
                    next.continuationToken = token
                }
                pages.append(all)
            }
            for other in pages.dropFirst() {
                #expect(other.map(\.comparable) == pages[0].map(\.comparable), "\(query)")
            }
        }
        for prefix in ["", "a", "a/", "b/"] {
            for delimiter in [nil, "/"] {
                for maxUploads in [0, 1, 2, 1000] {
                    for keyMarker in [nil, "a/", "a/b", "b"] {
                        var walks: [[String]] = []
                        for store in stores {
                            var seen: [String] = []
                            var query = ListUploadsQuery(prefix: prefix, delimiter: delimiter, keyMarker: keyMarker, maxUploads: maxUploads)
                            for _ in 0..<20 {
                                let page = try await store.listMultipartUploads(bucket: "list", query: query)
                                seen += page.uploads.map(\.key) + page.commonPrefixes.map { "prefix:" + $0 } + ["truncated:\(page.isTruncated)"]
                                guard page.isTruncated else { break }
                                query.keyMarker = page.nextKeyMarker
                                query.uploadIDMarker = page.nextUploadIDMarker
                            }
                            walks.append(seen)
                        }
                        for other in walks.dropFirst() {
                            #expect(other == walks[0], "\(prefix) \(String(describing: delimiter)) \(maxUploads) \(String(describing: keyMarker))")
                        }
                    }
                }
            }
        }
    }
}

/// Two reads of the same object version: equal, but that a store on a backend's clock has its
/// times in whole seconds, taken by different requests (within two seconds of each other).
func same(_ a: ObjectInfo, _ b: ObjectInfo, _ kind: StoreKind) -> Bool {
    if kind.exactClock { return a == b }
    return a.bucket == b.bucket && a.key == b.key && a.size == b.size && a.etag == b.etag && a.metadata == b.metadata
        && a.isAppendable == b.isAppendable && a.checksums == b.checksums && a.tagCount == b.tagCount && sameTime(a.lastModified, b.lastModified, kind)
}

func sameTime(_ a: Date, _ b: Date, _ kind: StoreKind) -> Bool {
    kind.exactClock ? a == b : abs(a.timeIntervalSince(b)) <= 2
}

extension ObjectMetadata {
    var withoutTags: ObjectMetadata {
        var copy = self
        copy.tags = [:]
        return copy
    }
}

extension ListResult {
    /// The page without its objects' times (each store has its own clock).
    var comparable: String {
        "\(objects.map { "\($0.key) \($0.size) \($0.etag)" }) \(commonPrefixes) \(isTruncated) \(nextMarker ?? "-") \(nextContinuationToken ?? "-")"
    }
}

/// What each store says it can do, which the gateway acts on (the fast path, AppendObject, the
/// read size of uploads, zero-copy sends).
@Test func capabilitiesSayWhatEachStoreCan() throws {
    for kind in StoreKind.allCases {
        let (store, box) = try kind.make()
        defer { withExtendedLifetime(box) {} }
        let capabilities = store.capabilities
        #expect(capabilities.backend == (kind == .s3 ? "s3" : kind.rawValue))
        #expect(capabilities.appends && capabilities.storesChecksums && capabilities.storesCRC64 && !capabilities.versions)
        #expect(capabilities.zeroCopyReads == (kind == .local))
        #expect(capabilities.readsAtOnce == (kind != .s3))
        #expect(capabilities.uploadReadSize == (kind == .local ? 256 * 1024 : nil))
    }
    let (noAppends, _) = (try S3TestBackend(endpoint: "http://127.0.0.1:1", accessKey: "k", secretKey: "s", region: "us-east-1")
        .store { $0.appendableObjects = false; $0.backendMinimumPartSize = 5 * 1024 * 1024 }, 0)
    #expect(!noAppends.capabilities.appends && noAppends.capabilities.minimumPartSize == 5 * 1024 * 1024)
}

/// Expiry (`UploadExpiry` runs it): uploads initiated before the cutoff go with their parts,
/// later ones stay.
@Test(arguments: StoreKind.allCases)
func expiringUploads(kind: StoreKind) async throws {
    let (store, box) = try kind.make()
    defer { withExtendedLifetime(box) {} }
    try await store.createBucket("old-uploads")
    let upload = try await store.createMultipartUpload(bucket: "old-uploads", key: "k", metadata: ObjectMetadata())
    _ = try await store.uploadPart(bucket: "old-uploads", key: "k", uploadID: upload.uploadID, partNumber: 1, body: Chunks("part"), options: WriteOptions())
    #expect(try await store.expireUploads(initiatedBefore: upload.initiated.addingTimeInterval(-60)) == 0)
    #expect(try await store.listParts(bucket: "old-uploads", key: "k", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10).parts.count == 1)
    #expect(try await store.expireUploads(initiatedBefore: upload.initiated.addingTimeInterval(60)) == 1)
    #expect(await storeError {
        _ = try await store.listParts(bucket: "old-uploads", key: "k", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 10)
    } == .noSuchUpload(uploadID: upload.uploadID))
    #expect(try await store.listMultipartUploads(bucket: "old-uploads", query: ListUploadsQuery()).uploads.isEmpty)
}

/// An appendable object keeps the tags of its first append (later appends' metadata is not the
/// object's), and DeleteObjects deletes keys that XML cannot carry.
@Test(arguments: StoreKind.allCases)
func appendTagsAndOddKeys(kind: StoreKind) async throws {
    let (store, box) = try kind.make()
    defer { withExtendedLifetime(box) {} }
    try await store.createBucket("odd")
    func append(at position: Int64, _ content: String, tags: [String: String]) async throws -> ObjectInfo {
        try await store.appendObject(bucket: "odd", key: "log", position: position, body: Chunks(content),
                                     metadata: ObjectMetadata(contentType: "text/log", tags: tags), options: try StoreConformanceTests.writing(content))
    }
    _ = try await append(at: 0, "one\n", tags: ["stage": "first"])
    let last = try await append(at: 4, "two\n", tags: ["stage": "second"])
    let whole = try StoreConformanceTests.checksums("one\ntwo\n").crc64ecma
    #expect(last.tagCount == 1 && last.checksums.crc64ecma == whole)
    #expect(try await store.objectTags(bucket: "odd", key: "log") == ["stage": "first"])
    let keys = ["ctl/a\u{1}b", "ctl/line\nbreak", "ctl/cr\rhere", "ctl/amp & <lt> \"q\"", "ctl/\u{1f}end ✓"]
    for key in keys { _ = try await store.putObject(bucket: "odd", key: key, body: Chunks("x")) }
    #expect(try await store.deleteObjects(bucket: "odd", keys: keys) == keys.map { DeleteResult(key: $0, error: nil) })
    #expect(try await store.listObjects(bucket: "odd", query: ListQuery(prefix: "ctl/")).objects.isEmpty)
}

/// The S3 store's answers are read through `ResponsePipe`: a body dropped after its first piece
/// lets its connection go (the request is cancelled), so with two connections to the backend the
/// reads after twelve abandoned ones still get whole, correct bodies before the request timeout.
@Test(.enabled(if: S3TestBackend.current != nil))
func s3BodiesReadAheadBoundedAndLetGoWhenDropped() async throws {
    let store = try S3TestBackend.current!.store { configuration in
        configuration.connectionsPerHost = 2
        configuration.requestTimeout = .seconds(8)
    }
    defer { Task { try? await store.close() } }
    try await store.createBucket("pipe")
    let total = 5 * 1024 * 1024 + 17
    let expectedMD5 = try await GeneratedBody(total: total, chunkSize: 1 << 20).md5()
    _ = try await store.putObject(bucket: "pipe", key: "big", body: GeneratedBody(total: total, chunkSize: 1 << 20),
                                  metadata: ObjectMetadata(), options: WriteOptions())
    let started = ContinuousClock.now
    for _ in 0..<12 {
        let read = try await store.getObject(bucket: "pipe", key: "big", range: nil)
        var iterator = read.body.makeAsyncIterator()
        #expect(try await iterator.next() != nil)
    }
    for _ in 0..<3 {
        let read = try await store.getObject(bucket: "pipe", key: "big", range: nil)
        let digest = try StreamingDigest(.md5)
        var received = 0
        var largest = 0
        for try await buffer in read.body {
            received += buffer.readableBytes
            largest = max(largest, buffer.readableBytes)
            try buffer.withUnsafeReadableBytes { try digest.update($0) }
        }
        #expect(received == total)
        #expect(largest <= ResponsePipe.readAhead)
        #expect(try digest.finalize() == expectedMD5)
    }
    // Twelve connections left hanging would each hold the pool until the 8 s timeout.
    #expect(ContinuousClock.now - started < .seconds(8))
}

/// A consumer slower than the backend takes what has arrived in batches of several parts (which
/// the gateway writes at once), each within `ResponsePipe.batchLimit` but for its last part, and
/// gets every byte in order.
@Test(.enabled(if: S3TestBackend.current != nil))
func s3BodiesHandOverWhatHasArrivedInBatches() async throws {
    let store = try S3TestBackend.current!.store()
    defer { Task { try? await store.close() } }
    try await store.createBucket("batches")
    let total = 4 * 1024 * 1024 + 5
    let expectedMD5 = try await GeneratedBody(total: total, chunkSize: 1 << 20).md5()
    _ = try await store.putObject(bucket: "batches", key: "big", body: GeneratedBody(total: total, chunkSize: 1 << 20),
                                  metadata: ObjectMetadata(), options: WriteOptions())
    let read = try await store.getObject(bucket: "batches", key: "big", range: nil)
    let digest = try StreamingDigest(.md5)
    var received = 0, mostParts = 0
    for try await batch in read.body.batches {
        #expect(!batch.isEmpty)
        let bytes = batch.reduce(0) { $0 + $1.readableBytes }
        received += bytes
        #expect(bytes - batch.last!.readableBytes < ResponsePipe.batchLimit)
        mostParts = max(mostParts, batch.count)
        for part in batch { try part.withUnsafeReadableBytes { try digest.update($0) } }
        try await Task.sleep(for: .milliseconds(20))
    }
    #expect(received == total)
    #expect(try digest.finalize() == expectedMD5)
    #expect(mostParts > 1, "parts that arrived while the consumer slept come together")
}
