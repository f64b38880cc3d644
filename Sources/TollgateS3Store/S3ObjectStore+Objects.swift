import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TollgateCrypto
import TollgateDates
import TollgateSignature
import TollgateStore

extension S3ObjectStore {
    // MARK: Writing

    /// Streams the body to the backend as the request's body (signed chunk by chunk), with the
    /// client's conditions, `Content-MD5` and stated checksums; the backend commits it or nothing.
    /// Checksums known only once the body ended (OSS's CRC-64, a trailer's) are then added to the
    /// object's reserved metadata by a copy onto itself, conditional on its ETag (no other write
    /// in between); until then, or if that fails, the object reads without them (and OSS
    /// clients skip their check, as for an object written through S3).
    public func putObject<Body: AsyncSequence>(
        bucket: String, key: String, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        var headers = S3Metadata.headers(metadata, S3Metadata.Reserved(checksums: options.statedChecksums))
        if !metadata.tags.isEmpty { headers.append(("x-amz-tagging", S3Metadata.tagging(metadata.tags))) }
        headers += Self.preconditionHeaders(options.preconditions)
        if let md5 = options.expectedMD5 { headers.append(("content-md5", Base64.encode(md5))) }
        let upload = UploadBody(body, length: options.contentLength)
        let reply = try await expectSuccess(S3Call(.PUT, bucket: backendName, key: key, headers: headers, body: try await upload.prepared()),
                                            sending: upload, bucket: bucket, key: key)
        _ = try? await reply.bytes(limit: 64 * 1024)
        var etag = S3Metadata.quoted(reply.header("etag") ?? "")
        var modified = Self.answerDate(reply)
        let checksums = options.bodyChecksums?() ?? options.statedChecksums
        var stored = metadata
        stored.tags = [:]
        if checksums != options.statedChecksums,
           let amended = await amend(backendName: backendName, bucket: bucket, key: key, etag: etag, metadata: stored,
                                     reserved: S3Metadata.Reserved(checksums: checksums), tags: metadata.tags) {
            (etag, modified) = amended
        }
        return ObjectInfo(bucket: bucket, key: key, size: upload.count, etag: etag, lastModified: modified, metadata: stored,
                          isAppendable: false, checksums: checksums, tagCount: metadata.tags.count)
    }

    /// Rewrites an object's metadata with `reserved` by a copy onto itself, only while its ETag is
    /// `etag`; the copy keeps its bytes and ETag, and gets `tags` again (RGW 16 drops an object's
    /// tags when a copy replaces its metadata). Returns the copy's ETag and time, or nil when it
    /// did not happen (the object changed meanwhile, or the backend failed: logged).
    func amend(backendName: String, bucket: String, key: String, etag: String, metadata: ObjectMetadata,
               reserved: S3Metadata.Reserved, tags: [String: String]) async -> (etag: String, modified: Date)? {
        var headers = S3Metadata.headers(metadata, reserved)
        headers += [("x-amz-copy-source", Self.copySource(backendName, key)), ("x-amz-metadata-directive", "REPLACE"),
                    ("x-amz-copy-source-if-match", Self.backendETags(etag)), ("x-amz-copy-if-match", Self.backendETags(etag))]
        do {
            let document = try await xml(S3Call(.PUT, bucket: backendName, key: key, headers: headers, idempotent: true), bucket: bucket, key: key)
            let copied = document.text(document.root, "ETag").map(S3Metadata.quoted) ?? etag
            if !tags.isEmpty { try await setObjectTags(bucket: bucket, key: key, tags: tags) }
            return (copied, S3XML.date(document.text(document.root, "LastModified")))
        } catch StoreError.preconditionFailed {
            return nil
        } catch {
            logger.warning("object stored without its checksums in the backend's metadata",
                           metadata: ["object.bucket": "\(bucket)", "object.key": "\(key)", "store.error": "\(error)"])
            return nil
        }
    }

    static func preconditionHeaders(_ preconditions: WritePreconditions) -> [(String, String)] {
        var headers: [(String, String)] = []
        if let ifMatch = preconditions.ifMatch { headers.append(("if-match", backendETags(ifMatch))) }
        if let ifNoneMatch = preconditions.ifNoneMatch { headers.append(("if-none-match", backendETags(ifNoneMatch))) }
        return headers
    }

    /// ETags in a condition as RGW compares them: without quotes (a quoted one never matches there).
    static func backendETags(_ value: String) -> String {
        value.split(separator: ",").map { item in
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            return trimmed == "*" ? "*" : ETag.normalize(trimmed)
        }.joined(separator: ",")
    }

