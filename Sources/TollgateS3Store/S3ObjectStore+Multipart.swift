import Foundation
import NIOCore
import NIOHTTP1
import TollgateCrypto
import TollgateStore

/// What the store keeps of a multipart upload in the system bucket (`mpu/ID/info`), written
/// when the upload is created: the backend's own upload keeps neither the checksum the object is
/// to get nor the metadata in a form ListParts returns.
struct UploadRecord: Codable, Sendable, Equatable {
    var bucket: String
    var key: String
    var metadata: ObjectMetadata
    var checksumAlgorithm: String?
    var checksumFullObject: Bool?
    /// Milliseconds since 1970.
    var initiated: Int64

    var checksum: UploadChecksum? {
        guard let name = checksumAlgorithm, let algorithm = ChecksumAlgorithm(rawValue: name) else { return nil }
        return UploadChecksum(algorithm: algorithm, fullObject: checksumFullObject ?? false)
    }

    func upload(_ uploadID: String) -> MultipartUpload {
        MultipartUpload(bucket: bucket, key: key, uploadID: uploadID, initiated: Millis.date(initiated), metadata: metadata, checksum: checksum)
    }
}

/// A completed upload (`mpu/ID/done`), to answer a retried CompleteMultipartUpload.
struct CompletedRecord: Codable, Sendable {
    var bucket: String
    var key: String
    var etag: String
}

/// A part's own values (`mpu/ID/p/NNNNN/ETAG/MS/CRC64/ALGORITHM/DIGEST`, an empty object: one
/// listing of the prefix gives every part's), which the backend's ListParts does not carry.
struct PartRecord: Sendable, Equatable {
    var partNumber: Int
    /// Without quotes.
    var etag: String
    var lastModified: Int64
    var checksums: ObjectChecksums

    var key: String {
        let number = String(partNumber)
        let padded = String(repeating: "0", count: max(0, 5 - number.count)) + number
        let crc = checksums.crc64ecma.map(String.init) ?? "-"
        let algorithm = checksums.additional?.algorithm.rawValue ?? "-"
        let digest = checksums.additional.map { Base64.encodeURL($0.digest) } ?? "-"
        return "p/\(padded)/\(etag)/\(lastModified)/\(crc)/\(algorithm)/\(digest)"
    }

    init(partNumber: Int, etag: String, lastModified: Int64, checksums: ObjectChecksums) {
        self.partNumber = partNumber
        self.etag = etag
        self.lastModified = lastModified
        self.checksums = checksums
    }

    init?(key: Substring) {
        let fields = key.split(separator: "/", omittingEmptySubsequences: false)
        guard fields.count == 7, fields[0] == "p", let number = Int(fields[1]), let modified = Int64(fields[3]) else { return nil }
        var checksums = ObjectChecksums()
        if fields[4] != "-" { checksums.crc64ecma = UInt64(fields[4]) }
        if fields[5] != "-", let algorithm = ChecksumAlgorithm(rawValue: String(fields[5])), let digest = Base64.decode(fields[6]) {
            checksums.additional = AdditionalChecksum(algorithm: algorithm, digest: digest)
        }
        self.init(partNumber: number, etag: String(fields[2]), lastModified: modified, checksums: checksums)
    }
}

extension S3ObjectStore {
    static func uploadPrefix(_ uploadID: String) -> String { "mpu/" + uploadID + "/" }

    // MARK: Uploads

