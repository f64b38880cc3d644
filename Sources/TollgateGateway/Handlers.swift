import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TollgateStore
import TollgateXML

extension Gateway {
    static let s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"
    static let ownerID = "tollgate"
    /// The region the gateway reports; clients may sign with any region.
    static let region = "us-east-1"

    /// One handler per operation; every one of them runs after authorization.
    func handle(_ call: Call) async throws -> Response {
        switch call.route {
        case .listBuckets: return try await listBuckets(call)
        case .createBucket(let bucket): return try await createBucket(call, bucket: bucket)
        case .headBucket(let bucket): return try await headBucket(call, bucket: bucket)
        case .getBucketInfo(let bucket): return try await getBucketInfo(call, bucket: bucket)
        case .getBucketStat(let bucket): return try await getBucketStat(call, bucket: bucket)
        case .listObjectVersions(let bucket): return try await listObjectVersions(call, bucket: bucket)
        case .getBucketVersioning(let bucket): return try await getBucketVersioning(call, bucket: bucket)
        case .getBucketAcl(let bucket): return try await getAcl(call, bucket: bucket, key: nil)
        case .getObjectAcl(let bucket, let key): return try await getAcl(call, bucket: bucket, key: key)
        case .getObjectTagging(let bucket, let key): return try await getObjectTagging(call, bucket: bucket, key: key)
        case .putObjectTagging(let bucket, let key): return try await putObjectTagging(call, bucket: bucket, key: key)
        case .deleteObjectTagging(let bucket, let key):
            try await store.setObjectTags(bucket: bucket, key: key, tags: [:])
            return empty(.noContent)
        case .getBucketSetting(let bucket, let setting):
            _ = try await store.headBucket(bucket)
            throw setting.notConfigured
        case .getBucketCors(let bucket): return try await getBucketCors(call, bucket: bucket)
        case .putBucketCors(let bucket): return try await putBucketCors(call, bucket: bucket)
        case .deleteBucketCors(let bucket): return try await deleteBucketCors(call, bucket: bucket)
        case .deleteBucket(let bucket): return try await deleteBucket(call, bucket: bucket)
        case .getBucketLocation(let bucket): return try await getBucketLocation(call, bucket: bucket)
        case .listObjects(let bucket): return try await listObjects(call, bucket: bucket, version: 1)
        case .listObjectsV2(let bucket): return try await listObjects(call, bucket: bucket, version: 2)
        case .listMultipartUploads(let bucket): return try await listMultipartUploads(call, bucket: bucket)
        case .deleteObjects(let bucket): return try await deleteObjects(call, bucket: bucket)
        case .getObject(let bucket, let key): return try await getObject(call, bucket: bucket, key: key, headOnly: false)
        case .headObject(let bucket, let key): return try await getObject(call, bucket: bucket, key: key, headOnly: true)
        case .getObjectMeta(let bucket, let key): return try await getObjectMeta(call, bucket: bucket, key: key)
        case .putObject(let bucket, let key): return try await putObject(call, bucket: bucket, key: key)
        case .copyObject(let bucket, let key, let source): return try await copyObject(call, bucket: bucket, key: key, source: source)
        case .appendObject(let bucket, let key): return try await appendObject(call, bucket: bucket, key: key)
        case .deleteObject(let bucket, let key): return try await deleteObject(call, bucket: bucket, key: key)
        case .createMultipartUpload(let bucket, let key): return try await createMultipartUpload(call, bucket: bucket, key: key)
        case .uploadPart(let bucket, let key, let uploadID, let partNumber):
            return try await uploadPart(call, bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber)
        case .uploadPartCopy(let bucket, let key, let uploadID, let partNumber, let source):
            return try await uploadPartCopy(call, bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, source: source)
        case .completeMultipartUpload(let bucket, let key, let uploadID):
            return try await completeMultipartUpload(call, bucket: bucket, key: key, uploadID: uploadID)
        case .abortMultipartUpload(let bucket, let key, let uploadID):
            return try await abortMultipartUpload(call, bucket: bucket, key: key, uploadID: uploadID)
        case .listParts(let bucket, let key, let uploadID):
            return try await listParts(call, bucket: bucket, key: key, uploadID: uploadID)
        }
    }

    // MARK: Rendering helpers

    /// A new XML document whose root element carries S3's namespace (OSS uses none).
    func document(_ call: Call, root: String) -> XMLWriter {
        var xml = XMLWriter()
        xml.start(root, namespace: call.dialect == .s3 ? Self.s3Namespace : nil)
        return xml
    }

    func xmlResponse(_ xml: XMLWriter, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var xml = xml
        xml.endAll()
        var headers = headers
        headers[.contentType] = "application/xml"
        return Response(status: status, headers: headers, body: .init(byteBuffer: xml.buffer))
    }

    func empty(_ status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentLength] = "0"
        return Response(status: status, headers: headers)
    }

    func owner(_ xml: inout XMLWriter, _ name: String = "Owner") {
        xml.element(name) { owner in
            owner.element("ID", Self.ownerID)
            owner.element("DisplayName", Self.ownerID)
        }
    }

    /// A request body parsed by one of the bounded XML readers; anything it refuses is `MalformedXML`.
    static func parseXML<T>(_ bytes: [UInt8], _ parse: ([UInt8]) throws(XMLReadError) -> T) throws(GatewayError) -> T {
        do { return try parse(bytes) } catch { throw .malformedXML() }
    }

    /// Collects a small XML request body (CompleteMultipartUpload, Delete), verified like any body.
    func collectXMLBody(_ call: Call, kind: BodyKind = .xmlRequest, limit: Int = RequestBodies.maxBytes) async throws -> [UInt8] {
        let tooBig = GatewayError(.badRequest, "MaxMessageLengthExceeded", "Your request was too big.")
        if let length = call.headers[.contentLength].flatMap(Int.init), length > limit { throw tooBig }
        let body = try verifiedBody(call, kind: kind)
        var collected = ByteBuffer()
        for try await buffer in body {
            guard collected.readableBytes + buffer.readableBytes <= limit else { throw tooBig }
            var buffer = buffer
            collected.writeBuffer(&buffer)
        }
        return Array(collected.readableBytesView)
    }
}
