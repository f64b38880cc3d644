import Foundation
import HTTPTypes
import Hummingbird
import TollgateDates
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
        let upload = try await store.createMultipartUpload(bucket: bucket, key: key, metadata: try requestMetadata(call))
        var xml = document(call, root: "InitiateMultipartUploadResult")
        xml.element("Bucket", bucket)
        xml.element("Key", key)
        xml.element("UploadId", upload.uploadID)
        return xmlResponse(xml)
    }

    static func partNumber(_ raw: String) throws(GatewayError) -> Int {
        guard let number = Int(raw), (1...10000).contains(number) else {
            throw .invalidArgument("Part number must be an integer between 1 and 10000, inclusive", name: "partNumber", value: raw)
        }
        return number
    }

    func uploadPart(_ call: Call, bucket: String, key: String, uploadID: String, partNumber raw: String) async throws -> Response {
        let part = try await store.uploadPart(
            bucket: bucket, key: key, uploadID: uploadID, partNumber: try Self.partNumber(raw),
            body: try verifiedBody(call), options: WriteOptions()
        )
        return empty(headers: [.eTag: part.etag])
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
            options: CopyOptions(checkSource: copySourceConditions(call))
        )
        var xml = document(call, root: "CopyPartResult")
        xml.element("LastModified", WireDate.iso8601(part.lastModified, milliseconds: 0))
        xml.element("ETag", part.etag)
        return xmlResponse(xml)
    }

    func completeMultipartUpload(_ call: Call, bucket: String, key: String, uploadID: String) async throws -> Response {
        let request = try Self.parseXML(try await collectXMLBody(call), CompleteMultipartUploadRequest.parse)
        let info = try await refusingOverwrite(call) {
            try await store.completeMultipartUpload(
                bucket: bucket, key: key, uploadID: uploadID,
                parts: request.parts.map { CompletedPart(partNumber: $0.number, etag: $0.etag) },
                preconditions: writePreconditions(call),
                minimumPartSize: call.dialect == .oss ? Self.ossMinimumPartSize : nil
            )
        }
        call.logger.info("object stored", metadata: ["object.bucket": "\(bucket)", "object.key": "\(key)", "object.size": "\(info.size)"])
        var xml = document(call, root: "CompleteMultipartUploadResult")
        xml.element("Location", "/\(bucket)/\(key)")
        xml.element("Bucket", bucket)
        xml.element("Key", key)
        xml.element("ETag", info.etag)
        return xmlResponse(xml, headers: [.eTag: info.etag])
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
        for part in result.parts {
            xml.element("Part") { entry in
                entry.element("PartNumber", String(part.partNumber))
                entry.element("LastModified", WireDate.iso8601(part.lastModified, milliseconds: 0))
                entry.element("ETag", part.etag)
                entry.element("Size", String(part.size))
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