    public func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata, checksum: UploadChecksum?) async throws -> MultipartUpload {
        let backendName = try backend(bucket)
        try StoreNames.validateKey(key)
        let limit = maxUploadsPerBucket
        if try await countUploads(bucket, upTo: limit) >= limit { throw StoreError.tooManyUploads(bucket: bucket, limit: limit) }
        var stored = metadata
        stored.tags = [:]
        // The tags are set once the upload completes (from its record): RGW 16 keeps tags given at
        // initiation in a form it then cannot read back.
        let headers = S3Metadata.headers(stored, S3Metadata.Reserved(uploadChecksum: checksum))
        let reply = try await expectSuccess(S3Call(.POST, bucket: backendName, key: key, query: [("uploads", nil)], headers: headers),
                                            bucket: bucket, key: key)
        let document = try S3XML(try await reply.bytes())
        guard let uploadID = document.text(document.root, "UploadId"), !uploadID.isEmpty else {
            throw StoreError.io("the storage backend created an upload without an id")
        }
        let record = UploadRecord(bucket: bucket, key: key, metadata: metadata, checksumAlgorithm: checksum?.algorithm.rawValue,
                                  checksumFullObject: checksum?.fullObject, initiated: Millis.from(Self.answerDate(reply)))
        do {
            try await writeSystemJSON(record, Self.uploadPrefix(uploadID) + "info")
        } catch {
            _ = try? await transport.send(S3Call(.DELETE, bucket: backendName, key: key, query: [("uploadId", uploadID)]))
            throw error
        }
        remember(record, uploadID)
        return record.upload(uploadID)
    }

    func remember(_ record: UploadRecord, _ uploadID: String) {
        uploadCache.withLock { cache in
            if cache.count > 4096 { cache.removeAll() }
            cache[uploadID] = record
        }
    }

    /// The upload's record, when it is an upload of `bucket`/`key` (`noSuchUpload` otherwise).
    func uploadRecord(bucket: String, key: String, uploadID: String) async throws -> UploadRecord {
        _ = try backend(bucket)
        var record = uploadCache.withLock { $0[uploadID] }
        if record == nil, !uploadID.contains("/"), !uploadID.isEmpty {
            record = try await readSystemJSON(UploadRecord.self, Self.uploadPrefix(uploadID) + "info")
            if let record { remember(record, uploadID) }
        }
        guard let record, record.bucket == bucket, record.key == key else {
            try await requireBucket(bucket)
            throw StoreError.noSuchUpload(uploadID: uploadID)
        }
        return record
    }

    func forget(_ uploadID: String) async {
        _ = uploadCache.withLock { $0.removeValue(forKey: uploadID) }
        if let keys = try? await listSystemObjects(prefix: Self.uploadPrefix(uploadID)) {
            try? await deleteSystemObjects(keys.map(\.key).filter { !$0.hasSuffix("/done") })
        }
    }

    // MARK: Parts

    public func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try MultipartRules.validatePartNumber(partNumber)
        let backendName = try backend(bucket)
        let record = try await uploadRecord(bucket: bucket, key: key, uploadID: uploadID)
        let upload = record.upload(uploadID)
        try MultipartRules.checkPartChecksum(options.statedChecksums, upload: upload)
        var headers: [(String, String)] = []
        if let md5 = options.expectedMD5 { headers.append(("content-md5", Base64.encode(md5))) }
        let body = UploadBody(body, length: options.contentLength)
        let reply = try await expectSuccess(
            S3Call(.PUT, bucket: backendName, key: key, query: [("partNumber", String(partNumber)), ("uploadId", uploadID)], headers: headers,
                   body: try await body.prepared()),
            sending: body, bucket: bucket, key: key, uploadID: uploadID)
        _ = try? await reply.bytes(limit: 64 * 1024)
        let etag = S3Metadata.quoted(reply.header("etag") ?? "")
        let checksums = options.bodyChecksums?() ?? options.statedChecksums
        // Stored at the backend already; a part of another algorithm is refused all the same (and
        // a completion that lists it gets no checksum of the upload's algorithm).
        try MultipartRules.checkPartChecksum(checksums, upload: upload)
        let part = PartRecord(partNumber: partNumber, etag: ETag.normalize(etag), lastModified: Millis.from(Self.answerDate(reply)), checksums: checksums)
        try await writeSystemObject([], Self.uploadPrefix(uploadID) + part.key)
        return PartInfo(partNumber: partNumber, etag: etag, size: body.count, lastModified: Millis.date(part.lastModified), checksums: checksums)
    }

    public func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int, source: ObjectLocation, range: ByteRange?, options: CopyOptions
    ) async throws -> PartInfo {
        try MultipartRules.validatePartNumber(partNumber)
        let backendName = try backend(bucket)
        let sourceBackend = try backend(source.bucket)
        _ = try await uploadRecord(bucket: bucket, key: key, uploadID: uploadID)
        let current = try await headObject(bucket: source.bucket, key: source.key)
        try options.sourceConditions.check(current)
        let served = try range?.resolve(size: current.size) ?? 0..<current.size
        var headers: [(String, String)] = [("x-amz-copy-source", Self.copySource(sourceBackend, source.key)),
                                           ("x-amz-copy-source-if-match", Self.backendETags(current.etag)),
                                           ("x-amz-copy-if-match", Self.backendETags(current.etag))]
        if range != nil, !served.isEmpty { headers.append(("x-amz-copy-source-range", "bytes=\(served.lowerBound)-\(served.upperBound - 1)")) }
        let document = try await xml(
            S3Call(.PUT, bucket: backendName, key: key, query: [("partNumber", String(partNumber)), ("uploadId", uploadID)], headers: headers,
                   idempotent: true),
            bucket: bucket, key: key, uploadID: uploadID)
        let etag = S3Metadata.quoted(document.text(document.root, "ETag") ?? "")
        // A copy of the whole object has its CRC-64 and its whole-object checksum.
        let checksums = served == 0..<current.size ? current.checksums.ofCopy : .none
        let part = PartRecord(partNumber: partNumber, etag: ETag.normalize(etag),
                              lastModified: Millis.from(S3XML.date(document.text(document.root, "LastModified"))), checksums: checksums)
        try await writeSystemObject([], Self.uploadPrefix(uploadID) + part.key)
        return PartInfo(partNumber: partNumber, etag: etag, size: Int64(served.count), lastModified: Millis.date(part.lastModified), checksums: checksums)
    }

    /// The parts' own values, by part number and ETag.
    func partRecords(_ uploadID: String) async throws -> [Int: [String: PartRecord]] {
        var records: [Int: [String: PartRecord]] = [:]
        let prefix = Self.uploadPrefix(uploadID)
        for (key, _) in try await listSystemObjects(prefix: prefix + "p/") {
            if let record = PartRecord(key: key.dropFirst(prefix.count)) { records[record.partNumber, default: [:]][record.etag] = record }
        }
        return records
    }

    /// One page of the backend's ListParts, with the parts' own values.
    func partsPage(bucket: String, key: String, uploadID: String, marker: Int, maxParts: Int,
                   records: [Int: [String: PartRecord]]) async throws -> (parts: [PartInfo], truncated: Bool, next: Int?) {
        let backendName = try backend(bucket)
        let document = try await xml(
            S3Call(.GET, bucket: backendName, key: key,
                   query: [("uploadId", uploadID), ("part-number-marker", String(marker)), ("max-parts", String(maxParts))]),
            bucket: bucket, key: key, uploadID: uploadID)
        var parts: [PartInfo] = []
        for entry in document.children(document.root, "Part") {
            guard let number = Int(document.text(entry, "PartNumber") ?? "") else { continue }
            let etag = S3Metadata.quoted(document.text(entry, "ETag") ?? "")
            let record = records[number]?[ETag.normalize(etag)]
            parts.append(PartInfo(partNumber: number, etag: etag, size: Int64(document.text(entry, "Size") ?? "") ?? 0,
                                  lastModified: record.map { Millis.date($0.lastModified) } ?? S3XML.date(document.text(entry, "LastModified")),
                                  checksums: record?.checksums ?? .none))
        }
        let truncated = document.text(document.root, "IsTruncated") == "true"
        let next = document.text(document.root, "NextPartNumberMarker").flatMap { Int($0) } ?? parts.last?.partNumber
        return (parts, truncated, truncated ? next : nil)
    }

    /// Every part the backend holds for the upload.
    func backendParts(bucket: String, key: String, uploadID: String, records: [Int: [String: PartRecord]] = [:]) async throws -> [PartInfo] {
        var all: [PartInfo] = []
        var marker = 0
        for _ in 0..<20 {
            let page = try await partsPage(bucket: bucket, key: key, uploadID: uploadID, marker: marker, maxParts: 1000, records: records)
            all += page.parts
            guard page.truncated, let next = page.next, next > marker else { break }
            marker = next
        }
        return all
    }

    public func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int, maxParts: Int) async throws -> ListPartsResult {
        let record = try await uploadRecord(bucket: bucket, key: key, uploadID: uploadID)
        let page = try await partsPage(bucket: bucket, key: key, uploadID: uploadID, marker: partNumberMarker,
                                       maxParts: max(0, min(maxParts, 1000)), records: try await partRecords(uploadID))
        return ListPartsResult(upload: record.upload(uploadID), parts: page.parts, isTruncated: page.truncated, nextPartNumberMarker: page.next)
    }

    // MARK: Listing uploads

    /// The backend's uploads under the prefix, read whole (without its markers and delimiter,
    /// which backends handle differently), paged as every store pages them (`UploadListing`).
    public func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
        UploadListing.page(try await backendUploads(bucket, prefix: query.prefix), query: query)
    }

    /// Every upload the backend lists under `prefix`, its settings but the time left out.
    func backendUploads(_ bucket: String, prefix: String) async throws -> [MultipartUpload] {
        let backendName = try backend(bucket)
        var uploads: [MultipartUpload] = []
        var keyMarker: String?
        var idMarker: String?
        for _ in 0..<1000 {
            var parameters: [(String, String?)] = [("uploads", nil), ("max-uploads", "1000")]
            if !prefix.isEmpty { parameters.append(("prefix", prefix)) }
            if let keyMarker { parameters.append(("key-marker", keyMarker)) }
            if let idMarker { parameters.append(("upload-id-marker", idMarker)) }
            let document = try await xml(S3Call(.GET, bucket: backendName, query: parameters), bucket: bucket)
            var seen = Set(uploads.map(\.uploadID))
            for entry in document.children(document.root, "Upload") {
                let id = document.text(entry, "UploadId") ?? ""
                guard seen.insert(id).inserted else { continue }
                uploads.append(MultipartUpload(bucket: bucket, key: document.text(entry, "Key") ?? "", uploadID: id,
                                               initiated: S3XML.date(document.text(entry, "Initiated")), metadata: ObjectMetadata()))
            }
            let next = (document.text(document.root, "NextKeyMarker"), document.text(document.root, "NextUploadIdMarker"))
            guard document.text(document.root, "IsTruncated") == "true", let key = next.0, !key.isEmpty,
                  key != keyMarker || next.1 != idMarker else { break }
            (keyMarker, idMarker) = (key, next.1)
        }
        return uploads
    }

    /// Every upload of the bucket.
    func allUploads(_ bucket: String) async throws -> [MultipartUpload] {
        try await backendUploads(bucket, prefix: "")
    }

    /// The bucket's uploads, counted.
    func countUploads(_ bucket: String, upTo limit: Int) async throws -> Int {
        try await backendUploads(bucket, prefix: "").count
    }

    // MARK: Ending uploads

    public func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        let backendName = try backend(bucket)
        _ = try await uploadRecord(bucket: bucket, key: key, uploadID: uploadID)
        try await perform(S3Call(.DELETE, bucket: backendName, key: key, query: [("uploadId", uploadID)]), bucket: bucket, key: key, uploadID: uploadID)
        await forget(uploadID)
    }

    /// Chooses the parts as every store does (`MultipartRules`), completes the backend's upload,
    /// then sets the object's checksums, computed from the parts' own, in its reserved metadata.
    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], options: CompleteOptions
    ) async throws -> ObjectInfo {
        let backendName = try backend(bucket)
        try MultipartRules.validate(parts)
        let record: UploadRecord
        let uploaded: [PartInfo]
        do {
            record = try await uploadRecord(bucket: bucket, key: key, uploadID: uploadID)
            uploaded = try await backendParts(bucket: bucket, key: key, uploadID: uploadID, records: try await partRecords(uploadID))
        } catch StoreError.noSuchUpload {
            return try await completedAlready(bucket: bucket, key: key, uploadID: uploadID, parts: parts)
        }
        let minimum = options.minimumPartSize ?? configuration.minimumPartSize
        let chosen = try MultipartRules.choose(parts, from: Dictionary(uploaded.map { ($0.partNumber, $0) }, uniquingKeysWith: { _, last in last }),
                                               info: { $0 }, minimumPartSize: minimum)
        if let small = chosen.dropLast().first(where: { $0.size < configuration.backendMinimumPartSize }) {
            throw StoreError.notSupported("part \(small.partNumber) has \(small.size) bytes: the storage backend accepts parts (but the last) of at least \(configuration.backendMinimumPartSize) bytes")
        }
        let checksums = try MultipartRules.checksums(of: chosen, upload: record.checksum, expected: options.expectedChecksum)
        if options.preconditions != .none {
            let existing: ObjectInfo?
            do { existing = try await headObject(bucket: bucket, key: key) } catch StoreError.noSuchKey { existing = nil }
            try options.preconditions.check(against: existing)
        }
        var body = "<CompleteMultipartUpload>"
        for part in chosen { body += "<Part><PartNumber>\(part.partNumber)</PartNumber><ETag>\(S3XML.escape(part.etag))</ETag></Part>" }
        body += "</CompleteMultipartUpload>"
        let reply = try await transport.send(
            S3Call(.POST, bucket: backendName, key: key, query: [("uploadId", uploadID)], headers: Self.preconditionHeaders(options.preconditions),
                   body: .bytes(ByteBuffer(string: body))))
        guard reply.ok else {
            let error = await reply.error()
            // Every part listed is there with its ETag (checked above): the backend's InvalidPart is
            // its own rule. RGW 16 completes an upload only with its parts in sequence from the
            // first one uploaded.
            if error.code == "InvalidPart" {
                throw StoreError.notSupported("completing an upload with some of its parts left out: the storage backend completes an upload only with its parts in sequence from the first one uploaded")
            }
            throw Self.storeError(error, bucket: bucket, key: key, uploadID: uploadID)
        }
        // S3 may answer 200 and an error in the body.
        let answer = try S3XML(try await reply.bytes())
        if answer.root.name == "Error" {
            throw Self.storeError(S3ErrorReply(status: 200, code: answer.text(answer.root, "Code") ?? "", message: answer.text(answer.root, "Message") ?? "",
                                               headers: reply.headers), bucket: bucket, key: key, uploadID: uploadID)
        }
        // RGW answers an empty ETag here; HEAD has it.
        var info = try await headObject(bucket: bucket, key: key)
        var stored = record.metadata
        stored.tags = [:]
        if checksums != .none,
           await amend(backendName: backendName, bucket: bucket, key: key, etag: info.etag, metadata: stored,
                       reserved: S3Metadata.Reserved(checksums: checksums), tags: record.metadata.tags) != nil {
            info = try await headObject(bucket: bucket, key: key)
        } else if !record.metadata.tags.isEmpty {
            try await setObjectTags(bucket: bucket, key: key, tags: record.metadata.tags)
            info = try await headObject(bucket: bucket, key: key)
        }
        try? await writeSystemJSON(CompletedRecord(bucket: bucket, key: key, etag: info.etag), Self.uploadPrefix(uploadID) + "done")
        await forget(uploadID)
        return info
    }

    /// A completion whose upload is gone: the same object again when it repeats the completion
    /// that ended the upload (same bucket and key, parts giving the same ETag, that object still
    /// there), as S3 answers a retry whose first answer was lost; `noSuchUpload` otherwise.
    func completedAlready(bucket: String, key: String, uploadID: String, parts: [CompletedPart]) async throws -> ObjectInfo {
        guard !uploadID.contains("/"), !uploadID.isEmpty,
              let done = try await readSystemJSON(CompletedRecord.self, Self.uploadPrefix(uploadID) + "done"),
              done.bucket == bucket, done.key == key, (try? MultipartRules.etag(of: parts.map(\.etag))) == done.etag
        else { throw StoreError.noSuchUpload(uploadID: uploadID) }
        let current: ObjectInfo
        do { current = try await headObject(bucket: bucket, key: key) } catch StoreError.noSuchKey { throw StoreError.noSuchUpload(uploadID: uploadID) }
        guard current.etag == done.etag else { throw StoreError.noSuchUpload(uploadID: uploadID) }
        return current
    }

    // MARK: Expiry

    /// Aborts the uploads of every bucket of the gateway initiated before `cutoff`, and removes the
    /// system bucket's records of uploads older than that.
    public func expireUploads(initiatedBefore cutoff: Date) async throws -> Int {
        var aborted = 0
        for bucket in try await listBuckets() {
            for upload in try await allUploads(bucket.name) where upload.initiated < cutoff {
                do {
                    try await abortMultipartUpload(bucket: bucket.name, key: upload.key, uploadID: upload.uploadID)
                    aborted += 1
                } catch StoreError.noSuchUpload {
                    // Not one of the gateway's (no record), or gone meanwhile: the backend's own abort.
                    let backendName = try backend(bucket.name)
                    if let reply = try? await transport.send(S3Call(.DELETE, bucket: backendName, key: upload.key, query: [("uploadId", upload.uploadID)])) {
                        _ = try? await reply.bytes(limit: 64 * 1024)
                        if reply.ok { aborted += 1 }
                    }
                }
            }
        }
        let stale = try await listSystemObjects(prefix: "mpu/").filter { $0.modified < cutoff }.map(\.key)
        try await deleteSystemObjects(stale)
        return aborted
    }
}
