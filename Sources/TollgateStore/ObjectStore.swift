import Foundation
import NIOCore
import TollgateCORS
import TollgateCrypto

/// The storage behind the object gateway, in the store's own terms: errors are `StoreError`
/// domain cases (the gateway maps them to S3 / OSS errors), bodies are async sequences of
/// `ByteBuffer` (`ObjectBody` on the way out), and no value names a file or a row.
/// Implementations live in modules of their own (the local store, files + SQLite; the in-memory
/// twin tests use; the S3 store over an S3-compatible cluster), all held to the same conformance
/// suite; the server gets one from `TollgateStorage`'s factory and never names one.
public protocol ObjectStore: Sendable {
    // MARK: Lifecycle
    /// What this store can do; handlers consult it instead of assuming.
    var capabilities: StoreCapabilities { get }
    /// Makes the store ready to serve (the factory calls it once, before anything else): a
    /// remote store checks that its backend answers and creates what it keeps there.
    func open() async throws
    /// Whether the store can serve now (a remote store: whether its backend answers).
    func health() async -> StoreHealth
    /// Releases what the store holds (files, connections); nothing may be called after.
    func close() async throws
    /// Aborts the multipart uploads initiated before `cutoff`, deleting their parts; returns how
    /// many. Runs in the background (`UploadExpiry`), at most once at a time.
    func expireUploads(initiatedBefore cutoff: Date) async throws -> Int
    /// Changes the number of in-progress uploads a bucket may hold, for uploads created from now on.
    func setMaxUploadsPerBucket(_ limit: Int)
    /// Documents the instances of a deployment share (`SharedDocuments`); nil by default.
    var sharedDocuments: (any SharedDocuments)? { get }

    // MARK: Buckets
    func listBuckets() async throws -> [BucketInfo]
    /// Throws `bucketExists` when it exists (single tenant), `invalidBucketName`.
    @discardableResult
    func createBucket(_ name: String) async throws -> BucketInfo
    func headBucket(_ name: String) async throws -> BucketInfo
    /// Replaces an object's tags, nothing else: same version, ETag and modification time.
    func setObjectTags(bucket: String, key: String, tags: [String: String]) async throws
    /// The object's tags, fetched on demand (GetObjectTagging); `ObjectInfo` carries only their
    /// count, which is all a GET or HEAD answers with.
    func objectTags(bucket: String, key: String) async throws -> [String: String]
    /// What the bucket holds: objects, bytes, unfinished uploads and their parts.
    func bucketStats(_ name: String) async throws -> BucketStats
    /// Throws `bucketNotEmpty` while objects exist; aborts the multipart uploads still in
    /// progress, as S3 does.
    func deleteBucket(_ name: String) async throws
    /// Creates the buckets that do not exist yet; returns those it created, in order.
    @discardableResult
    func ensureBuckets(_ names: [String]) async throws -> [String]

    // MARK: Bucket CORS
    /// The bucket's own CORS rules; nil when it has none, or when there is no such bucket. Every
    /// browser preflight and every request with an `Origin` asks, so implementations answer from
    /// memory after their first read.
    func bucketCORS(_ bucket: String) async throws -> CORSConfiguration?
    /// Replaces the bucket's CORS rules (`noSuchBucket`). They go with the bucket when it is deleted.
    func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws
    /// Removes the bucket's CORS rules; idempotent (`noSuchBucket`).
    func deleteBucketCORS(_ bucket: String) async throws

    // MARK: Objects
    /// Streams `body` to storage and commits it atomically, replacing any previous version;
    /// `options.preconditions` are checked against the version current at the commit.
    func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer

