import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TollgateCrypto
import TollgateDates
import TollgateHTTP
import TollgatePolicy
import TollgateStore
import TollgateTokenService
import TollgateXML

extension Gateway {
    // MARK: Reading

    /// The Range a GET or HEAD asks for; one that cannot be parsed is ignored, as S3 does.
    static func range(_ call: Call) -> ByteRange? {
        call.headers[.range].flatMap(ByteRange.parse)
    }

    func getObject(_ call: Call, bucket: String, key: String, headOnly: Bool) async throws -> Response {
        if headOnly { return try headAnswer(call, info: try await store.headObject(bucket: bucket, key: key)).response }
        let read: ObjectRead
        if let prefetched = call.prefetched {
            read = prefetched
        } else {
            read = try await store.getObject(bucket: bucket, key: key, range: Self.range(call))
        }
        let answer = try objectAnswer(call, read: read)
        if answer.status == .notModified || answer.body != nil { return answer.response }
        // A file's cached pages go from the page cache to the socket (plain TCP); anything else streams.
        let sent = metrics.bytesSent(call.dialect)
        let body: ResponseBody
        if sendsFiles, let pieces = read.body.zeroCopy {
            let channel = call.channel
            body = ResponseBody { writer in
                for try await piece in pieces {
                    switch piece {
                    case .region(let span):
                        try await channel.triggerUserOutboundEvent(HTTP1Codec.SendFile(span: span))
                        sent.increment(by: Int64(span.range.count))
                    case .bytes(let buffer):
                        try await writer.write(buffer)
                        sent.increment(by: Int64(buffer.readableBytes))
                    }
                }
                try await writer.finish(nil)
            }
        } else {
            // Parts that arrived together (a remote store's) go out in one write.
            let batches = read.body.batches
            body = ResponseBody { writer in
                for try await batch in batches {
                    try await writer.write(contentsOf: batch)
                    sent.increment(by: Int64(batch.reduce(0) { $0 + $1.readableBytes }))
                }
                try await writer.finish(nil)
            }
        }
        return Response(status: answer.status, headers: answer.headers, body: body)
    }

    /// A GET's answer for `read`: 304 when a condition says so (412 is thrown), else 200 or 206
    /// with the object's headers, and the body when it is in memory, sent with the head in one
    /// write. Without `body`, the caller sends the read's body.
    func objectAnswer(_ call: Call, read: ObjectRead) throws(GatewayError) -> Rendered {
        if let notModified = try conditionalAnswer(call, info: read.info) { return notModified }
        var headers = objectHeaders(call, info: read.info)
        if !read.isPartial { addReadChecksums(call, read.info.checksums, to: &headers) }
        applyResponseOverrides(call, to: &headers)
        // Neither is among the object's headers: appended, not searched for.
        headers.append(HTTPField(name: .contentLength, value: String(read.contentLength)))
        if read.isPartial { headers.append(HTTPField(name: .contentRange, value: read.contentRange)) }
        var answer = Rendered(status: read.isPartial ? .partialContent : .ok, headers: headers)
        if let single = read.body.singleBuffer {
            metrics.bytesSent(call.dialect).increment(by: Int64(single.readableBytes))
            answer.body = single
        }
        return answer
    }

    /// A HEAD's answer for `info`: a GET's status and headers, `response-*` overrides included
    /// (S3's HeadObject takes them as GetObject does), without its body (a Range on HEAD is
    /// answered like GET's headers).
    func headAnswer(_ call: Call, info: ObjectInfo) throws -> Rendered {
        if let notModified = try conditionalAnswer(call, info: info) { return notModified }
        var headers = objectHeaders(call, info: info)
        guard let range = Self.range(call) else {
            addReadChecksums(call, info.checksums, to: &headers)
            applyResponseOverrides(call, to: &headers)
            headers[.contentLength] = String(info.size)
            return Rendered(status: .ok, headers: headers)
        }
        let resolved = try range.resolve(size: info.size)
        applyResponseOverrides(call, to: &headers)
        headers[.contentLength] = String(resolved.count)
        headers[.contentRange] = ObjectRead.contentRange(resolved, size: info.size)
        return Rendered(status: .partialContent, headers: headers)
    }