    /// `x-amz-copy-source`: `/bucket/key`, the key URL-encoded.
    static func copySource(_ backendName: String, _ key: String) -> String {
        "/" + backendName + "/" + PercentEncoding.encode(key, keepSlash: true)
    }

    /// The time of a write as its answer states it (`Last-Modified`, else `Date`).
    static func answerDate(_ reply: S3Reply) -> Date {
        (reply.header("last-modified") ?? reply.header("date")).flatMap(WireDate.parseHTTPDate) ?? Date()
    }

    // MARK: Reading

    public func getObject(bucket: String, key: String, range: ByteRange?) async throws -> ObjectRead {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        if case .suffix(0)? = range { throw StoreError.invalidRange(size: try await headObject(bucket: bucket, key: key).size) }
        var headers: [(String, String)] = []
        if let range { headers.append(("range", Self.rangeHeader(range))) }
        let reply = try await transport.send(S3Call(.GET, bucket: backendName, key: key, headers: headers))
        switch reply.status {
        case 200:
            let size = reply.header("content-length").flatMap { Int64($0) } ?? 0
            let info = S3Metadata.info(bucket: bucket, key: key, headers: reply.headers, size: size)
            // A backend that ignored the range: the range is cut here, so the client gets what it asked for.
            if let range {
                let served = try range.resolve(size: size)
                return ObjectRead(info: info, range: served, isPartial: true, body: ObjectBody(RangeOfBody(base: reply.body, range: served)))
            }
            return ObjectRead(info: info, range: 0..<size, isPartial: false, body: try await Self.body(reply, length: size))
        case 206:
            guard let (served, size) = reply.header("content-range").flatMap(Self.parseContentRange) else {
                throw StoreError.io("the storage backend answered a range without Content-Range")
            }
            let info = S3Metadata.info(bucket: bucket, key: key, headers: reply.headers, size: size)
            return ObjectRead(info: info, range: served, isPartial: true, body: try await Self.body(reply, length: Int64(served.count)))
        case 416:
            _ = try? await reply.bytes(limit: 64 * 1024)
            throw StoreError.invalidRange(size: try await headObject(bucket: bucket, key: key).size)
        default:
            throw await refusal(reply, bucket: bucket, key: key)
        }
    }

    public func headObject(bucket: String, key: String) async throws -> ObjectInfo {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        let reply = try await transport.send(S3Call(.HEAD, bucket: backendName, key: key))
        _ = try? await reply.bytes(limit: 64 * 1024)
        if reply.ok {
            let size = reply.header("content-length").flatMap { Int64($0) } ?? 0
            return S3Metadata.info(bucket: bucket, key: key, headers: reply.headers, size: size)
        }
        if reply.status == 404 {
            // A HEAD's answer has no body to say which is missing.
            try await requireBucket(bucket)
            throw StoreError.noSuchKey(bucket: bucket, key: key)
        }
        throw StoreError.io("the storage backend answered HEAD of an object with \(reply.status)")
    }

    /// Bodies up to this size are read whole before the answer goes out: the gateway then sends
    /// them with the head in one write, on the connection's event loop (thumbnails, manifests).
    static let wholeBody: Int64 = 64 * 1024

    /// An answer's body: in memory when small (`wholeBody`), else streamed as it arrives.
    static func body(_ reply: S3Reply, length: Int64) async throws -> ObjectBody {
        guard length <= wholeBody else { return reply.body.objectBody }
        do {
            return ObjectBody(try await reply.body.collect(upTo: Int(wholeBody)))
        } catch {
            throw S3Transport.failure(error, during: "reading an object")
        }
    }

    static func rangeHeader(_ range: ByteRange) -> String {
        switch range {
        case .closed(let a, let b): "bytes=\(a)-\(b)"
        case .from(let a): "bytes=\(a)-"
        case .suffix(let n): "bytes=-\(n)"
        }
    }