    /// Returns the object's metadata and its body. The body is the version the metadata
    /// describes, even if the object is overwritten while the body is being read.
    func getObject(bucket: String, key: String, range: ByteRange?) async throws -> ObjectRead
    func headObject(bucket: String, key: String) async throws -> ObjectInfo
    /// What `getObject` would read, had at once, without waiting on anything: a small object the
    /// store keeps in memory, or (the local store) a range of a file it keeps open whose pages
    /// are in the page cache; or word that its body for `range` would come in more than one
    /// piece (`ReadAtOnce.inPieces`). nil otherwise, and for a missing object (`getObject` then
    /// says why); a store that keeps nothing at hand always answers nil. Throws only what
    /// `getObject` would (a range the object does not have). The gateway answers such GETs on
    /// the connection's event loop, and hands those in pieces on to its streaming responder
    /// without asking `getObject` first.
    func readAtOnce(bucket: String, key: String, range: ByteRange?) throws -> ReadAtOnce?
    /// The object's row, when the store holds it in memory (a cached row, whatever the size of
    /// its object): what `headObject` would return, had at once. nil otherwise, and for a
    /// missing object. The gateway answers such HEADs on the connection's event loop.
    func infoInMemory(bucket: String, key: String) -> ObjectInfo?
    /// Idempotent: deleting a missing key succeeds.
    func deleteObject(bucket: String, key: String) async throws
    func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult]
    /// Server-side copy. The copy's metadata and tags are resolved against the source version
    /// that is copied (`CopyMetadata`), never against one read earlier. `options.sourceConditions`
    /// are checked against that version first (x-amz-copy-source-if-* headers:
    /// `copySourceConditionFailed`); `options.preconditions` apply to the target.
    func copyObject(
        from source: ObjectLocation, to target: ObjectLocation, metadata: CopyMetadata, options: CopyOptions
    ) async throws -> ObjectInfo
    /// OSS AppendObject. `metadata` is used only when the append creates the object (at
    /// position 0); later appends must name the current length (`positionNotEqualToLength`).
    func appendObject<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer

    /// ListObjects v1 and v2 in one call; see `ListQuery`.
    func listObjects(bucket: String, query: ListQuery) async throws -> ListResult

    // MARK: Multipart
    /// Throws `tooManyUploads` when the bucket already holds the store's limit of uploads.
    /// `checksum`: the algorithm (and kind) of the object checksum completing will compute from
    /// the parts' checksums.
    func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata, checksum: UploadChecksum?) async throws -> MultipartUpload
    /// A part whose checksum (from `options.bodyChecksums`) is of another algorithm than the
    /// upload's is refused (`checksumAlgorithmMismatch`).
    func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions
    ) async throws -> PartInfo where Body.Element == ByteBuffer
    /// UploadPartCopy: copies `range` (or all) of the source object into a part.
    func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int,
        source: ObjectLocation, range: ByteRange?, options: CopyOptions
    ) async throws -> PartInfo
    func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int, maxParts: Int) async throws -> ListPartsResult
    func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult
    func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws
    /// Concatenates the chosen parts into the object. Its checksums come from the parts'
    /// (`ObjectChecksums.completing`), without rereading the bytes.
    func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], options: CompleteOptions
    ) async throws -> ObjectInfo
}

// MARK: - Values

/// What a store can do, for the handlers that would otherwise assume it.
public struct StoreCapabilities: Sendable, Equatable {
    /// Which kind of store: `local`, `memory`, `s3` (logs, `/healthz`).
    public var backend: String
    /// OSS AppendObject.
    public var appends: Bool
    /// S3 additional checksums (`x-amz-checksum-*`) are kept with objects and parts.
    public var storesChecksums: Bool
    /// OSS's CRC-64 is kept with objects and parts.
    public var storesCRC64: Bool
    /// Object versions (ListObjectVersions with real ids). No store has them yet: every object is
    /// its one version, `null`.
    public var versions: Bool
    /// The smallest part, but the last, that the backend itself accepts in a multipart upload;
    /// the gateway's own minimum per dialect applies on top (`CompleteOptions.minimumPartSize`).
    public var minimumPartSize: Int64
    /// Reads of larger objects offer `ObjectBody.zeroCopy` (regions of open files, for sendfile).
    public var zeroCopyReads: Bool
    /// `readAtOnce` and `infoInMemory` may answer (the store keeps objects or rows at hand).
    public var readsAtOnce: Bool
    /// The largest piece a server should read an upload from its connection in, when the store
    /// takes uploads faster than clients send them (a local disk): larger reads mean fewer body
    /// parts. nil: the server's default. A store that takes uploads slower than they arrive (a
    /// remote backend) leaves it nil, since each connection buffers several reads while it waits.
    public var uploadReadSize: Int?

    public init(backend: String, appends: Bool, storesChecksums: Bool, storesCRC64: Bool, versions: Bool = false,
                minimumPartSize: Int64, zeroCopyReads: Bool, readsAtOnce: Bool, uploadReadSize: Int? = nil) {
        self.backend = backend
        self.appends = appends
        self.storesChecksums = storesChecksums
        self.storesCRC64 = storesCRC64
        self.versions = versions
        self.minimumPartSize = minimumPartSize
        self.zeroCopyReads = zeroCopyReads
        self.readsAtOnce = readsAtOnce
        self.uploadReadSize = uploadReadSize
    }
}