    /// A whole object's checksums on GET and HEAD: OSS's CRC-64 always (its SDKs check it by
    /// default); S3's additional checksum when asked for with `x-amz-checksum-mode: ENABLED`.
    /// A range gets neither: they describe the whole object, not the bytes sent.
    func addReadChecksums(_ call: Call, _ checksums: ObjectChecksums, to headers: inout HTTPFields) {
        if call.dialect == .s3, call.headers[.amzChecksumMode]?.uppercased() != "ENABLED" { return }
        addChecksums(call, checksums, to: &headers)
    }

    /// `<ChecksumCRC32>…</ChecksumCRC32>` in an S3 XML answer, and, for an object's (not a
    /// part's), `<ChecksumType>`.
    func checksumElements(_ call: Call, _ checksum: AdditionalChecksum?, typed: Bool = true, into xml: inout XMLWriter) {
        guard call.dialect == .s3, let checksum else { return }
        xml.element("Checksum" + checksum.algorithm.displayName, Self.checksumValue(checksum))
        if typed { xml.element("ChecksumType", Self.checksumType(fullObject: checksum.partCount == nil)) }
    }

    /// OSS GetObjectMeta: ETag, size and time only. OSS SDKs send it as HEAD, whose
    /// `Content-Length` is the object's; sent as GET, the answer has no body, so it says 0.
    func getObjectMeta(_ call: Call, bucket: String, key: String) async throws -> Response {
        let info = try await store.headObject(bucket: bucket, key: key)
        return empty(headers: [
            .eTag: call.dialect.etag(info.etag), .lastModified: WireDate.httpDate(info.lastModifiedSeconds),
            HTTPField.Name("x-oss-object-size")!: String(info.size),
        ]).with(contentLength: call.head.method == .head ? info.size : 0)
    }

    /// If-Match / If-Unmodified-Since (412) and If-None-Match / If-Modified-Since (304), with
    /// the precedence S3 documents: a matching If-Match overrides If-Unmodified-Since, and a
    /// failing If-None-Match overrides If-Modified-Since.
    func conditionalAnswer(_ call: Call, info: ObjectInfo) throws(GatewayError) -> Rendered? {
        let modified = info.lastModifiedSeconds
        if let ifMatch = call.headers[.ifMatch] {
            if !ETag.matches(ifMatch, info.etag) { throw Self.preconditionFailed("If-Match") }
        } else if let since = call.headers[.ifUnmodifiedSince].flatMap(Self.conditionDate), modified > since {
            throw Self.preconditionFailed("If-Unmodified-Since")
        }
        let notModified: Bool
        if let ifNoneMatch = call.headers[.ifNoneMatch] {
            notModified = ETag.matches(ifNoneMatch, info.etag)
        } else if let since = call.headers[.ifModifiedSince].flatMap(Self.conditionDate) {
            notModified = modified <= since
        } else {
            notModified = false
        }
        guard notModified else { return nil }
        return Rendered(status: .notModified, headers: [.eTag: call.dialect.etag(info.etag), .lastModified: WireDate.httpDate(modified)])
    }

    /// The date of an `If-Modified-Since`-style header: an HTTP date, or ISO 8601.
    static func conditionDate(_ value: String) -> Date? {
        WireDate.parseHTTPDate(value) ?? WireDate.parseISO8601(value).map(Date.init(timeIntervalSince1970:))
    }

    static func preconditionFailed(_ condition: String) -> GatewayError {
        GatewayError(.preconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold",
                     details: [("Condition", condition)])
    }