    /// `bytes a-b/size`.
    static func parseContentRange(_ value: String) -> (Range<Int64>, Int64)? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6)
        let halves = spec.split(separator: "/")
        guard halves.count == 2, let size = Int64(halves[1]) else { return nil }
        let bounds = halves[0].split(separator: "-")
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first <= last else { return nil }
        return (first..<(last + 1), size)
    }

    // MARK: Deleting

    public func deleteObject(bucket: String, key: String) async throws {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        try await perform(S3Call(.DELETE, bucket: backendName, key: key), bucket: bucket, key: key)
    }

    public func deleteObjects(bucket: String, keys: [String]) async throws -> [DeleteResult] {
        let backendName = try backend(bucket)
        var refused: [String: StoreError] = [:]
        var valid: [String] = []
        for key in keys {
            do throws(StoreError) {
                try StoreNames.validateKey(key)
                valid.append(key)
            } catch {
                refused[key] = error
            }
        }
        if valid.isEmpty { try await requireBucket(bucket) }
        // Keys XML cannot carry are deleted one by one.
        for key in valid where !Self.fitsXML(key) {
            do { try await deleteObject(bucket: bucket, key: key) } catch let error as StoreError { refused[key] = error }
        }
        valid = valid.filter(Self.fitsXML)
        var rest = valid[...]
        while !rest.isEmpty {
            let batch = rest.prefix(1000)
            rest = rest.dropFirst(batch.count)
            let errors = try await deleteBatch(bucket: backendName, keys: Array(batch), clientBucket: bucket)
            refused.merge(errors) { first, _ in first }
        }
        return keys.map { DeleteResult(key: $0, error: refused[$0]) }
    }

    // MARK: Copies

    /// A server-side copy. The source is read first (HEAD) for the conditions, the metadata the
    /// copy resolves against and its reserved values; the copy then names that version
    /// (`x-amz-copy-source-if-match` and RGW's `x-amz-copy-if-match` with its ETag), so a source
    /// replaced in between fails the copy, which starts over with the new version.
    public func copyObject(
        from source: ObjectLocation, to target: ObjectLocation, metadata: CopyMetadata, options: CopyOptions
    ) async throws -> ObjectInfo {
        let sourceBackend = try backend(source.bucket)
        let targetBackend = try backend(target.bucket)
        try StoreNames.validateKey(target.key)
        var attempt = 0
        while true {
            attempt += 1
            let current = try await headObject(bucket: source.bucket, key: source.key)
            try options.sourceConditions.check(current)
            if options.preconditions != .none {
                let existing: ObjectInfo?
                do { existing = try await headObject(bucket: target.bucket, key: target.key) } catch StoreError.noSuchKey { existing = nil }
                try options.preconditions.check(against: existing)
            }
            let checksums = current.checksums.ofCopy
            var resolved = metadata.metadata ?? current.metadata
            resolved.tags = [:]
            var headers: [(String, String)] = [("x-amz-copy-source", Self.copySource(sourceBackend, source.key)),
                                               ("x-amz-copy-source-if-match", Self.backendETags(current.etag)),
                                               ("x-amz-copy-if-match", Self.backendETags(current.etag))]
            // The backend copies metadata as it is unless told otherwise: a given one, or reserved
            // values that change (a composite checksum does not describe the copy).
            if metadata.metadata != nil || checksums != current.checksums || current.isAppendable {
                headers.append(("x-amz-metadata-directive", "REPLACE"))
                headers += S3Metadata.headers(resolved, S3Metadata.Reserved(checksums: checksums))
            }
            // RGW 16 copies tags only with the metadata (not under REPLACE) and ignores a tagging
            // directive: the copy's tags are set after it when they are not the source's own.
            let replaced = headers.contains { $0.0 == "x-amz-metadata-directive" }
            let tags: [String: String]?
            if let given = metadata.tags {
                tags = given
            } else if replaced, current.tagCount > 0 {
                tags = try await objectTags(bucket: source.bucket, key: source.key)
            } else {
                tags = nil
            }
            headers += Self.preconditionHeaders(options.preconditions)
            do {
                let document = try await xml(S3Call(.PUT, bucket: targetBackend, key: target.key, headers: headers, idempotent: true),
                                             bucket: target.bucket, key: target.key)
                if let tags { try await setObjectTags(bucket: target.bucket, key: target.key, tags: tags) }
                let etag = document.text(document.root, "ETag").map(S3Metadata.quoted) ?? current.etag
                return ObjectInfo(bucket: target.bucket, key: target.key, size: current.size, etag: etag,
                                  lastModified: S3XML.date(document.text(document.root, "LastModified")), metadata: resolved,
                                  isAppendable: false, checksums: checksums, tagCount: metadata.tags?.count ?? current.tagCount)
            } catch StoreError.preconditionFailed where attempt < 3 {
                // The source changed between its HEAD and the copy (or the target's condition): again.
                continue
            }
        }
    }

    // MARK: Appends

    /// OSS AppendObject onto the backend's appendable objects (RGW's `PUT ?append&position=N`,
    /// which checks the position atomically). Each append replaces the object's metadata at the
    /// backend, so the object's own is sent again; its CRC-64, known only once the body ended, is
    /// then set by an empty append at the new end (the backend refuses it if another append came
    /// first, and the object then reads without a CRC-64 rather than with a wrong one).
    public func appendObject<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        guard configuration.appendableObjects else {
            throw StoreError.notSupported("AppendObject: the storage backend has no appendable objects")
        }
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        guard position >= 0 else { throw StoreError.negativePosition }
        let current: ObjectInfo?
        do { current = try await headObject(bucket: bucket, key: key) } catch StoreError.noSuchKey { current = nil }
        if let current {
            if let refusal = current.appendRefusal(position: position) { throw refusal }
        } else if position != 0 {
            throw StoreError.positionNotEqualToLength(next: 0)
        }
        try options.preconditions.check(against: current)
        var stored = current?.metadata ?? metadata
        stored.tags = [:]
        // Each append replaces the object's metadata and tags at RGW: the first append's tags
        // (the object's, as OSS keeps them) go again with every later one.
        let tags: [String: String]
        if let current {
            tags = current.tagCount > 0 ? try await objectTags(bucket: bucket, key: key) : [:]
        } else {
            tags = metadata.tags
        }
        var headers = S3Metadata.headers(stored, S3Metadata.Reserved())
        if !tags.isEmpty { headers.append(("x-amz-tagging", S3Metadata.tagging(tags))) }
        if let md5 = options.expectedMD5 { headers.append(("content-md5", Base64.encode(md5))) }
        let upload = UploadBody(body, length: options.contentLength)
        let reply = try await expectSuccess(
            S3Call(.PUT, bucket: backendName, key: key, query: [("append", nil), ("position", String(position))], headers: headers, body: try await upload.prepared()),
            sending: upload, bucket: bucket, key: key)
        _ = try? await reply.bytes(limit: 64 * 1024)
        let size = reply.header("x-rgw-next-append-position").flatMap { Int64($0) } ?? position + upload.count
        let appended = options.bodyChecksums?() ?? .none
        let checksums = current.map { $0.checksums.appending(appended, length: upload.count) } ?? ObjectChecksums(crc64ecma: appended.crc64ecma)
        if checksums.crc64ecma != nil {
            var fixed = S3Metadata.headers(stored, S3Metadata.Reserved(checksums: checksums, crc64Length: size))
            if !tags.isEmpty { fixed.append(("x-amz-tagging", S3Metadata.tagging(tags))) }
            if let fix = try? await transport.send(S3Call(.PUT, bucket: backendName, key: key, query: [("append", nil), ("position", String(size))],
                                                          headers: fixed, body: .bytes(ByteBuffer()), idempotent: false)) {
                _ = try? await fix.bytes(limit: 64 * 1024)
            }
        }
        // An append's answer has the ETag of its piece; the object's, which GET and HEAD give, is HEAD's.
        let info = try await headObject(bucket: bucket, key: key)
        guard info.size == size else {
            // Another append came in between: this one's values are its own.
            return ObjectInfo(bucket: bucket, key: key, size: size, etag: info.etag, lastModified: info.lastModified, metadata: stored,
                              isAppendable: true, checksums: checksums, tagCount: info.tagCount)
        }
        return ObjectInfo(bucket: bucket, key: key, size: size, etag: info.etag, lastModified: info.lastModified, metadata: info.metadata,
                          isAppendable: true, checksums: checksums, tagCount: info.tagCount)
    }

    // MARK: Listing

    /// ListObjects as every store pages it (`ListWalk`'s rules, the same continuation tokens),
    /// over the backend's ListObjectsV2 without a delimiter: the store rolls keys up into common
    /// prefixes itself and, past one, asks the backend again from the prefix's end, so a prefix
    /// of any number of keys costs one request. (Backends differ in how a delimiter meets a
    /// marker: RGW 16 skips the common prefix `a/` after the marker `a`.)
    public func listObjects(bucket: String, query: ListQuery) async throws -> ListResult {
        let backendName = try backend(bucket)
        let walk = try ListWalk(query)
        if walk.maxKeys == 0 { try await requireBucket(bucket) }
        var objects: [ObjectSummary] = []
        var prefixes: [String] = []
        var lastItem: [UInt8]?
        var truncated = false
        var cursor = walk.start
        var count = 0
        scan: while walk.maxKeys > 0 {
            let limit = walk.maxKeys - count + 1
            let fetched = try await seek(backendName, bucket: bucket, prefix: query.prefix, from: cursor, limit: limit)
            for summary in fetched {
                let key = Array(summary.key.utf8)
                if count == walk.maxKeys {
                    truncated = true
                    break scan
                }
                if let delimiter = walk.delimiter, let common = KeyBytes.rollup(key, prefix: walk.prefix, delimiter: delimiter) {
                    prefixes.append(KeyBytes.string(common))
                    count += 1
                    lastItem = common
                    guard let next = KeyBytes.successor(common) else { break scan }
                    cursor = ListCursor(bound: next, inclusive: true)
                    continue scan
                }
                objects.append(summary)
                count += 1
                lastItem = key
                cursor = ListCursor(bound: key, inclusive: false)
            }
            if fetched.count < limit { break scan }
        }
        let next = truncated ? lastItem : nil
        return ListResult(objects: objects, commonPrefixes: prefixes, isTruncated: truncated, nextMarker: next.map(KeyBytes.string),
                          nextContinuationToken: next.map { Base64.encodeURL($0) })
    }

    /// Up to `limit` keys under `prefix` from `cursor` on, in byte order.
    func seek(_ backendName: String, bucket: String, prefix: String, from cursor: ListCursor, limit: Int) async throws -> [ObjectSummary] {
        var found: [ObjectSummary] = []
        var token: String?
        let startAfter = Self.startAfter(cursor)
        for _ in 0..<1000 {
            var parameters: [(String, String?)] = [("list-type", "2"), ("encoding-type", "url"), ("max-keys", String(min(1000, limit - found.count + 1)))]
            if !prefix.isEmpty { parameters.append(("prefix", prefix)) }
            if let token {
                parameters.append(("continuation-token", token))
            } else if let startAfter {
                parameters.append(("start-after", startAfter))
            }
            let document = try await xml(S3Call(.GET, bucket: backendName, query: parameters), bucket: bucket)
            for entry in document.children(document.root, "Contents") {
                let key = S3XML.decoded(document.text(entry, "Key"))
                // A start-after below the cursor (a bound that is not a key) lets a few keys through.
                guard cursor.admits(Array(key.utf8)) else { continue }
                found.append(ObjectSummary(key: key, size: Int64(document.text(entry, "Size") ?? "") ?? 0,
                                           etag: S3Metadata.quoted(document.text(entry, "ETag") ?? ""),
                                           lastModified: S3XML.date(document.text(entry, "LastModified"))))
            }
            token = document.text(document.root, "IsTruncated") == "true" ? document.text(document.root, "NextContinuationToken") : nil
            if found.count >= limit || token == nil || token == "" { break }
        }
        return found
    }

    /// The backend's (exclusive) start-after for a cursor: the key itself, or for an inclusive
    /// bound (a prefix's successor) the largest string below it that ends in U+10FFFF, else a
    /// shorter one; `seek` drops what lies below the bound.
    static func startAfter(_ cursor: ListCursor) -> String? {
        guard !cursor.bound.isEmpty else { return nil }
        if !cursor.inclusive { return String(validating: cursor.bound, as: UTF8.self) ?? String(decoding: cursor.bound, as: UTF8.self) }
        var below = cursor.bound
        let last = below.removeLast()
        if last > 0 {
            let lowered = below + [last - 1]
            if let text = String(validating: lowered, as: UTF8.self) { return text + "\u{10FFFF}" }
        }
        while !below.isEmpty, String(validating: below, as: UTF8.self) == nil { below.removeLast() }
        return below.isEmpty ? nil : String(decoding: below, as: UTF8.self)
    }
}

/// `range` of a body that came whole (a backend that ignored the Range header).
struct RangeOfBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: BackendBody
    let range: Range<Int64>

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: BackendBody.AsyncIterator
        let range: Range<Int64>
        var offset: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            while offset < range.upperBound {
                guard var buffer = try await base.next() else { return nil }
                let start = offset
                offset += Int64(buffer.readableBytes)
                let from = Swift.max(range.lowerBound, start)
                let to = Swift.min(range.upperBound, offset)
                guard from < to else { continue }
                buffer.moveReaderIndex(forwardBy: Int(from - start))
                return buffer.readSlice(length: Int(to - from))
            }
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), range: range) }
}
