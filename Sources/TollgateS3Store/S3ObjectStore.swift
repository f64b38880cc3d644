import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TollgateCORS
import TollgateCrypto
import TollgateStore

/// An `ObjectStore` over an S3-compatible cluster (Ceph RGW in the tests; MinIO, AWS S3, …):
/// every object lives in the backend, so any number of gateway instances with the same settings
/// serve the same objects and share nothing else. Buckets are the backend's, prefixed
/// (`bucketPrefix`); bodies stream both ways (the client's upload is the backend request's body,
/// the backend's answer is the client's body), with the backpressure of both connections and
/// bounded memory; ranges, conditions, copies and multipart uploads are the backend's own.
/// What S3 cannot hold (checksums, CRC-64, exact user metadata) rides in reserved metadata
/// (`S3Metadata`); what is not an object's (buckets' CORS rules, multipart uploads' checksums)
/// lives in the system bucket. Nothing is kept in memory but CORS rules, for at most
/// `corsStaleness`.
public final class S3ObjectStore: ObjectStore {
    let configuration: S3StoreConfiguration
    let transport: S3Transport
    let logger: Logger
    private let uploadLimit: Atomic<Int>
    /// Buckets' CORS rules as last read, with when: used for `corsStaleness`.
    private let corsCache = Mutex<[String: (rules: CORSConfiguration?, read: ContinuousClock.Instant)]>([:])
    /// Multipart uploads' settings (immutable once created), by upload id.
    let uploadCache = Mutex<[String: UploadRecord]>([:])
    /// Whether the system bucket is known to exist.
    private let systemBucketReady = Atomic<Bool>(false)

    public init(configuration: S3StoreConfiguration, logger: Logger = Logger(label: "tollgate.s3store")) throws {
        self.configuration = configuration
        self.logger = logger
        transport = try S3Transport(configuration: configuration, logger: logger)
        uploadLimit = Atomic(configuration.maxUploadsPerBucket)
    }

    // MARK: Lifecycle

    public var capabilities: StoreCapabilities {
        StoreCapabilities(backend: "s3", appends: configuration.appendableObjects, storesChecksums: true, storesCRC64: true,
                          minimumPartSize: configuration.backendMinimumPartSize, zeroCopyReads: false, readsAtOnce: false)
    }

    /// Checks that the backend answers and accepts the keys, and creates the system bucket.
    public func open() async throws {
        try await ensureSystemBucket()
    }

    public func health() async -> StoreHealth {
        if let last = transport.lastAnswered, ContinuousClock.now - last < .seconds(1), !transport.circuit.isOpen { return .ok }
        do {
            let reply = try await transport.send(S3Call(.HEAD, bucket: configuration.systemBucket, idempotent: false))
            _ = try? await reply.bytes(limit: 1024)
            return .ok
        } catch {
            return .unreachable(reason: "\(error)")
        }
    }

    public func close() async throws {
        try await transport.shutdown()
    }

    public func setMaxUploadsPerBucket(_ limit: Int) {
        uploadLimit.store(limit, ordering: .relaxed)
    }

    var maxUploadsPerBucket: Int { uploadLimit.load(ordering: .relaxed) }

    public var sharedDocuments: (any SharedDocuments)? { S3SharedDocuments(store: self) }

    // MARK: Names

    /// The backend's name of a client's bucket (`invalidBucketName` for one that is not valid,
    /// or that would be the system bucket).
    func backend(_ bucket: String) throws(StoreError) -> String {
        try StoreNames.validateBucket(bucket)
        let name = configuration.bucketPrefix + bucket
        guard name != configuration.systemBucket else { throw .invalidBucketName(bucket: bucket) }
        return name
    }

    /// The client's name of a backend bucket, when it is one of the gateway's.
    func client(_ backendName: String) -> String? {
        guard backendName != configuration.systemBucket, backendName.hasPrefix(configuration.bucketPrefix) else { return nil }
        let name = String(backendName.dropFirst(configuration.bucketPrefix.count))
        return StoreNames.isValidBucketName(name) ? name : nil
    }

    // MARK: Errors

    /// What an error answer means, for a request about `bucket` / `key` (client names).
    func refusal(_ reply: S3Reply, bucket: String? = nil, key: String? = nil, uploadID: String? = nil) async -> StoreError {
        let error = await reply.error()
        // A 404 whose body did not say which is missing (a HEAD; an answer cut short): ask.
        if error.code.isEmpty, error.status == 404, key != nil, let bucket, (try? await bucketExists(bucket)) == false {
            return .noSuchBucket(bucket: bucket)
        }
        return Self.storeError(error, bucket: bucket, key: key, uploadID: uploadID)
    }

