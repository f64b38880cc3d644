import TollgateStore
import Foundation
import NIOCore
import Synchronization
import TollgateCORS
import TollgateCrypto

/// An `ObjectStore` held in memory: the local store's twin for tests of everything above the
/// store (handlers go through the protocol alone). Same rules as `LocalObjectStore` for what
/// the gateway uses: names, preconditions at the commit, ranges, multipart with a minimum part
/// size and an upload limit, appends, listings with delimiters and markers, copies, deletes.
/// Bodies are collected whole before their commit; nothing is durable.
public final class MemoryObjectStore: ObjectStore {
    private struct StoredBytes {
        var info: ObjectInfo
        var bytes: ByteBuffer
    }

    private struct Part {
        var info: PartInfo
        var bytes: ByteBuffer
        /// Which upload of this part number it is, to see at completion that none was replaced.
        var version: UInt64
    }

    private struct Upload {
        var upload: MultipartUpload
        var parts: [Int: Part] = [:]
    }

    private struct State {
        var buckets: [String: Date] = [:]
        var cors: [String: CORSConfiguration] = [:]
        var objects: [String: [String: StoredBytes]] = [:]
        var uploads: [String: Upload] = [:]
        /// Uploads completed, to answer retries of their CompleteMultipartUpload.
        var completed: [String: CompletedUploadRecord] = [:]
        var uploadLimit: Int
        var versions: UInt64 = 0

        func requireBucket(_ bucket: String) throws(StoreError) {
            guard buckets[bucket] != nil else { throw .noSuchBucket(bucket: bucket) }
        }

        func object(_ bucket: String, _ key: String) throws(StoreError) -> StoredBytes {
            if let object = objects[bucket]?[key] { return object }
            try requireBucket(bucket)
            throw .noSuchKey(bucket: bucket, key: key)
        }

        func upload(_ bucket: String, _ key: String, _ uploadID: String) throws(StoreError) -> Upload {
            if let upload = uploads[uploadID], upload.upload.bucket == bucket, upload.upload.key == key { return upload }
            try requireBucket(bucket)
            throw .noSuchUpload(uploadID: uploadID)
        }
    }

    private let state: Mutex<State>
    private let minimumPartSize: Int64
    private let clock: @Sendable () -> Date

    /// The parameters mirror `LocalObjectStore.Configuration`'s.
    public init(minimumPartSize: Int64 = 5 * 1024 * 1024, maxUploadsPerBucket: Int = 1000, now: @escaping @Sendable () -> Date = { Date() }) {
        state = Mutex(State(uploadLimit: maxUploadsPerBucket))
        self.minimumPartSize = minimumPartSize
        clock = now
    }

    /// Changes the limit for uploads created from now on.
    public func setMaxUploadsPerBucket(_ limit: Int) {
        state.withLock { $0.uploadLimit = limit }
    }

    // MARK: Lifecycle

    public var capabilities: StoreCapabilities {
        StoreCapabilities(backend: "memory", appends: true, storesChecksums: true, storesCRC64: true,
                          minimumPartSize: minimumPartSize, zeroCopyReads: false, readsAtOnce: true)
    }

    public func open() async throws {}
    public func health() async -> StoreHealth { .ok }
    public func close() async throws {}

    public func expireUploads(initiatedBefore cutoff: Date) async throws -> Int {
        state.withLock { state in
            let expired = state.uploads.filter { $0.value.upload.initiated < cutoff }.map(\.key)
            for id in expired { state.uploads[id] = nil }
            return expired.count
        }
    }

    public func objectTags(bucket: String, key: String) async throws -> [String: String] {
        try await headObject(bucket: bucket, key: key).metadata.tags
    }

    /// Milliseconds, as the local store keeps them.
    private func now() -> Date {
        Millis.date(Millis.from(clock()))
    }

    private static func collect<Body: AsyncSequence>(_ body: Body) async throws -> ByteBuffer where Body.Element == ByteBuffer {
        var all = ByteBuffer()
        for try await var buffer in body { all.writeBuffer(&buffer) }
        return all
    }