/// Whether a store can serve now (`ObjectStore.health`).
public enum StoreHealth: Sendable, Equatable {
    case ok
    /// The backend does not answer; `reason` is for logs (never a secret).
    case unreachable(reason: String)

    /// `ok` or `unreachable`, as `/healthz` says it.
    public var word: String {
        switch self {
        case .ok: "ok"
        case .unreachable: "unreachable"
        }
    }
}

/// A copy's conditions on its source (`x-amz-copy-source-if-*`, `x-oss-copy-source-if-*`), as
/// data: the store checks them against the version it copies (a remote store also hands them to
/// its backend, so the version checked is the version copied).
public struct CopySourceConditions: Sendable, Equatable {
    public enum Condition: String, Sendable, Equatable {
        case ifMatch = "match", ifNoneMatch = "none-match", ifModifiedSince = "modified-since", ifUnmodifiedSince = "unmodified-since"
    }

    public var ifMatch: String?
    public var ifNoneMatch: String?
    /// HTTP dates, compared with the source's modification time in whole seconds.
    public var ifModifiedSince: Date?
    public var ifUnmodifiedSince: Date?

    public init(ifMatch: String? = nil, ifNoneMatch: String? = nil, ifModifiedSince: Date? = nil, ifUnmodifiedSince: Date? = nil) {
        self.ifMatch = ifMatch
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
        self.ifUnmodifiedSince = ifUnmodifiedSince
    }

    public static let none = CopySourceConditions()

    public var isEmpty: Bool { self == .none }

    /// The first condition `source` fails, as S3 orders them: a match beats an unmodified-since,
    /// a none-match beats a modified-since. Nil when it passes.
    public func failed(by source: ObjectInfo) -> Condition? {
        let modified = source.lastModifiedSeconds
        if let ifMatch {
            if !ETag.matches(ifMatch, source.etag) { return .ifMatch }
        } else if let ifUnmodifiedSince, modified > ifUnmodifiedSince {
            return .ifUnmodifiedSince
        }
        if let ifNoneMatch {
            if ETag.matches(ifNoneMatch, source.etag) { return .ifNoneMatch }
        } else if let ifModifiedSince, modified <= ifModifiedSince {
            return .ifModifiedSince
        }
        return nil
    }

    /// Throws `copySourceConditionFailed` unless `source` passes.
    public func check(_ source: ObjectInfo) throws(StoreError) {
        if let condition = failed(by: source) { throw .copySourceConditionFailed(condition) }
    }
}

public struct BucketStats: Sendable, Equatable {
    public var objectCount: Int64
    /// The objects' bytes.
    public var storageBytes: Int64
    public var multipartUploadCount: Int64
    public var multipartPartCount: Int64
    /// The newest object's last modification, nil when there is none.
    public var lastModified: Date?

    public init(objectCount: Int64, storageBytes: Int64, multipartUploadCount: Int64, multipartPartCount: Int64, lastModified: Date?) {
        self.objectCount = objectCount
        self.storageBytes = storageBytes
        self.multipartUploadCount = multipartUploadCount
        self.multipartPartCount = multipartPartCount
        self.lastModified = lastModified
    }
}

public struct BucketInfo: Sendable, Equatable {
    public let name: String
    public let creationDate: Date

    public init(name: String, creationDate: Date) {
        self.name = name
        self.creationDate = creationDate
    }
}

public struct ObjectLocation: Sendable, Equatable {
    public var bucket: String
    public var key: String
    public init(bucket: String, key: String) {
        self.bucket = bucket
        self.key = key
    }
}

/// The headers stored with an object and returned exactly on GET/HEAD.
public struct ObjectMetadata: Sendable, Equatable, Codable {
    public var contentType: String?
    public var contentEncoding: String?
    public var contentDisposition: String?
    public var cacheControl: String?
    public var expires: String?
    public var contentLanguage: String?
    /// `x-amz-meta-*` / `x-oss-meta-*`, names without the prefix, stored exactly as given.
    public var userMetadata: [String: String]
    /// The object's tags (`x-amz-tagging`, PutObjectTagging): key → value.
    public var tags: [String: String]

    public init(
        contentType: String? = nil, contentEncoding: String? = nil, contentDisposition: String? = nil,
        cacheControl: String? = nil, expires: String? = nil, contentLanguage: String? = nil,
        userMetadata: [String: String] = [:], tags: [String: String] = [:]
    ) {
        self.tags = tags
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.contentDisposition = contentDisposition
        self.cacheControl = cacheControl
        self.expires = expires
        self.contentLanguage = contentLanguage
        self.userMetadata = userMetadata
    }
}

