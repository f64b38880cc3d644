import Foundation
import HTTPTypes
import Hummingbird
import TollgateCrypto
import TollgateDates
import TollgateSignature
import TollgateStore
import TollgateXML

extension Gateway {
    /// OSS accepts parts down to 100 KiB; S3's 5 MiB minimum is the store's default.
    static let ossMinimumPartSize: Int64 = 100 * 1024

    func createMultipartUpload(_ call: Call, bucket: String, key: String) async throws -> Response {
        // Refused now if the key exists; CompleteMultipartUpload checks again, atomically, when it
        // carries the header too.
        if forbidsOverwrite(call), (try? await store.headObject(bucket: bucket, key: key)) != nil {
            throw GatewayError.fileAlreadyExists()
        }
        let checksum = try uploadChecksum(call)
        let upload = try await store.createMultipartUpload(bucket: bucket, key: key, metadata: try requestMetadata(call), checksum: checksum)
        var xml = document(call, root: "InitiateMultipartUploadResult")
        xml.element("Bucket", bucket)
        xml.element("Key", key)
        xml.element("UploadId", upload.uploadID)
        var headers: HTTPFields = [:]
        if let checksum {
            headers[.amzChecksumAlgorithm] = checksum.algorithm.displayName
            headers[.amzChecksumType] = Self.checksumType(fullObject: checksum.fullObject)
        }
        return xmlResponse(xml, headers: headers)
    }

    /// S3's `x-amz-checksum-algorithm` and `x-amz-checksum-type` on CreateMultipartUpload: the
    /// object checksum completing computes. COMPOSITE by default, but CRC-64/NVME is FULL_OBJECT
    /// only, and FULL_OBJECT needs a CRC (S3's rules).
    func uploadChecksum(_ call: Call) throws(GatewayError) -> UploadChecksum? {
        guard call.dialect == .s3 else { return nil }
        let type = call.headers[.amzChecksumType]?.uppercased()
        guard let name = call.headers[.amzChecksumAlgorithm] else {
            if type != nil { throw .invalidRequest("The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.") }
            return nil
        }
        guard let algorithm = ChecksumAlgorithm(rawValue: name.lowercased()) else {
            throw .invalidRequest("Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]")
        }
        switch type {
        case nil: return UploadChecksum(algorithm: algorithm, fullObject: algorithm == .crc64nvme)
        case "FULL_OBJECT"?:
            guard algorithm.isCRC else { throw .invalidRequest("The FULL_OBJECT checksum type cannot be used with the \(name.lowercased()) checksum algorithm.") }
            return UploadChecksum(algorithm: algorithm, fullObject: true)
        case "COMPOSITE"?:
            guard algorithm != .crc64nvme else { throw .invalidRequest("The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.") }
            return UploadChecksum(algorithm: algorithm, fullObject: false)
        default:
            throw .invalidRequest("Value for x-amz-checksum-type header is invalid.")
        }
    }

    static func partNumber(_ raw: String) throws(GatewayError) -> Int {
        guard let number = Int(raw), (1...10000).contains(number) else {
            throw .invalidArgument("Part number must be an integer between 1 and 10000, inclusive", name: "partNumber", value: raw)
        }
        return number
    }

    func uploadPart(_ call: Call, bucket: String, key: String, uploadID: String, partNumber raw: String) async throws -> Response {
        let body = try verifiedBody(call, kind: .objectData)
        let part = try await store.uploadPart(
            bucket: bucket, key: key, uploadID: uploadID, partNumber: try Self.partNumber(raw),
            body: body, options: body.writeOptions()
        )
        var headers: HTTPFields = [.eTag: call.dialect.etag(part.etag)]
        addChecksums(call, part.checksums, typed: false, to: &headers)
        return empty(headers: headers)
    }

    func uploadPartCopy(_ call: Call, bucket: String, key: String, uploadID: String, partNumber raw: String, source: String) async throws -> Response {
        let (sourceBucket, sourceKey) = try Self.parseCopySource(source)
        let rangeHeader = call.header(call.dialect == .s3 ? "x-amz-copy-source-range" : "x-oss-copy-source-range")
        var range: ByteRange?
        if let rangeHeader {
            guard let parsed = ByteRange.parse(rangeHeader) else {
                throw GatewayError.invalidArgument("The x-amz-copy-source-range value must be of the form bytes=first-last", name: "x-amz-copy-source-range", value: rangeHeader)
            }
            range = parsed
        }
        let part = try await store.uploadPartCopy(
            bucket: bucket, key: key, uploadID: uploadID, partNumber: try Self.partNumber(raw),
            source: ObjectLocation(bucket: sourceBucket, key: sourceKey), range: range,
            options: CopyOptions(sourceConditions: copySourceConditions(call))
        )
        var xml = document(call, root: "CopyPartResult")
        xml.element("LastModified", WireDate.iso8601(part.lastModified, milliseconds: 0))
        let etag = call.dialect.etag(part.etag)
        xml.element("ETag", etag)
        checksumElements(call, part.checksums.additional, typed: false, into: &xml)
        // oss2 reads a copied part's ETag from the header (OSS sends it there and in the body).
        return xmlResponse(xml, headers: [.eTag: etag])
    }