    /// The body's bytes and their MD5, refused with `badDigest` when that is not `expectedMD5`.
    private static func collect<Body: AsyncSequence>(
        _ body: Body, expectedMD5: [UInt8]?
    ) async throws -> (bytes: ByteBuffer, md5: [UInt8]) where Body.Element == ByteBuffer {
        let bytes = try await collect(body)
        let md5 = try md5(bytes)
        if let expectedMD5, expectedMD5 != md5 { throw StoreError.badDigest }
        return (bytes, md5)
    }

    private static func md5(_ bytes: ByteBuffer) throws -> [UInt8] {
        try bytes.withUnsafeReadableBytes { pointer in
            let digest = try StreamingDigest(.md5)
            try digest.update(pointer)
            return try digest.finalize()
        }
    }

    // MARK: Buckets

    public func listBuckets() async throws -> [BucketInfo] {
        state.withLock { state in
            state.buckets.map { BucketInfo(name: $0.key, creationDate: $0.value) }.sorted { $0.name < $1.name }
        }
    }

    @discardableResult
    public func createBucket(_ name: String) async throws -> BucketInfo {
        try StoreNames.validateBucket(name)
        let info = BucketInfo(name: name, creationDate: now())
        try state.withLock { (state) throws(StoreError) in
            guard state.buckets[name] == nil else { throw .bucketExists(bucket: name) }
            state.buckets[name] = info.creationDate
        }
        return info
    }

    public func headBucket(_ name: String) async throws -> BucketInfo {
        try state.withLock { (state) throws(StoreError) in
            guard let created = state.buckets[name] else { throw .noSuchBucket(bucket: name) }
            return BucketInfo(name: name, creationDate: created)
        }
    }