    static func storeError(_ error: S3ErrorReply, bucket: String?, key: String?, uploadID: String?) -> StoreError {
        switch error.code {
        case "NoSuchBucket": return .noSuchBucket(bucket: bucket ?? "")
        case "NoSuchKey": return .noSuchKey(bucket: bucket ?? "", key: key ?? "")
        case "NoSuchUpload": return .noSuchUpload(uploadID: uploadID ?? "")
        case "BucketNotEmpty": return .bucketNotEmpty(bucket: bucket ?? "")
        case "BucketAlreadyExists", "BucketAlreadyOwnedByYou": return .bucketExists(bucket: bucket ?? "")
        case "InvalidBucketName": return .invalidBucketName(bucket: bucket ?? "")
        case "PreconditionFailed": return .preconditionFailed
        case "PositionNotEqualToLength":
            return .positionNotEqualToLength(next: error.headers.first(name: "x-rgw-next-append-position").flatMap { Int64($0) } ?? 0)
        case "ObjectNotAppendable": return .objectNotAppendable
        case "BadDigest", "InvalidDigest": return .badDigest
        case "InvalidPartOrder": return .invalidPartOrder
        case "NotImplemented": return .notSupported("the storage backend: \(error.message.isEmpty ? "not implemented" : error.message)")
        case "SlowDown": return .backendThrottled(retryAfterSeconds: nil)
        case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "RequestTimeTooSkewed", "InvalidToken", "ExpiredToken":
            return .io("the storage backend refused the gateway's request (\(error.code)): check Storage's keys and the clocks")
        default:
            if error.status == 404, let key { return .noSuchKey(bucket: bucket ?? "", key: key) }
            if error.status == 404, let bucket { return .noSuchBucket(bucket: bucket) }
            return .io("the storage backend answered \(error.status) \(error.code)")
        }
    }

    /// Sends `call` and throws the refusal unless the answer is a success.
    @discardableResult
    func expectSuccess(_ call: S3Call, bucket: String? = nil, key: String? = nil, uploadID: String? = nil) async throws -> S3Reply {
        let reply = try await transport.send(call)
        guard reply.ok else { throw await refusal(reply, bucket: bucket, key: key, uploadID: uploadID) }
        return reply
    }

    /// Sends `call`, whose body is the client's `upload`, and throws the refusal unless the answer
    /// is a success. When the backend answers before it had the whole body (or not at all), the
    /// rest of the client's body is drained first (`UploadBody.drain`).
    func expectSuccess(_ call: S3Call, sending upload: UploadBody, bucket: String? = nil, key: String? = nil,
                       uploadID: String? = nil) async throws -> S3Reply {
        let reply: S3Reply
        do {
            reply = try await transport.send(call)
        } catch {
            await upload.drain()
            throw error
        }
        guard reply.ok else {
            // The error first: once the body is given up, the client stops the whole exchange.
            let error = await refusal(reply, bucket: bucket, key: key, uploadID: uploadID)
            await upload.drain()
            throw error
        }
        await upload.drain()
        return reply
    }

    /// Sends `call`, expecting a success whose body is not needed.
    func perform(_ call: S3Call, bucket: String? = nil, key: String? = nil, uploadID: String? = nil) async throws {
        let reply = try await expectSuccess(call, bucket: bucket, key: key, uploadID: uploadID)
        _ = try await reply.bytes(limit: 1024 * 1024)
    }

    /// Sends `call`, expecting a success with an XML body.
    func xml(_ call: S3Call, bucket: String? = nil, key: String? = nil, uploadID: String? = nil) async throws -> S3XML {
        let reply = try await expectSuccess(call, bucket: bucket, key: key, uploadID: uploadID)
        return try S3XML(try await reply.bytes())
    }

    // MARK: Buckets

    public func listBuckets() async throws -> [BucketInfo] {
        let document = try await xml(S3Call(.GET))
        guard let buckets = document.child(document.root, "Buckets") else { return [] }
        return document.children(buckets, "Bucket").compactMap { entry in
            guard let name = document.text(entry, "Name").flatMap(client) else { return nil }
            return BucketInfo(name: name, creationDate: S3XML.date(document.text(entry, "CreationDate")))
        }.sorted { $0.name < $1.name }
    }