    /// CompleteMultipartUpload with the parts its body lists, or, in OSS with
    /// `x-oss-complete-all: yes` and no body, with every part uploaded, in part-number order.
    func completeMultipartUpload(_ call: Call, bucket: String, key: String, uploadID: String) async throws -> Response {
        let body = try await collectXMLBody(call, kind: .completeMultipartUpload)
        let parts: [CompletedPart]
        if call.dialect == .oss, let completeAll = call.headers[.ossCompleteAll], completeAll.lowercased() == "yes" {
            // OSS's answer (and its spelling) when both are given.
            guard body.isEmpty else {
                throw GatewayError.invalidArgument("Should not speficy both complete all header and http body.",
                                                   name: "x-oss-complete-all", value: completeAll)
            }
            parts = try await uploadedParts(bucket: bucket, key: key, uploadID: uploadID)
        } else {
            parts = try Self.listedParts(Self.parseXML(body, CompleteMultipartUploadRequest.parse))
        }
        // An x-amz-checksum-* header here is the object's (parsed and signed with the request).
        let expected = call.identity.s3?.headerChecksum.map { AdditionalChecksum(algorithm: $0.algorithm, digest: $0.digest) }
        let info = try await refusingOverwrite(call) {
            try await journaled(call, bucket: bucket, key: key) {
                try await store.completeMultipartUpload(
                    bucket: bucket, key: key, uploadID: uploadID, parts: parts,
                    options: CompleteOptions(
                        preconditions: writePreconditions(call), minimumPartSize: call.dialect == .oss ? Self.ossMinimumPartSize : nil,
                        expectedChecksum: expected
                    )
                )
            }
        }
        call.logger.info("object stored", metadata: ["object.bucket": "\(bucket)", "object.key": "\(key)", "object.size": "\(info.size)"])
        var xml = document(call, root: "CompleteMultipartUploadResult")
        xml.element("Location", "/\(bucket)/\(key)")
        xml.element("Bucket", bucket)
        xml.element("Key", key)
        let etag = call.dialect.etag(info.etag)
        xml.element("ETag", etag)
        checksumElements(call, info.checksums.additional, into: &xml)
        var headers: HTTPFields = [.eTag: etag]
        if call.dialect == .oss { addChecksums(call, info.checksums, to: &headers) }
        return xmlResponse(xml, headers: headers)
    }

    /// The parts a CompleteMultipartUpload body lists, with their checksums.
    static func listedParts(_ request: CompleteMultipartUploadRequest) throws(GatewayError) -> [CompletedPart] {
        try request.parts.map { part throws(GatewayError) in
            CompletedPart(partNumber: part.number, etag: part.etag, checksum: try part.checksum.map { listed throws(GatewayError) in
                guard let algorithm = ChecksumAlgorithm(rawValue: listed.algorithm.lowercased()),
                      let checksum = ExpectedChecksum(algorithm: algorithm, base64: listed.value) else {
                    throw .invalidRequest("The \(listed.algorithm) of part \(part.number) is not a valid checksum.")
                }
                return AdditionalChecksum(algorithm: algorithm, digest: checksum.digest)
            })
        }
    }

    /// Every part of the upload, in part-number order, as a part list names them (at most
    /// 10 000 parts: ten pages of 1000).
    func uploadedParts(bucket: String, key: String, uploadID: String) async throws -> [CompletedPart] {
        var parts: [CompletedPart] = []
        var marker = 0
        for _ in 0..<10 {
            let page = try await store.listParts(bucket: bucket, key: key, uploadID: uploadID, partNumberMarker: marker, maxParts: 1000)
            parts += page.parts.map { CompletedPart(partNumber: $0.partNumber, etag: $0.etag) }
            guard page.isTruncated, let next = page.nextPartNumberMarker else { break }
            marker = next
        }
        return parts
    }