/// What an object (or a part) carries besides its MD5 ETag, to let clients check its bytes.
public struct ObjectChecksums: Sendable, Equatable {
    /// The S3 additional checksum (`x-amz-checksum-*`): the one a client sent with the bytes,
    /// verified before the write committed, or for a multipart object the one computed from
    /// its parts'.
    public var additional: AdditionalChecksum?
    /// CRC-64/XZ of the bytes (OSS's `x-oss-hash-crc64ecma`), when the writer computed it.
    public var crc64ecma: UInt64?

    public init(additional: AdditionalChecksum? = nil, crc64ecma: UInt64? = nil) {
        self.additional = additional
        self.crc64ecma = crc64ecma
    }

    public static let none = ObjectChecksums()

    /// After an append of `length` bytes with the checksums `appended`: the CRC-64 combined
    /// (when both are known); an additional checksum no longer describes the bytes.
    public func appending(_ appended: ObjectChecksums, length: Int64) -> ObjectChecksums {
        guard let before = crc64ecma, let after = appended.crc64ecma else { return .none }
        return ObjectChecksums(crc64ecma: ReflectedCRC<UInt64>.ecma.combine(before, after, secondLength: length))
    }

    /// A copy of all of an object's bytes has its CRC-64 and its whole-object checksum; a
    /// composite checksum describes the source's parts, which the copy does not have.
    public var ofCopy: ObjectChecksums {
        ObjectChecksums(additional: additional?.partCount == nil ? additional : nil, crc64ecma: crc64ecma)
    }
}

public struct AdditionalChecksum: Sendable, Equatable {
    public var algorithm: ChecksumAlgorithm
    /// The raw digest (CRCs big-endian).
    public var digest: [UInt8]
    /// nil: the digest is of the object's bytes (S3's FULL_OBJECT). N: it is the digest of the
    /// N parts' digests, concatenated (COMPOSITE, written `…-N`).
    public var partCount: Int?

    public init(algorithm: ChecksumAlgorithm, digest: [UInt8], partCount: Int? = nil) {
        self.algorithm = algorithm
        self.digest = digest
        self.partCount = partCount
    }
}

/// The object checksum a multipart upload was created to get.
public struct UploadChecksum: Sendable, Equatable {
    public var algorithm: ChecksumAlgorithm
    /// True: the parts' CRCs are combined into the CRC of the object's bytes (FULL_OBJECT;
    /// CRCs only). False: the parts' digests are digested (COMPOSITE).
    public var fullObject: Bool

    public init(algorithm: ChecksumAlgorithm, fullObject: Bool) {
        self.algorithm = algorithm
        self.fullObject = fullObject
    }
}

/// An object's committed row, as clients see it. Its fields live in one immutable box, so a
/// copy (out of the object cache, into a read, along a listing) costs one reference count rather
/// than one for each string and table in it. With `objectHeaders` reading the metadata once, a
/// presigned 4 KiB GET makes about 140 fewer reference-count operations, of about 2,150
/// (callgrind; each is an atomic instruction).
public struct ObjectInfo: Sendable, Equatable {
    private final class Fields: Sendable {
        let bucket: String
        let key: String
        let size: Int64
        let etag: String
        let lastModified: Date
        let metadata: ObjectMetadata
        let isAppendable: Bool
        let checksums: ObjectChecksums
        let tagCount: Int

        init(bucket: String, key: String, size: Int64, etag: String, lastModified: Date, metadata: ObjectMetadata, isAppendable: Bool,
             checksums: ObjectChecksums, tagCount: Int) {
            self.bucket = bucket
            self.key = key
            self.size = size
            self.etag = etag
            self.lastModified = lastModified
            self.metadata = metadata
            self.isAppendable = isAppendable
            self.checksums = checksums
            self.tagCount = tagCount
        }
    }

    private let fields: Fields

    public var bucket: String { fields.bucket }
    public var key: String { fields.key }
    public var size: Int64 { fields.size }
    /// Quoted, as sent in the `ETag` header: `"<md5 hex>"` or `"<md5 of part md5s>-N"`.
    public var etag: String { fields.etag }
    /// Millisecond precision; HTTP dates use whole seconds (`lastModifiedSeconds`).
    public var lastModified: Date { fields.lastModified }
    public var metadata: ObjectMetadata { fields.metadata }
    public var isAppendable: Bool { fields.isAppendable }
    public var checksums: ObjectChecksums { fields.checksums }
    /// How many tags the object has (`x-amz-tagging-count`); the tags themselves come from
    /// `ObjectStore.objectTags`. A store that keeps them in its rows also has them in
    /// `metadata.tags`; one that does not leaves that empty.
    public var tagCount: Int { fields.tagCount }