    public func setObjectTags(bucket: String, key: String, tags: [String: String]) async throws {
        try StoreNames.validateKey(key)
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            guard let stored = state.objects[bucket]?[key] else { throw .noSuchKey(bucket: bucket, key: key) }
            let info = stored.info
            var metadata = info.metadata
            metadata.tags = tags
            state.objects[bucket]?[key]?.info = ObjectInfo(bucket: info.bucket, key: info.key, size: info.size, etag: info.etag,
                                                           lastModified: info.lastModified, metadata: metadata, isAppendable: info.isAppendable,
                                                           checksums: info.checksums)
        }
    }

    public func bucketStats(_ name: String) async throws -> BucketStats {
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(name)
            let objects = state.objects[name]?.values.map(\.info) ?? []
            let uploads = state.uploads.values.filter { $0.upload.bucket == name }
            return BucketStats(
                objectCount: Int64(objects.count), storageBytes: objects.reduce(0) { $0 + $1.size },
                multipartUploadCount: Int64(uploads.count), multipartPartCount: Int64(uploads.reduce(0) { $0 + $1.parts.count }),
                lastModified: objects.map(\.lastModified).max()
            )
        }
    }

    public func deleteBucket(_ name: String) async throws {
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(name)
            if !(state.objects[name]?.isEmpty ?? true) { throw .bucketNotEmpty(bucket: name) }
            state.uploads = state.uploads.filter { $0.value.upload.bucket != name }
            state.buckets[name] = nil
            state.objects[name] = nil
            state.cors[name] = nil
        }
    }

    @discardableResult
    public func ensureBuckets(_ names: [String]) async throws -> [String] {
        for name in names { try StoreNames.validateBucket(name) }
        let created = now()
        return state.withLock { state in
            var added: [String] = []
            for name in names where state.buckets[name] == nil {
                state.buckets[name] = created
                added.append(name)
            }
            return added
        }
    }

    // MARK: Bucket CORS

    public func bucketCORS(_ bucket: String) async throws -> CORSConfiguration? {
        state.withLock { $0.cors[bucket] }
    }

    public func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws {
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            state.cors[bucket] = configuration
        }
    }

    public func deleteBucketCORS(_ bucket: String) async throws {
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            state.cors[bucket] = nil
        }
    }

    // MARK: Objects

    /// Commits `bytes` as `bucket/key` if the bucket exists, the preconditions hold against the
    /// current version and `check` accepts it.
    private func commit(
        bucket: String, key: String, bytes: ByteBuffer, etag: String, metadata: ObjectMetadata, appendable: Bool,
        checksums: ObjectChecksums, preconditions: WritePreconditions, check: ((ObjectInfo?) throws -> Void)? = nil,
        completing: (uploadID: String, versions: [Int: UInt64])? = nil
    ) throws -> ObjectInfo {
        let info = ObjectInfo(
            bucket: bucket, key: key, size: Int64(bytes.readableBytes), etag: etag, lastModified: now(), metadata: metadata,
            isAppendable: appendable, checksums: checksums
        )
        try state.withLock { state in
            try state.requireBucket(bucket)
            let current = state.objects[bucket]?[key]?.info
            try preconditions.check(against: current)
            try check?(current)
            if let completing {
                let upload = try state.upload(bucket, key, completing.uploadID)
                for (number, version) in completing.versions.sorted(by: { $0.key < $1.key }) where upload.parts[number]?.version != version {
                    throw StoreError.invalidPart(partNumber: number)
                }
                state.uploads[completing.uploadID] = nil
                state.completed[completing.uploadID] = CompletedUploadRecord(bucket: bucket, key: key, etag: etag)
            }
            state.objects[bucket, default: [:]][key] = StoredBytes(info: info, bytes: bytes)
        }
        return info
    }

    public func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        _ = try await headBucket(bucket)
        let (bytes, md5) = try await Self.collect(body, expectedMD5: options.expectedMD5)
        return try commit(
            bucket: bucket, key: key, bytes: bytes, etag: ETag.quoted(md5: md5), metadata: metadata,
            appendable: false, checksums: options.bodyChecksums?() ?? .none, preconditions: options.preconditions
        )
    }

    public func getObject(bucket: String, key: String, range: ByteRange?) async throws -> ObjectRead {
        let object = try state.withLock { (state) throws(StoreError) in try state.object(bucket, key) }
        return try ObjectInMemory(info: object.info, bytes: object.bytes).read(range: range)
    }

    /// Every object: all of them are in memory.
    public func readAtOnce(bucket: String, key: String, range: ByteRange?) throws -> ReadAtOnce? {
        guard let object = state.withLock({ try? $0.object(bucket, key) }) else { return nil }
        return .read(try ObjectInMemory(info: object.info, bytes: object.bytes).read(range: range))
    }

    public func infoInMemory(bucket: String, key: String) -> ObjectInfo? {
        state.withLock { try? $0.object(bucket, key).info }
    }

    public func headObject(bucket: String, key: String) async throws -> ObjectInfo {
        try state.withLock { (state) throws(StoreError) in try state.object(bucket, key).info }
    }

    public func deleteObject(bucket: String, key: String) async throws {
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            state.objects[bucket]?[key] = nil
        }
    }

    public func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult] {
        var results: [DeleteResult] = []
        var valid: [String] = []
        for key in keys {
            do { try StoreNames.validateKey(key); valid.append(key); results.append(DeleteResult(key: key, error: nil)) } catch {
                results.append(DeleteResult(key: key, error: error))
            }
        }
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            for key in valid { state.objects[bucket]?[key] = nil }
        }
        return results
    }

    public func copyObject(
        from source: ObjectLocation, to target: ObjectLocation, metadata: CopyMetadata, options: CopyOptions
    ) async throws -> ObjectInfo {
        try StoreNames.validateBucket(target.bucket)
        try StoreNames.validateKey(target.key)
        _ = try await headBucket(target.bucket)
        let read = try await getObject(bucket: source.bucket, key: source.key, range: nil)
        try options.sourceConditions.check(read.info)
        let bytes = try await Self.collect(read.body)
        return try commit(
            bucket: target.bucket, key: target.key, bytes: bytes, etag: ETag.quoted(md5: try Self.md5(bytes)),
            metadata: metadata.resolved(source: read.info.metadata), appendable: false, checksums: read.info.checksums.ofCopy,
            preconditions: options.preconditions
        )
    }

    public func appendObject<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        guard position >= 0 else { throw StoreError.negativePosition }
        _ = try await headBucket(bucket)
        let current = state.withLock { $0.objects[bucket]?[key]?.info }
        guard let current else {
            guard position == 0 else { throw StoreError.positionNotEqualToLength(next: 0) }
            let (bytes, md5) = try await Self.collect(body, expectedMD5: options.expectedMD5)
            return try commit(
                bucket: bucket, key: key, bytes: bytes, etag: ETag.quoted(md5: md5), metadata: metadata,
                appendable: true, checksums: ObjectChecksums(crc64ecma: options.bodyChecksums?().crc64ecma), preconditions: options.preconditions,
                check: { existing in
                    if let existing { throw existing.appendRefusal(position: position) ?? StoreError.positionNotEqualToLength(next: existing.size) }
                }
            )
        }
        if let refusal = current.appendRefusal(position: position) { throw refusal }
        try options.preconditions.check(against: current)
        var (appended, appendedMD5) = try await Self.collect(body, expectedMD5: options.expectedMD5)
        let appendedChecksums = options.bodyChecksums?() ?? .none
        let chained = try Crypto.md5(Array(ETag.normalize(current.etag).utf8) + appendedMD5)
        let lastModified = now()
        return try state.withLock { state in
            guard var object = state.objects[bucket]?[key] else { throw StoreError.positionNotEqualToLength(next: 0) }
            if let refusal = object.info.appendRefusal(position: position) { throw refusal }
            try options.preconditions.check(against: object.info)
            let length = Int64(appended.readableBytes)
            object.bytes.writeBuffer(&appended)
            object.info = ObjectInfo(
                bucket: bucket, key: key, size: Int64(object.bytes.readableBytes), etag: ETag.quoted(md5: chained),
                lastModified: lastModified, metadata: object.info.metadata, isAppendable: true,
                checksums: object.info.checksums.appending(appendedChecksums, length: length)
            )
            state.objects[bucket]?[key] = object
            return object.info
        }
    }

    public func listObjects(bucket: String, query: ListQuery) async throws -> ListResult {
        let walk = try ListWalk(query)
        let sorted = try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            return (state.objects[bucket] ?? [:]).values.map { (key: Array($0.info.key.utf8), info: $0.info) }
                .sorted { KeyBytes.less($0.key, $1.key) }
        }
        return try walk.run { cursor, limit in
            var rest = sorted.lazy.filter { entry in
                cursor.admits(entry.key) && (walk.upper.map { KeyBytes.less(entry.key, $0) } ?? true)
            }.prefix(limit).makeIterator()
            return {
                guard let next = rest.next() else { return nil }
                return (next.key, { ObjectSummary(key: next.info.key, size: next.info.size, etag: next.info.etag, lastModified: next.info.lastModified) })
            }
        }
    }

    // MARK: Multipart

    public func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata, checksum: UploadChecksum?) async throws -> MultipartUpload {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        let upload = MultipartUpload(
            bucket: bucket, key: key, uploadID: Hex.encode(try Crypto.randomBytes(count: 16)), initiated: now(), metadata: metadata,
            checksum: checksum
        )
        try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            let limit = state.uploadLimit
            guard state.uploads.values.count(where: { $0.upload.bucket == bucket }) < limit else {
                throw .tooManyUploads(bucket: bucket, limit: limit)
            }
            state.uploads[upload.uploadID] = Upload(upload: upload)
        }
        return upload
    }

    private func commitPart(bucket: String, key: String, uploadID: String, partNumber: Int, bytes: ByteBuffer, md5: [UInt8],
                            checksums: ObjectChecksums) throws -> PartInfo {
        let info = PartInfo(partNumber: partNumber, etag: ETag.quoted(md5: md5), size: Int64(bytes.readableBytes), lastModified: now(),
                            checksums: checksums)
        try state.withLock { (state) throws(StoreError) in
            _ = try state.upload(bucket, key, uploadID)
            state.versions += 1
            state.uploads[uploadID]?.parts[partNumber] = Part(info: info, bytes: bytes, version: state.versions)
        }
        return info
    }

    public func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try MultipartRules.validatePartNumber(partNumber)
        let upload = try state.withLock { (state) throws(StoreError) in try state.upload(bucket, key, uploadID) }
        let (bytes, md5) = try await Self.collect(body, expectedMD5: options.expectedMD5)
        let checksums = options.bodyChecksums?() ?? .none
        try MultipartRules.checkPartChecksum(checksums, upload: upload.upload)
        return try commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, bytes: bytes, md5: md5, checksums: checksums)
    }

    public func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int, source: ObjectLocation, range: ByteRange?, options: CopyOptions
    ) async throws -> PartInfo {
        try MultipartRules.validatePartNumber(partNumber)
        _ = try state.withLock { (state) throws(StoreError) in try state.upload(bucket, key, uploadID) }
        let read = try await getObject(bucket: source.bucket, key: source.key, range: range)
        try options.sourceConditions.check(read.info)
        let (bytes, md5) = try await Self.collect(read.body, expectedMD5: nil)
        return try commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, bytes: bytes, md5: md5,
                              checksums: range == nil ? read.info.checksums.ofCopy : .none)
    }

    public func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int, maxParts: Int) async throws -> ListPartsResult {
        let limit = Swift.max(0, Swift.min(maxParts, 1000))
        let upload = try state.withLock { (state) throws(StoreError) in try state.upload(bucket, key, uploadID) }
        let after = upload.parts.values.map(\.info).filter { $0.partNumber > Swift.max(0, partNumberMarker) }.sorted { $0.partNumber < $1.partNumber }
        let parts = Array(after.prefix(limit))
        let truncated = after.count > limit
        return ListPartsResult(upload: upload.upload, parts: parts, isTruncated: truncated, nextPartNumberMarker: truncated ? parts.last?.partNumber : nil)
    }

    public func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
        let all = try state.withLock { (state) throws(StoreError) in
            try state.requireBucket(bucket)
            return state.uploads.values.map(\.upload).filter { $0.bucket == bucket }
        }
        return UploadListing.page(all, query: query)
    }

    public func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        try state.withLock { (state) throws(StoreError) in
            _ = try state.upload(bucket, key, uploadID)
            state.uploads[uploadID] = nil
        }
    }

    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], options: CompleteOptions
    ) async throws -> ObjectInfo {
        try MultipartRules.validate(parts)
        let (found, completed, current) = state.withLock { state in
            (state.uploads[uploadID], state.completed[uploadID], state.objects[bucket]?[key]?.info)
        }
        // Completed already? The same request again gets the same answer (S3 and RGW do).
        if found == nil, MultipartRules.isRetry(bucket: bucket, key: key, parts: parts, completed: completed, current: current), let current {
            return current
        }
        let upload = try state.withLock { (state) throws(StoreError) in try state.upload(bucket, key, uploadID) }
        let chosen = try MultipartRules.choose(parts, from: upload.parts, info: \.info, minimumPartSize: options.minimumPartSize ?? self.minimumPartSize)
        let checksums = try MultipartRules.checksums(of: chosen.map(\.info), upload: upload.upload.checksum, expected: options.expectedChecksum)
        var bytes = ByteBuffer()
        for part in chosen {
            var copy = part.bytes
            bytes.writeBuffer(&copy)
        }
        return try commit(
            bucket: bucket, key: key, bytes: bytes, etag: try MultipartRules.etag(chosen.map(\.info)), metadata: upload.upload.metadata,
            appendable: false, checksums: checksums, preconditions: options.preconditions,
            completing: (uploadID, Dictionary(uniqueKeysWithValues: chosen.map { ($0.info.partNumber, $0.version) }))
        )
    }
}
