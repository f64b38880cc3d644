import NIOCore
import TollgateCORS
import Foundation
import TollgateMemoryStore
import TollgateStore

/// The in-memory store with hooks where a test needs one: `beforeCopy` runs at the start of
/// every `copyObject`, before the source is opened (a write landing between a copy's request
/// and the store's work); `writeOptions` sees, and may change, what every put, part and append
/// is told; `putBuffer` sees the size of each buffer of a put's body as the store reads it.
/// Every other call goes straight to `base`.
struct HookedStore: ObjectStore {
    let base: MemoryObjectStore
    var beforeCopy: @Sendable (MemoryObjectStore) async throws -> Void = { _ in }
    var writeOptions: @Sendable (WriteOptions) -> WriteOptions = { $0 }
    var putBuffer: @Sendable (Int) -> Void = { _ in }
    /// Like a remote store: nothing at hand (`readAtOnce`, `infoInMemory` answer nil), and
    /// every body streams rather than sitting in memory.
    var remoteLike = false
    /// Sees every `getObject`.
    var onGet: @Sendable () -> Void = {}
    /// What `health` answers (the base's when nil).
    var reportedHealth: StoreHealth? = nil

    /// A body handed over in pieces of at most 1000 bytes, as a stream.
    struct Streamed: AsyncSequence, Sendable {
        let bytes: ByteBuffer
        struct AsyncIterator: AsyncIteratorProtocol {
            var rest: ByteBuffer
            mutating func next() async throws -> ByteBuffer? {
                guard rest.readableBytes > 0 else { return nil }
                return rest.readSlice(length: Swift.min(1000, rest.readableBytes))
            }
        }
        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rest: bytes) }
    }

    /// A body that tells `seen` the size of each buffer it yields.
    struct Watched<Base: AsyncSequence>: AsyncSequence where Base.Element == ByteBuffer {
        let base: Base
        let seen: @Sendable (Int) -> Void

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: Base.AsyncIterator
            let seen: @Sendable (Int) -> Void
            mutating func next() async throws -> ByteBuffer? {
                let buffer = try await base.next()
                if let buffer { seen(buffer.readableBytes) }
                return buffer
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), seen: seen) }
    }

    func copyObject(from source: ObjectLocation, to target: ObjectLocation, metadata: CopyMetadata, options: CopyOptions) async throws -> ObjectInfo {
        try await beforeCopy(base)
        return try await base.copyObject(from: source, to: target, metadata: metadata, options: options)
    }

    var capabilities: StoreCapabilities { base.capabilities }
    func open() async throws { try await base.open() }
    func health() async -> StoreHealth { if let reportedHealth { reportedHealth } else { await base.health() } }
    func close() async throws { try await base.close() }
    func expireUploads(initiatedBefore cutoff: Date) async throws -> Int { try await base.expireUploads(initiatedBefore: cutoff) }
    func setMaxUploadsPerBucket(_ limit: Int) { base.setMaxUploadsPerBucket(limit) }
    func objectTags(bucket: String, key: String) async throws -> [String: String] { try await base.objectTags(bucket: bucket, key: key) }
    func listBuckets() async throws -> [BucketInfo] { try await base.listBuckets() }
    func createBucket(_ name: String) async throws -> BucketInfo { try await base.createBucket(name) }
    func headBucket(_ name: String) async throws -> BucketInfo { try await base.headBucket(name) }
    func setObjectTags(bucket: String, key: String, tags: [String: String]) async throws {
        try await base.setObjectTags(bucket: bucket, key: key, tags: tags)
    }
    func bucketStats(_ name: String) async throws -> BucketStats { try await base.bucketStats(name) }
    func deleteBucket(_ name: String) async throws { try await base.deleteBucket(name) }
    func ensureBuckets(_ names: [String]) async throws -> [String] { try await base.ensureBuckets(names) }
    func bucketCORS(_ bucket: String) async throws -> CORSConfiguration? { try await base.bucketCORS(bucket) }
    func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws { try await base.setBucketCORS(bucket, configuration) }
    func deleteBucketCORS(_ bucket: String) async throws { try await base.deleteBucketCORS(bucket) }
    func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try await base.putObject(bucket: bucket, key: key, body: Watched(base: body, seen: putBuffer), metadata: metadata, options: writeOptions(options))
    }
    func getObject(bucket: String, key: String, range: ByteRange?) async throws -> ObjectRead {
        onGet()
        let read = try await base.getObject(bucket: bucket, key: key, range: range)
        guard remoteLike else { return read }
        var bytes = ByteBuffer()
        for try await var buffer in read.body { bytes.writeBuffer(&buffer) }
        return ObjectRead(info: read.info, range: read.range, isPartial: read.isPartial, body: ObjectBody(Streamed(bytes: bytes)))
    }
    func headObject(bucket: String, key: String) async throws -> ObjectInfo { try await base.headObject(bucket: bucket, key: key) }
    func readAtOnce(bucket: String, key: String, range: ByteRange?) throws -> ReadAtOnce? {
        remoteLike ? nil : try base.readAtOnce(bucket: bucket, key: key, range: range)
    }
    func infoInMemory(bucket: String, key: String) -> ObjectInfo? { remoteLike ? nil : base.infoInMemory(bucket: bucket, key: key) }
    func deleteObject(bucket: String, key: String) async throws { try await base.deleteObject(bucket: bucket, key: key) }
    func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult] { try await base.deleteObjects(bucket: bucket, keys: keys) }
    func appendObject<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try await base.appendObject(bucket: bucket, key: key, position: position, body: body, metadata: metadata, options: writeOptions(options))
    }
    func listObjects(bucket: String, query: ListQuery) async throws -> ListResult { try await base.listObjects(bucket: bucket, query: query) }
    func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata, checksum: UploadChecksum?) async throws -> MultipartUpload {
        try await base.createMultipartUpload(bucket: bucket, key: key, metadata: metadata, checksum: checksum)
    }
    func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try await base.uploadPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, body: body, options: writeOptions(options))
    }
    func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int, source: ObjectLocation, range: ByteRange?, options: CopyOptions
    ) async throws -> PartInfo {
        try await base.uploadPartCopy(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, source: source, range: range, options: options)
    }
    func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int, maxParts: Int) async throws -> ListPartsResult {
        try await base.listParts(bucket: bucket, key: key, uploadID: uploadID, partNumberMarker: partNumberMarker, maxParts: maxParts)
    }
    func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
        try await base.listMultipartUploads(bucket: bucket, query: query)
    }
    func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        try await base.abortMultipartUpload(bucket: bucket, key: key, uploadID: uploadID)
    }
    func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], options: CompleteOptions
    ) async throws -> ObjectInfo {
        try await base.completeMultipartUpload(bucket: bucket, key: key, uploadID: uploadID, parts: parts, options: options)
    }
}