    /// `tagCount` nil: the count of `metadata.tags`.
    public init(bucket: String, key: String, size: Int64, etag: String, lastModified: Date, metadata: ObjectMetadata, isAppendable: Bool,
                checksums: ObjectChecksums = .none, tagCount: Int? = nil) {
        fields = Fields(bucket: bucket, key: key, size: size, etag: etag, lastModified: lastModified, metadata: metadata,
                        isAppendable: isAppendable, checksums: checksums, tagCount: tagCount ?? metadata.tags.count)
    }

    public static func == (lhs: ObjectInfo, rhs: ObjectInfo) -> Bool {
        lhs.fields === rhs.fields
            || (lhs.bucket == rhs.bucket && lhs.key == rhs.key && lhs.size == rhs.size && lhs.etag == rhs.etag
                && lhs.lastModified == rhs.lastModified && lhs.metadata == rhs.metadata && lhs.isAppendable == rhs.isAppendable
                && lhs.checksums == rhs.checksums && lhs.tagCount == rhs.tagCount)
    }

    /// OSS `x-oss-next-append-position` for appendable objects.
    public var nextAppendPosition: Int64? { isAppendable ? size : nil }

    /// Last-Modified truncated to whole seconds, as HTTP dates carry it.
    public var lastModifiedSeconds: Date {
        Date(timeIntervalSince1970: lastModified.timeIntervalSince1970.rounded(.down))
    }
}

/// A whole object held in memory, and how a store that has it reads it (`readAtOnce`, `getObject`).
public struct ObjectInMemory: Sendable {
    public let info: ObjectInfo
    /// All of its bytes.
    public let bytes: ByteBuffer

    public init(info: ObjectInfo, bytes: ByteBuffer) {
        self.info = info
        self.bytes = bytes
    }

    /// What `getObject` reads of it: all of it, or `range` (`invalidRange` when none of it is there).
    public func read(range: ByteRange?) throws(StoreError) -> ObjectRead {
        let served = try range?.resolve(size: info.size) ?? 0..<info.size
        let slice = bytes.getSlice(at: bytes.readerIndex + Int(served.lowerBound), length: served.count) ?? ByteBuffer()
        return ObjectRead(info: info, range: served, isPartial: range != nil, body: ObjectBody(slice))
    }
}

/// What a store has at hand for a GET (`ObjectStore.readAtOnce`).
public enum ReadAtOnce: Sendable {
    /// What `getObject` would read.
    case read(ObjectRead)
    /// The store knows the object, and `getObject`'s body for the range would come in more than
    /// one piece (more than one buffer, or one span of cached pages): a large body, to stream.
    case inPieces
}

/// The result of `getObject`: metadata, the byte range served, and the open body.
public struct ObjectRead: Sendable {
    public let info: ObjectInfo
    /// The half-open byte range being served; the whole object when no range was asked for.
    public let range: Range<Int64>
    /// True when a `Range` was asked for and satisfied (206, `Content-Range`).
    public let isPartial: Bool
    public let body: ObjectBody

    public init(info: ObjectInfo, range: Range<Int64>, isPartial: Bool, body: ObjectBody) {
        self.info = info
        self.range = range
        self.isPartial = isPartial
        self.body = body
    }

    public var contentLength: Int64 { range.upperBound - range.lowerBound }
    /// `bytes a-b/size` for the `Content-Range` header (meaningful when `isPartial`).
    public var contentRange: String { Self.contentRange(range, size: info.size) }

    /// `bytes a-b/size` for `range` of an object of `size` bytes (GET's and HEAD's `Content-Range`).
    public static func contentRange(_ range: Range<Int64>, size: Int64) -> String {
        "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)"
    }
}

/// Conditions on the current version of the target, evaluated inside the commit transaction.
public struct WritePreconditions: Sendable, Equatable {
    /// `If-Match`: an ETag (quoted or not) or `*`.
    public var ifMatch: String?
    /// `If-None-Match`: `*` (create only) or an ETag.
    public var ifNoneMatch: String?
    public init(ifMatch: String? = nil, ifNoneMatch: String? = nil) {
        self.ifMatch = ifMatch
        self.ifNoneMatch = ifNoneMatch
    }
    public static let none = WritePreconditions()
}