    /// HEAD of a bucket: whether it exists (throws what the backend's failure means otherwise).
    func bucketExists(_ name: String) async throws -> Bool {
        let reply = try await transport.send(S3Call(.HEAD, bucket: try backend(name)))
        _ = try? await reply.bytes(limit: 1024)
        if reply.ok { return true }
        if reply.status == 404 { return false }
        throw StoreError.io("the storage backend answered HEAD of a bucket with \(reply.status)")
    }

    /// Throws `noSuchBucket` unless the bucket exists.
    func requireBucket(_ name: String) async throws {
        guard try await bucketExists(name) else { throw StoreError.noSuchBucket(bucket: name) }
    }

    @discardableResult
    public func createBucket(_ name: String) async throws -> BucketInfo {
        let backendName = try backend(name)
        // The backend answers 200 to its owner's repeated create, as S3 in us-east-1 does.
        if try await bucketExists(name) { throw StoreError.bucketExists(bucket: name) }
        try await perform(S3Call(.PUT, bucket: backendName, idempotent: true), bucket: name)
        // Rules left by a bucket of the same name that another instance deleted are not this one's.
        try await deleteSystemObject("cors/" + name)
        forgetCORS(name)
        return try await headBucket(name)
    }

    public func headBucket(_ name: String) async throws -> BucketInfo {
        _ = try backend(name)
        guard let found = try await listBuckets().first(where: { $0.name == name }) else { throw StoreError.noSuchBucket(bucket: name) }
        return found
    }

    public func bucketStats(_ name: String) async throws -> BucketStats {
        try await requireBucket(name)
        var stats = BucketStats(objectCount: 0, storageBytes: 0, multipartUploadCount: 0, multipartPartCount: 0, lastModified: nil)
        var query = ListQuery(maxKeys: 1000)
        while true {
            let page = try await listObjects(bucket: name, query: query)
            for object in page.objects {
                stats.objectCount += 1
                stats.storageBytes += object.size
                stats.lastModified = max(stats.lastModified ?? object.lastModified, object.lastModified)
            }
            guard page.isTruncated, let token = page.nextContinuationToken else { break }
            query.continuationToken = token
        }
        for upload in try await allUploads(name) {
            stats.multipartUploadCount += 1
            stats.multipartPartCount += Int64(try await backendParts(bucket: name, key: upload.key, uploadID: upload.uploadID).count)
        }
        return stats
    }

    public func deleteBucket(_ name: String) async throws {
        let backendName = try backend(name)
        try await requireBucket(name)
        let first = try await listObjects(bucket: name, query: ListQuery(maxKeys: 1))
        guard first.objects.isEmpty else { throw StoreError.bucketNotEmpty(bucket: name) }
        for upload in try await allUploads(name) {
            try? await abortMultipartUpload(bucket: name, key: upload.key, uploadID: upload.uploadID)
        }
        try await perform(S3Call(.DELETE, bucket: backendName), bucket: name)
        try await deleteSystemObject("cors/" + name)
        forgetCORS(name)
    }

    @discardableResult
    public func ensureBuckets(_ names: [String]) async throws -> [String] {
        var created: [String] = []
        for name in names where !created.contains(name) {
            do {
                try await createBucket(name)
                created.append(name)
            } catch StoreError.bucketExists {
                continue
            }
        }
        return created
    }

    // MARK: Bucket CORS

    /// Read from the system bucket, then kept for `corsStaleness`: a change another instance
    /// makes is seen within that time; this instance's own changes at once.
    public func bucketCORS(_ bucket: String) async throws -> CORSConfiguration? {
        if let cached = corsCache.withLock({ $0[bucket] }), ContinuousClock.now - cached.read < configuration.corsStaleness {
            return cached.rules
        }
        guard StoreNames.isValidBucketName(bucket) else { return nil }
        let rules = try await readSystemJSON(CORSConfiguration.self, "cors/" + bucket)
        corsCache.withLock { cache in
            if cache.count > 10_000 { cache.removeAll() }
            cache[bucket] = (rules, .now)
        }
        return rules
    }

    public func setBucketCORS(_ bucket: String, _ configuration: CORSConfiguration) async throws {
        try await requireBucket(bucket)
        try await writeSystemJSON(configuration, "cors/" + bucket)
        corsCache.withLock { $0[bucket] = (configuration, .now) }
    }

    public func deleteBucketCORS(_ bucket: String) async throws {
        try await requireBucket(bucket)
        try await deleteSystemObject("cors/" + bucket)
        corsCache.withLock { $0[bucket] = (nil, .now) }
    }

    func forgetCORS(_ bucket: String) {
        _ = corsCache.withLock { $0.removeValue(forKey: bucket) }
    }