    /// The stored headers, exactly as they were given, plus ETag, Last-Modified and user metadata.
    func objectHeaders(_ call: Call, info: ObjectInfo) -> HTTPFields {
        let metadata = info.metadata
        // Appended into room for the usual answer (these four, then length, request ID, date
        // and server): a dictionary literal would build an array of pairs first.
        var headers = HTTPFields()
        headers.reserveCapacity(8)
        headers.append(HTTPField(name: .eTag, value: call.dialect.etag(info.etag)))
        headers.append(HTTPField(name: .lastModified, value: WireDate.httpDate(info.lastModifiedSeconds)))
        headers.append(Self.acceptRangesField)
        headers.append(metadata.contentType.map { HTTPField(name: .contentType, value: $0) }
            ?? (call.dialect == .s3 ? Self.s3DefaultContentType : Self.ossDefaultContentType))
        if let value = metadata.contentEncoding { headers[.contentEncoding] = value }
        if let value = metadata.contentDisposition { headers[.contentDisposition] = value }
        if let value = metadata.cacheControl { headers[.cacheControl] = value }
        if let value = metadata.expires { headers[.expires] = value }
        if let value = metadata.contentLanguage { headers[.contentLanguage] = value }
        // In name order; sorting makes an array even of none, so none is not sorted.
        for (name, value) in metadata.userMetadata.isEmpty ? [] : metadata.userMetadata.sorted(by: { $0.key < $1.key }) {
            if let field = HTTPField.Name(call.metadataPrefix + name) { headers.append(HTTPField(name: field, value: value)) }
        }
        if info.tagCount > 0 {
            headers.append(HTTPField(name: call.dialect == .s3 ? .amzTaggingCount : .ossTaggingCount, value: String(info.tagCount)))
        }
        if call.dialect == .oss {
            headers[.ossObjectType] = info.isAppendable ? "Appendable" : (info.etag.contains("-") ? "Multipart" : "Normal")
            if let next = info.nextAppendPosition { headers[.ossNextAppendPosition] = String(next) }
        }
        return headers
    }

    /// Fields every object answer has the same, made once (each new field costs a check of its value).
    static let acceptRangesField = HTTPField(name: .acceptRanges, value: "bytes")
    /// The type of an object stored without one, in each dialect.
    static let s3DefaultContentType = HTTPField(name: .contentType, value: "binary/octet-stream")
    static let ossDefaultContentType = HTTPField(name: .contentType, value: "application/octet-stream")

    static let responseOverrides: [(String, HTTPField.Name)] = [
        ("response-content-type", .contentType), ("response-content-language", .contentLanguage),
        ("response-expires", .expires), ("response-cache-control", .cacheControl),
        ("response-content-disposition", .contentDisposition), ("response-content-encoding", .contentEncoding),
    ]

    /// `response-content-type` and friends on a (usually presigned) GET override the stored headers.
    func applyResponseOverrides(_ call: Call, to headers: inout HTTPFields) {
        guard !call.query.isEmpty else { return }
        for (parameter, field) in Self.responseOverrides {
            if let value = call.query[parameter] { headers[field] = value }
        }
    }

    // MARK: Writing

    /// Metadata from the request headers: standard headers stored exactly, user metadata under
    /// its name without the dialect's prefix (lower-cased, as both services do), and the tags of
    /// `x-amz-tagging` / `x-oss-tagging` (signed, as every header of the dialect's prefix)
    /// unless the write ignores them (`Gateway.ignoresTags`).
    func requestMetadata(_ call: Call) throws(GatewayError) -> ObjectMetadata {
        var metadata = ObjectMetadata(
            contentType: call.headers[.contentType],
            contentEncoding: call.headers[.contentEncoding].flatMap(Self.withoutAWSChunked),
            contentDisposition: call.headers[.contentDisposition],
            cacheControl: call.headers[.cacheControl],
            expires: call.headers[.expires],
            contentLanguage: call.headers[.contentLanguage]
        )
        for field in call.headers {
            let name = field.name.canonicalName
            if name.hasPrefix(call.metadataPrefix) {
                metadata.userMetadata[String(name.dropFirst(call.metadataPrefix.count))] = field.value
            }
        }
        if !Self.ignoresTags(call), let tagging = call.headers[call.dialect == .s3 ? .amzTagging : .ossTagging] {
            metadata.tags = try Tagging.parseHeader(tagging, dialect: call.dialect)
        }
        return metadata
    }