public struct WriteOptions: Sendable {
    public var preconditions: WritePreconditions
    /// The body's length in bytes, when the client announced it (`Content-Length`, or the decoded
    /// length of an aws-chunked body); the body then has exactly that many bytes. A remote store
    /// sends it with its request (and without it, streams the body chunked).
    public var contentLength: Int64?
    /// Checksums of the body known before it streams (a checksum header the client sent, which
    /// the producer verifies as the bytes pass and refuses the body at its end if it differs):
    /// a remote store sends them with the body rather than after it. What `bodyChecksums`
    /// returns at the end includes them.
    public var statedChecksums: ObjectChecksums
    /// The checksums of the body, asked once the body has ended and before the commit: the
    /// producer of the body (the gateway, which verifies what clients send as the bytes stream
    /// through) knows them only then. Nil: none are stored.
    public var bodyChecksums: (@Sendable () -> ObjectChecksums)?
    /// The MD5 the client stated for the body (`Content-MD5`). A store computes the body's MD5
    /// anyway (the ETag of an object or part, the link an append adds to its chain), so it
    /// checks this one too: a body whose MD5 differs is refused with `badDigest` before
    /// anything is committed. The gateway leaves this check to the store, so that no body is
    /// hashed with MD5 twice.
    public var expectedMD5: [UInt8]?

    public init(preconditions: WritePreconditions = .none, contentLength: Int64? = nil, statedChecksums: ObjectChecksums = .none,
                bodyChecksums: (@Sendable () -> ObjectChecksums)? = nil, expectedMD5: [UInt8]? = nil) {
        self.preconditions = preconditions
        self.contentLength = contentLength
        self.statedChecksums = statedChecksums
        self.bodyChecksums = bodyChecksums
        self.expectedMD5 = expectedMD5
    }
}

public struct CompleteOptions: Sendable {
    /// Conditions on the object the upload replaces, checked at the commit.
    public var preconditions: WritePreconditions
    /// Overrides the store's minimum for every part but the last (OSS allows 100 KiB parts where
    /// S3 requires 5 MiB).
    public var minimumPartSize: Int64?
    /// The object checksum the client computed (`x-amz-checksum-*` on the complete request):
    /// refused with `checksumMismatch` unless the parts give the same.
    public var expectedChecksum: AdditionalChecksum?

    public init(preconditions: WritePreconditions = .none, minimumPartSize: Int64? = nil, expectedChecksum: AdditionalChecksum? = nil) {
        self.preconditions = preconditions
        self.minimumPartSize = minimumPartSize
        self.expectedChecksum = expectedChecksum
    }
}

/// A copy's metadata and tags, each the source's (the COPY directive) or given (REPLACE): S3 and
/// OSS let `x-amz-metadata-directive` and `x-amz-tagging-directive` differ. The store resolves
/// them against the source version it opens, so a source replaced while the copy runs cannot
/// give the copy one version's bytes with another version's tags or metadata.
public struct CopyMetadata: Sendable, Equatable {
    /// The copy's metadata apart from its tags (whose own `tags` are ignored); nil: the source's.
    public var metadata: ObjectMetadata?
    /// The copy's tags; nil: the source's.
    public var tags: [String: String]?

    public init(metadata: ObjectMetadata? = nil, tags: [String: String]? = nil) {
        self.metadata = metadata
        self.tags = tags
    }

    /// Everything the source's: a plain copy.
    public static let source = CopyMetadata()

    /// Everything given, tags included.
    public static func replacing(_ metadata: ObjectMetadata) -> CopyMetadata {
        CopyMetadata(metadata: metadata, tags: metadata.tags)
    }

    /// The copy's metadata, given the copied version's.
    public func resolved(source: ObjectMetadata) -> ObjectMetadata {
        var resolved = metadata ?? source
        resolved.tags = tags ?? source.tags
        return resolved
    }
}

public struct CopyOptions: Sendable, Equatable {
    /// Conditions on the target (If-None-Match: * …).
    public var preconditions: WritePreconditions
    /// Conditions on the source version copied (x-amz-copy-source-if-*), checked before any byte
    /// is copied.
    public var sourceConditions: CopySourceConditions
    public init(preconditions: WritePreconditions = .none, sourceConditions: CopySourceConditions = .none) {
        self.preconditions = preconditions
        self.sourceConditions = sourceConditions
    }
}

public struct DeleteResult: Sendable, Equatable {
    public let key: String
    /// nil when deleted (or already absent).
    public let error: StoreError?