    func abortMultipartUpload(_ call: Call, bucket: String, key: String, uploadID: String) async throws -> Response {
        try await store.abortMultipartUpload(bucket: bucket, key: key, uploadID: uploadID)
        return empty(.noContent)
    }

    func listParts(_ call: Call, bucket: String, key: String, uploadID: String) async throws -> Response {
        let marker = try Self.intParameter(call.query, "part-number-marker", default: 0, range: 0...10000)
        let maxParts = try Self.intParameter(call.query, "max-parts", default: 1000, range: 0...Int.max)
        let encodeURL = try Self.encodesURL(call.query)
        let result = try await store.listParts(bucket: bucket, key: key, uploadID: uploadID, partNumberMarker: marker, maxParts: min(maxParts, 1000))
        var xml = document(call, root: "ListPartsResult")
        xml.element("Bucket", bucket)
        xml.element("Key", encodeURL ? Self.urlEncodeForListing(key) : key)
        if encodeURL { xml.element("EncodingType", "url") }
        xml.element("UploadId", uploadID)
        owner(&xml, "Initiator")
        owner(&xml)
        xml.element("StorageClass", "STANDARD")
        xml.element("PartNumberMarker", String(marker))
        // Always present (oss2 requires it): the last part listed when there is no next page.
        xml.element("NextPartNumberMarker", String(result.nextPartNumberMarker ?? result.parts.last?.partNumber ?? marker))
        xml.element("MaxParts", String(maxParts))
        xml.element("IsTruncated", result.isTruncated ? "true" : "false")
        if call.dialect == .s3, let checksum = result.upload.checksum {
            xml.element("ChecksumAlgorithm", checksum.algorithm.displayName)
            xml.element("ChecksumType", Self.checksumType(fullObject: checksum.fullObject))
        }
        for part in result.parts {
            xml.element("Part") { entry in
                entry.element("PartNumber", String(part.partNumber))
                entry.element("LastModified", WireDate.iso8601(part.lastModified, milliseconds: 0))
                entry.element("ETag", call.dialect.etag(part.etag))
                entry.element("Size", String(part.size))
                checksumElements(call, part.checksums.additional, typed: false, into: &entry)
            }
        }
        return xmlResponse(xml)
    }

    func listMultipartUploads(_ call: Call, bucket: String) async throws -> Response {
        let maxUploads = try Self.intParameter(call.query, "max-uploads", default: 1000, range: 0...Int.max)
        let encodeURL = try Self.encodesURL(call.query)
        let query = ListUploadsQuery(
            prefix: call.query["prefix"] ?? "", delimiter: call.query["delimiter"].flatMap { $0.isEmpty ? nil : $0 },
            keyMarker: call.query["key-marker"].flatMap { $0.isEmpty ? nil : $0 },
            uploadIDMarker: call.query["upload-id-marker"].flatMap { $0.isEmpty ? nil : $0 },
            maxUploads: min(maxUploads, 1000)
        )
        let result = try await store.listMultipartUploads(bucket: bucket, query: query)
        func encoded(_ value: String) -> String { encodeURL ? Self.urlEncodeForListing(value) : value }
        var xml = document(call, root: "ListMultipartUploadsResult")
        xml.element("Bucket", bucket)
        xml.element("KeyMarker", encoded(query.keyMarker ?? ""))
        xml.element("UploadIdMarker", query.uploadIDMarker ?? "")
        // Always present, empty on the last page (oss2 requires them).
        xml.element("NextKeyMarker", encoded(result.nextKeyMarker ?? ""))
        xml.element("NextUploadIdMarker", result.nextUploadIDMarker ?? "")
        if let delimiter = query.delimiter { xml.element("Delimiter", encoded(delimiter)) }
        xml.element("Prefix", encoded(query.prefix))
        if encodeURL { xml.element("EncodingType", "url") }
        xml.element("MaxUploads", String(maxUploads))
        xml.element("IsTruncated", result.isTruncated ? "true" : "false")
        for upload in result.uploads {
            xml.element("Upload") { entry in
                entry.element("Key", encoded(upload.key))
                entry.element("UploadId", upload.uploadID)
                owner(&entry, "Initiator")
                owner(&entry)
                entry.element("StorageClass", "STANDARD")
                entry.element("Initiated", WireDate.iso8601(upload.initiated, milliseconds: 0))
            }
        }
        for commonPrefix in result.commonPrefixes {
            xml.element("CommonPrefixes") { $0.element("Prefix", encoded(commonPrefix)) }
        }
        return xmlResponse(xml)
    }
}