    // MARK: Tags

    public func setObjectTags(bucket: String, key: String, tags: [String: String]) async throws {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        var body = "<Tagging><TagSet>"
        for (name, value) in tags.sorted(by: { $0.key < $1.key }) {
            body += "<Tag><Key>\(S3XML.escape(name))</Key><Value>\(S3XML.escape(value))</Value></Tag>"
        }
        body += "</TagSet></Tagging>"
        try await perform(S3Call(.PUT, bucket: backendName, key: key, query: [("tagging", "")], body: .bytes(ByteBuffer(string: body))),
                          bucket: bucket, key: key)
    }

    public func objectTags(bucket: String, key: String) async throws -> [String: String] {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        let reply = try await expectSuccess(S3Call(.GET, bucket: backendName, key: key, query: [("tagging", "")]), bucket: bucket, key: key)
        let bytes = try await reply.bytes()
        // RGW 16 answers an empty body for an object without a tag set of its own.
        guard !bytes.isEmpty else { return [:] }
        let document = try S3XML(bytes)
        var tags: [String: String] = [:]
        if let set = document.child(document.root, "TagSet") {
            for tag in document.children(set, "Tag") {
                tags[document.text(tag, "Key") ?? ""] = document.text(tag, "Value") ?? ""
            }
        }
        return tags
    }

    // MARK: Nothing at hand

    public func readAtOnce(bucket: String, key: String, range: ByteRange?) throws -> ReadAtOnce? { nil }
    public func infoInMemory(bucket: String, key: String) -> ObjectInfo? { nil }

    // MARK: The system bucket

    func ensureSystemBucket() async throws {
        if systemBucketReady.load(ordering: .relaxed) { return }
        let reply = try await transport.send(S3Call(.HEAD, bucket: configuration.systemBucket))
        _ = try? await reply.bytes(limit: 1024)
        if reply.status == 404 {
            let created = try await transport.send(S3Call(.PUT, bucket: configuration.systemBucket, idempotent: true))
            guard created.ok else { throw await refusal(created, bucket: configuration.systemBucket) }
            _ = try? await created.bytes(limit: 1024)
        } else if !reply.ok {
            throw StoreError.io("the storage backend answered HEAD of the system bucket \(configuration.systemBucket) with \(reply.status): check Storage's keys")
        }
        systemBucketReady.store(true, ordering: .relaxed)
    }

    /// The system object `key`'s bytes, or nil when there is none.
    func readSystemObject(_ key: String, ifNoneMatch: String? = nil) async throws -> (bytes: [UInt8], etag: String)?? {
        try await ensureSystemBucket()
        var headers: [(String, String)] = []
        if let ifNoneMatch { headers.append(("if-none-match", ifNoneMatch)) }
        let reply = try await transport.send(S3Call(.GET, bucket: configuration.systemBucket, key: key, headers: headers))
        if reply.status == 304 {
            _ = try? await reply.bytes(limit: 1024)
            return .some(nil)
        }
        if reply.status == 404 {
            _ = try? await reply.bytes(limit: 64 * 1024)
            return nil
        }
        guard reply.ok else { throw await refusal(reply, bucket: configuration.systemBucket, key: key) }
        return .some((try await reply.bytes(limit: 16 * 1024 * 1024), S3Metadata.quoted(reply.header("etag") ?? "")))
    }