    public init(key: String, error: StoreError?) {
        self.key = key
        self.error = error
    }
}

/// One listing request. v1: `startAfter` is the marker. v2: `startAfter` is start-after and
/// `continuationToken` (when set) takes precedence over it.
public struct ListQuery: Sendable, Equatable {
    public var prefix: String
    public var delimiter: String?
    public var startAfter: String?
    public var continuationToken: String?
    /// Clamped to 0...1000.
    public var maxKeys: Int

    public init(prefix: String = "", delimiter: String? = nil, startAfter: String? = nil, continuationToken: String? = nil, maxKeys: Int = 1000) {
        self.prefix = prefix
        self.delimiter = delimiter
        self.startAfter = startAfter
        self.continuationToken = continuationToken
        self.maxKeys = maxKeys
    }
}

public struct ObjectSummary: Sendable, Equatable {
    public let key: String
    public let size: Int64
    public let etag: String
    public let lastModified: Date

    public init(key: String, size: Int64, etag: String, lastModified: Date) {
        self.key = key
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }
}

public struct ListResult: Sendable, Equatable {
    public let objects: [ObjectSummary]
    /// Sorted; each counts against max-keys like an object.
    public let commonPrefixes: [String]
    public let isTruncated: Bool
    /// v1 NextMarker: the last key or common prefix returned, when truncated.
    public let nextMarker: String?
    /// v2 NextContinuationToken, when truncated. Opaque.
    public let nextContinuationToken: String?
    /// v2 KeyCount.
    public var keyCount: Int { objects.count + commonPrefixes.count }

    public init(objects: [ObjectSummary], commonPrefixes: [String], isTruncated: Bool, nextMarker: String?, nextContinuationToken: String?) {
        self.objects = objects
        self.commonPrefixes = commonPrefixes
        self.isTruncated = isTruncated
        self.nextMarker = nextMarker
        self.nextContinuationToken = nextContinuationToken
    }
}

// MARK: Multipart values

public struct MultipartUpload: Sendable, Equatable {
    public let bucket: String
    public let key: String
    public let uploadID: String
    public let initiated: Date
    public let metadata: ObjectMetadata
    public let checksum: UploadChecksum?

    public init(bucket: String, key: String, uploadID: String, initiated: Date, metadata: ObjectMetadata, checksum: UploadChecksum? = nil) {
        self.bucket = bucket
        self.key = key
        self.uploadID = uploadID
        self.initiated = initiated
        self.metadata = metadata
        self.checksum = checksum
    }
}

public struct PartInfo: Sendable, Equatable {
    public let partNumber: Int
    /// Quoted MD5 hex of the part.
    public let etag: String
    public let size: Int64
    public let lastModified: Date
    /// The part's own checksums (an `additional` one is of the part's bytes).
    public let checksums: ObjectChecksums

    public init(partNumber: Int, etag: String, size: Int64, lastModified: Date, checksums: ObjectChecksums = .none) {
        self.partNumber = partNumber
        self.etag = etag
        self.size = size
        self.lastModified = lastModified
        self.checksums = checksums
    }
}

public struct CompletedPart: Sendable, Equatable {
    public var partNumber: Int
    public var etag: String
    /// The part's checksum as the client lists it (`<ChecksumCRC32>` …): `invalidPart` unless it
    /// is the one stored with the part.
    public var checksum: AdditionalChecksum?
    public init(partNumber: Int, etag: String, checksum: AdditionalChecksum? = nil) {
        self.partNumber = partNumber
        self.etag = etag
        self.checksum = checksum
    }
}

public struct ListPartsResult: Sendable, Equatable {
    public let upload: MultipartUpload
    public let parts: [PartInfo]
    public let isTruncated: Bool
    public let nextPartNumberMarker: Int?

    public init(upload: MultipartUpload, parts: [PartInfo], isTruncated: Bool, nextPartNumberMarker: Int?) {
        self.upload = upload
        self.parts = parts
        self.isTruncated = isTruncated
        self.nextPartNumberMarker = nextPartNumberMarker
    }
}

/// ListMultipartUploads. Uploads are ordered by key, then upload id.
public struct ListUploadsQuery: Sendable, Equatable {
    public var prefix: String
    public var delimiter: String?
    public var keyMarker: String?
    public var uploadIDMarker: String?
    /// Clamped to 0...1000.
    public var maxUploads: Int
    public init(prefix: String = "", delimiter: String? = nil, keyMarker: String? = nil, uploadIDMarker: String? = nil, maxUploads: Int = 1000) {
        self.prefix = prefix
        self.delimiter = delimiter
        self.keyMarker = keyMarker
        self.uploadIDMarker = uploadIDMarker
        self.maxUploads = maxUploads
    }
}