    /// `aws-chunked` describes the transfer, not the object: S3 does not store it.
    static func withoutAWSChunked(_ value: String) -> String? {
        let rest = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0 != "aws-chunked" && !$0.isEmpty }
        return rest.isEmpty ? nil : rest.joined(separator: ",")
    }

    /// OSS `x-oss-forbid-overwrite: true` (signed, as every `x-oss-` header): the write must not
    /// replace an object. S3 clients say the same with `If-None-Match: *`.
    func forbidsOverwrite(_ call: Call) -> Bool {
        call.dialect == .oss && call.headers[.ossForbidOverwrite]?.lowercased() == "true"
    }

    /// The request's conditions on the object it replaces; the store checks them atomically with
    /// the commit. Forbidding overwrite is `If-None-Match: *`.
    func writePreconditions(_ call: Call) -> WritePreconditions {
        WritePreconditions(ifMatch: call.headers[.ifMatch], ifNoneMatch: forbidsOverwrite(call) ? "*" : call.headers[.ifNoneMatch])
    }

    /// Runs a write; when it forbids overwriting, a failed precondition means the object exists,
    /// which OSS answers with 409 FileAlreadyExists.
    func refusingOverwrite<T>(_ call: Call, _ write: () async throws -> T) async throws -> T {
        guard forbidsOverwrite(call) else { return try await write() }
        do { return try await write() } catch StoreError.preconditionFailed { throw GatewayError.fileAlreadyExists() }
    }

    /// What a request body is, which decides what is computed over it.
    enum BodyKind {
        /// An object's or a part's bytes: the checksum the client sent is verified and stored
        /// with them; an OSS request's also get their CRC-64.
        case objectData
        /// An XML request, whose `x-amz-checksum-*` header or trailer is of its own bytes.
        case xmlRequest
        /// CompleteMultipartUpload's XML: an `x-amz-checksum-*` header there is the checksum of
        /// the object being completed, not of the body (a trailer still is the body's).
        case completeMultipartUpload
    }

    func verifiedBody(_ call: Call, kind: BodyKind) throws -> VerifiedBody<RequestBody> {
        var check = try BodyCheck.forRequest(identity: call.identity, contentMD5: call.headers[.contentMD5])
        var expectedMD5: [UInt8]?
        if kind == .objectData {
            (check, expectedMD5) = check.leavingMD5ToStore()
        }
        if kind == .completeMultipartUpload, case .s3(var request) = check {
            request.headerChecksum = nil
            check = .s3(request)
        }
        return VerifiedBody(base: call.body, check: check, received: metrics.bytesReceived(call.dialect),
                            computesCRC64: kind == .objectData && call.dialect == .oss, expectedMD5: expectedMD5,
                            contentLength: call.headers[.contentLength].flatMap { Int64($0) })
    }

    func putObject(_ call: Call, bucket: String, key: String) async throws -> Response {
        let body = try verifiedBody(call, kind: .objectData)
        let metadata = try requestMetadata(call)
        let info = try await refusingOverwrite(call) {
            try await journaled(call, bucket: bucket, key: key) {
                try await store.putObject(bucket: bucket, key: key, body: body, metadata: metadata, options: body.writeOptions(writePreconditions(call)))
            }
        }
        call.logger.info("object stored", metadata: ["object.bucket": "\(bucket)", "object.key": "\(key)", "object.size": "\(info.size)"])
        var headers: HTTPFields = [.eTag: call.dialect.etag(info.etag)]
        addChecksums(call, info.checksums, to: &headers)
        return empty(headers: headers)
    }

    /// The checksums a write stored, as its answer states them: S3's additional checksum (with
    /// its type, for an object's, not a part's) and OSS's CRC-64, each in its own dialect.
    func addChecksums(_ call: Call, _ checksums: ObjectChecksums, typed: Bool = true, to headers: inout HTTPFields) {
        switch call.dialect {
        case .s3:
            guard let additional = checksums.additional, let name = HTTPField.Name(additional.algorithm.headerName) else { return }
            headers[name] = Self.checksumValue(additional)
            if typed { headers[.amzChecksumType] = Self.checksumType(fullObject: additional.partCount == nil) }
        case .oss:
            if let crc = checksums.crc64ecma { headers[.ossHashCRC64ECMA] = String(crc) }
        }
    }

    /// S3's name of a checksum's type.
    static func checksumType(fullObject: Bool) -> String { fullObject ? "FULL_OBJECT" : "COMPOSITE" }

    /// Base64 of the digest; a composite one ends in `-N`, the number of parts.
    static func checksumValue(_ checksum: AdditionalChecksum) -> String {
        Base64.encode(checksum.digest) + (checksum.partCount.map { "-\($0)" } ?? "")
    }

    func appendObject(_ call: Call, bucket: String, key: String) async throws -> Response {
        guard capabilities.appends else {
            throw GatewayError.notImplemented("AppendObject is not available: the storage backend has no appendable objects.")
        }
        guard let raw = call.query["position"], let position = Int64(raw), position >= 0 else {
            throw GatewayError.invalidArgument("Position is not valid.", name: "position", value: call.query["position"] ?? "")
        }
        let body = try verifiedBody(call, kind: .objectData)
        let metadata = try requestMetadata(call)
        let info = try await journaled(call, bucket: bucket, key: key) {
            try await store.appendObject(
                bucket: bucket, key: key, position: position, body: body, metadata: metadata,
                options: body.writeOptions(WritePreconditions(ifMatch: call.headers[.ifMatch], ifNoneMatch: call.headers[.ifNoneMatch]))
            )
        }
        var headers: HTTPFields = [.eTag: call.dialect.etag(info.etag), .ossNextAppendPosition: String(info.size)]
        addChecksums(call, info.checksums, to: &headers)
        return empty(headers: headers)
    }

    func copyObject(_ call: Call, bucket: String, key: String, source: String) async throws -> Response {
        let (sourceBucket, sourceKey) = try Self.parseCopySource(source)
        let directive = call.headers[call.dialect == .s3 ? .amzMetadataDirective : .ossMetadataDirective]?.uppercased() ?? "COPY"
        guard directive == "COPY" || directive == "REPLACE" else {
            throw GatewayError.invalidArgument("Unknown metadata directive.", name: "x-amz-metadata-directive", value: directive)
        }
        if directive == "COPY", sourceBucket == bucket, sourceKey == key {
            throw GatewayError.invalidRequest(
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
        }
        let taggingDirective = call.headers[call.dialect == .s3 ? .amzTaggingDirective : .ossTaggingDirective]?.uppercased() ?? "COPY"
        guard taggingDirective == "COPY" || taggingDirective == "REPLACE" else {
            throw GatewayError.invalidArgument("Unknown tagging directive.", name: "x-amz-tagging-directive", value: taggingDirective)
        }
        // Metadata and tags each follow their own directive (COPY by default); the store takes
        // whatever is copied from the source version it copies.
        let given = directive == "REPLACE" || taggingDirective == "REPLACE" ? try requestMetadata(call) : nil
        let metadata = CopyMetadata(metadata: directive == "REPLACE" ? given : nil,
                                    tags: taggingDirective == "REPLACE" ? given?.tags : nil)
        let info = try await refusingOverwrite(call) {
            try await journaled(call, bucket: bucket, key: key) {
                try await store.copyObject(
                    from: ObjectLocation(bucket: sourceBucket, key: sourceKey), to: ObjectLocation(bucket: bucket, key: key),
                    metadata: metadata,
                    options: CopyOptions(preconditions: writePreconditions(call), sourceConditions: copySourceConditions(call))
                )
            }
        }
        var xml = document(call, root: "CopyObjectResult")
        xml.element("LastModified", WireDate.iso8601(info.lastModified, milliseconds: 0))
        let etag = call.dialect.etag(info.etag)
        xml.element("ETag", etag)
        checksumElements(call, info.checksums.additional, into: &xml)
        var headers: HTTPFields = [.eTag: etag]
        if call.dialect == .oss { addChecksums(call, info.checksums, to: &headers) }
        return xmlResponse(xml, headers: headers)
    }

    /// `x-amz-copy-source-if-*` (and the OSS spellings), for the store to check against the
    /// source version it copies (`copySourceConditionFailed`, a 412 naming the header).
    func copySourceConditions(_ call: Call) -> CopySourceConditions {
        let prefix = Self.copySourceConditionPrefix(call.dialect)
        return CopySourceConditions(
            ifMatch: call.header(prefix + "match"), ifNoneMatch: call.header(prefix + "none-match"),
            ifModifiedSince: call.header(prefix + "modified-since").flatMap(Self.conditionDate),
            ifUnmodifiedSince: call.header(prefix + "unmodified-since").flatMap(Self.conditionDate)
        )
    }

    static func copySourceConditionPrefix(_ dialect: Dialect) -> String {
        dialect == .s3 ? "x-amz-copy-source-if-" : "x-oss-copy-source-if-"
    }

    // MARK: Deleting

    func deleteObject(_ call: Call, bucket: String, key: String) async throws -> Response {
        _ = try await store.headBucket(bucket)
        _ = try await journaledDelete(call, bucket: bucket, keys: [key]) { _ in
            try await store.deleteObject(bucket: bucket, key: key)
            return [DeleteResult(key: key, error: nil)]
        }
        return empty(.noContent)
    }

    /// DeleteObjects / DeleteMultipleObjects. Each key is authorised on its own (a denied key is
    /// an `AccessDenied` entry, the rest are deleted). The store keeps one version per key, whose
    /// id is `null`: an entry naming that version deletes the object, and the answer echoes it
    /// (cleanup tools list versions and delete them by id); any other version id is that entry's
    /// `NoSuchVersion`. Quiet answers list errors only. With `encoding-type=url` (oss2 and the
    /// OSS SDKs always send it) the answer's keys are URL-encoded, as listings encode them, and
    /// say so in `<EncodingType>`; the request's keys are as they are.
    func deleteObjects(_ call: Call, bucket: String) async throws -> Response {
        let encodeURL = try Self.encodesURL(call.query)
        func encoded(_ key: String) -> String { encodeURL ? Self.urlEncodeForListing(key) : key }
        let request = try Self.parseXML(try await collectXMLBody(call), DeleteObjectsRequest.parse)
        var refused: [(key: String, code: String, message: String)] = []
        var allowed: [DeleteObjectsRequest.Entry] = []
        let context = call.identity.claims.map { policyContext(call, claims: $0) }
        if context != nil, call.policy == nil { throw GatewayError.accessDenied() }
        for entry in request.objects {
            if let policy = call.policy, let context,
               !policy.evaluate(GatewayOperation.deleteObject.requiredChecks(bucket: bucket, key: entry.key), context: context).isAllowed {
                refused.append((entry.key, "AccessDenied", "Access Denied"))
            } else if let version = entry.versionId, version != "null" {
                refused.append((entry.key, "NoSuchVersion", "The specified version does not exist."))
            } else {
                allowed.append(entry)
            }
        }
        _ = try await store.headBucket(bucket)
        let results = try await journaledDelete(call, bucket: bucket, keys: allowed.map(\.key)) { keys in
            try await store.deleteObjects(bucket: bucket, keys: keys)
        }
        var xml = document(call, root: "DeleteResult")
        if encodeURL { xml.element("EncodingType", "url") }
        for (entry, result) in zip(allowed, results) {
            if let error = result.error.map(GatewayError.init) {
                refused.append((result.key, error.code, error.message))
            } else if !request.quiet {
                xml.element("Deleted") { deleted in
                    deleted.element("Key", encoded(result.key))
                    if let version = entry.versionId { deleted.element("VersionId", version) }
                }
            }
        }
        for entry in refused {
            xml.element("Error") { error in
                error.element("Key", encoded(entry.key))
                error.element("Code", entry.code)
                error.element("Message", entry.message)
            }
        }
        return xmlResponse(xml)
    }
}

extension Response {
    func with(contentLength: Int64) -> Response {
        var copy = self
        copy.headers[.contentLength] = String(contentLength)
        return copy
    }
}