    func readSystemJSON<T: Decodable>(_ type: T.Type, _ key: String) async throws -> T? {
        guard let found = try await readSystemObject(key), let (bytes, _) = found else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw StoreError.corrupted("the system object \(key) is not what the gateway wrote: \(error)")
        }
    }

    /// Writes a system object; `ifMatch` / `ifNoneMatch` make it conditional (`preconditionFailed`).
    @discardableResult
    func writeSystemObject(_ bytes: [UInt8], _ key: String, ifMatch: String? = nil, ifNoneMatch: String? = nil) async throws -> String {
        try await ensureSystemBucket()
        var headers: [(String, String)] = [("content-type", "application/json")]
        // Unquoted, as for objects: RGW compares a PUT's If-Match with the bare ETag.
        if let ifMatch { headers.append(("if-match", Self.backendETags(ifMatch))) }
        if let ifNoneMatch { headers.append(("if-none-match", Self.backendETags(ifNoneMatch))) }
        let reply = try await expectSuccess(S3Call(.PUT, bucket: configuration.systemBucket, key: key, headers: headers,
                                                   body: .bytes(ByteBuffer(bytes: bytes)), idempotent: ifMatch == nil && ifNoneMatch == nil),
                                            bucket: configuration.systemBucket, key: key)
        _ = try? await reply.bytes(limit: 1024)
        return S3Metadata.quoted(reply.header("etag") ?? "")
    }

    func writeSystemJSON<T: Encodable>(_ value: T, _ key: String) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try await writeSystemObject(Array(try encoder.encode(value)), key)
    }

    func deleteSystemObject(_ key: String) async throws {
        try await ensureSystemBucket()
        try await perform(S3Call(.DELETE, bucket: configuration.systemBucket, key: key), bucket: configuration.systemBucket, key: key)
    }

    /// Keys of the system bucket under `prefix`, with their modification times, in order.
    func listSystemObjects(prefix: String) async throws -> [(key: String, modified: Date)] {
        try await ensureSystemBucket()
        var keys: [(key: String, modified: Date)] = []
        var token: String?
        repeat {
            var query: [(String, String?)] = [("list-type", "2"), ("prefix", prefix), ("encoding-type", "url"), ("max-keys", "1000")]
            if let token { query.append(("continuation-token", token)) }
            let document = try await xml(S3Call(.GET, bucket: configuration.systemBucket, query: query), bucket: configuration.systemBucket)
            for entry in document.children(document.root, "Contents") {
                keys.append((S3XML.decoded(document.text(entry, "Key")), S3XML.date(document.text(entry, "LastModified"))))
            }
            token = document.text(document.root, "IsTruncated") == "true" ? document.text(document.root, "NextContinuationToken") : nil
        } while token != nil
        return keys
    }

    /// Deletes system objects, a thousand at a time.
    func deleteSystemObjects(_ keys: [String]) async throws {
        var rest = keys[...]
        while !rest.isEmpty {
            let batch = rest.prefix(1000)
            rest = rest.dropFirst(batch.count)
            try await deleteBatch(bucket: configuration.systemBucket, keys: Array(batch))
        }
    }

    /// Whether XML 1.0 can carry `key` (in a DeleteObjects body): no C0 control character but tab,
    /// line feed and carriage return (written as a reference), nothing outside Unicode's characters.
    static func fitsXML(_ key: String) -> Bool {
        key.unicodeScalars.allSatisfy { c in
            c.value >= 0x20 ? !(0xFFFE...0xFFFF).contains(c.value) : c == "\t" || c == "\n" || c == "\r"
        }
    }

    /// One DeleteObjects request; returns the backend's errors by key.
    @discardableResult
    func deleteBatch(bucket backendName: String, keys: [String], clientBucket: String? = nil) async throws -> [String: StoreError] {
        var body = "<Delete><Quiet>true</Quiet>"
        for key in keys { body += "<Object><Key>\(S3XML.escape(key))</Key></Object>" }
        body += "</Delete>"
        let bytes = ByteBuffer(string: body)
        let md5 = Base64.encode(try Crypto.md5(bytes.readableBytesView))
        let document = try await xml(S3Call(.POST, bucket: backendName, query: [("delete", "")], headers: [("content-md5", md5)],
                                            body: .bytes(bytes), idempotent: true), bucket: clientBucket ?? backendName)
        var errors: [String: StoreError] = [:]
        for entry in document.children(document.root, "Error") {
            let key = document.text(entry, "Key") ?? ""
            let reply = S3ErrorReply(status: 0, code: document.text(entry, "Code") ?? "", message: document.text(entry, "Message") ?? "", headers: [:])
            errors[key] = Self.storeError(reply, bucket: clientBucket, key: key, uploadID: nil)
        }
        return errors
    }
}

/// The store's shared documents: system objects under `shared/`, read with conditional GETs and
/// written with conditional PUTs, so that instances never overwrite each other's changes.
struct S3SharedDocuments: SharedDocuments {
    let store: S3ObjectStore

    func read(_ name: String, ifChangedFrom version: String?) async throws -> SharedDocumentRead {
        switch try await store.readSystemObject("shared/" + name, ifNoneMatch: version) {
        case nil: return .absent
        case .some(nil): return .unchanged
        case .some(let (bytes, etag)?): return .document(bytes: bytes, version: etag)
        }
    }

    func write(_ name: String, _ bytes: [UInt8], replacing version: String?) async throws -> String {
        try await store.writeSystemObject(bytes, "shared/" + name, ifMatch: version, ifNoneMatch: version == nil ? "*" : nil)
    }

    func delete(_ name: String) async throws {
        try await store.deleteSystemObject("shared/" + name)
    }
}