public struct ListUploadsResult: Sendable, Equatable {
    public let uploads: [MultipartUpload]
    public let commonPrefixes: [String]
    public let isTruncated: Bool
    public let nextKeyMarker: String?
    public let nextUploadIDMarker: String?

    public init(uploads: [MultipartUpload], commonPrefixes: [String], isTruncated: Bool, nextKeyMarker: String?, nextUploadIDMarker: String?) {
        self.uploads = uploads
        self.commonPrefixes = commonPrefixes
        self.isTruncated = isTruncated
        self.nextKeyMarker = nextKeyMarker
        self.nextUploadIDMarker = nextUploadIDMarker
    }
}

/// ETag comparison for conditional requests and CompleteMultipartUpload's part list: quotes, a
/// weak `W/` prefix and the case of the hex are ignored (OSS writes ETags in upper case, S3 in
/// lower case, and clients send back what they were given).
public enum ETag {
    public static func normalize(_ etag: String) -> String {
        // Bytes, as RFC 9110 compares entity tags: only ASCII spaces and tabs are trimmed and only
        // ASCII letters folded (Foundation's Unicode trimming and case folding cost more than the
        // rest of a backend GET's headers together).
        var s = trimmed(Substring(etag).utf8)
        if s.starts(with: "W/".utf8) { s = s.dropFirst(2) }
        if s.count >= 2, s.first == UInt8(ascii: "\""), s.last == UInt8(ascii: "\"") { s = s.dropFirst().dropLast() }
        return String(decoding: s.lazy.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// True when `header` (a comma-separated list of ETags, or `*`) matches `etag`.
    public static func matches(_ header: String, _ etag: String) -> Bool {
        let target = normalize(etag)
        return header.split(separator: ",").contains { candidate in
            trimmed(candidate.utf8).elementsEqual("*".utf8) || normalize(String(candidate)) == target
        }
    }

    /// Without the spaces and tabs around it.
    private static func trimmed(_ text: Substring.UTF8View) -> Substring.UTF8View {
        var text = text
        while let first = text.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { text = text.dropFirst() }
        while let last = text.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { text = text.dropLast() }
        return text
    }
}

/// Conveniences with the defaults (no preconditions, whole object).
extension ObjectStore {
    public func putObject<Body: AsyncSequence>(bucket: String, key: String, body: Body, metadata: ObjectMetadata = ObjectMetadata()) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try await putObject(bucket: bucket, key: key, body: body, metadata: metadata, options: WriteOptions())
    }

    public func getObject(bucket: String, key: String) async throws -> ObjectRead {
        try await getObject(bucket: bucket, key: key, range: nil)
    }

    public func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata = ObjectMetadata()) async throws -> MultipartUpload {
        try await createMultipartUpload(bucket: bucket, key: key, metadata: metadata, checksum: nil)
    }

    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], preconditions: WritePreconditions = .none,
        minimumPartSize: Int64? = nil
    ) async throws -> ObjectInfo {
        try await completeMultipartUpload(bucket: bucket, key: key, uploadID: uploadID, parts: parts,
                                          options: CompleteOptions(preconditions: preconditions, minimumPartSize: minimumPartSize))
    }
}

// MARK: - Shared documents

/// Small documents every instance of a deployment reads and writes (the revocation list), kept
/// by the store where all instances see them. Reads are conditional (a version still current
/// costs no transfer), writes replace a known version only (`preconditionFailed` when another
/// instance wrote in between), so no instance loses another's change.
public protocol SharedDocuments: Sendable {
    /// The document, `unchanged` while `version` is current, `absent` when there is none.
    func read(_ name: String, ifChangedFrom version: String?) async throws -> SharedDocumentRead
    /// Writes the document if it is still at `version` (nil: only if there is none); returns the new version.
    func write(_ name: String, _ bytes: [UInt8], replacing version: String?) async throws -> String
    /// Removes the document; idempotent (a document no one names any more).
    func delete(_ name: String) async throws
}

public enum SharedDocumentRead: Sendable, Equatable {
    case absent
    case unchanged
    case document(bytes: [UInt8], version: String)
}

extension ObjectStore {
    /// The store's shared documents; nil for a store that serves one instance alone (its
    /// instance keeps such state in its data directory).
    public var sharedDocuments: (any SharedDocuments)? { nil }
}
