import TollgatePolicy

/// A gateway request, routed: method + bucket + key + query become one typed operation before
/// anything else happens. Each case knows the policy operation it needs, so authorization
/// happens in one place and no handler can forget it. S3 and OSS share the routes.
enum GatewayRoute: Equatable, Sendable {
    case listBuckets
    case createBucket(bucket: String)
    case headBucket(bucket: String)
    case getBucketInfo(bucket: String)
    case getBucketStat(bucket: String)
    case listObjectVersions(bucket: String)
    case getBucketVersioning(bucket: String)
    case getBucketAcl(bucket: String)
    /// A bucket setting this gateway never has: answered with S3's "not configured" error.
    case getBucketSetting(bucket: String, setting: BucketSetting)
    case getBucketCors(bucket: String)
    case putBucketCors(bucket: String)
    case deleteBucketCors(bucket: String)
    case getObjectAcl(bucket: String, key: String)
    case getObjectTagging(bucket: String, key: String)
    case putObjectTagging(bucket: String, key: String)
    case deleteObjectTagging(bucket: String, key: String)
    case deleteBucket(bucket: String)
    case getBucketLocation(bucket: String)
    case listObjects(bucket: String)
    case listObjectsV2(bucket: String)
    case listMultipartUploads(bucket: String)
    case deleteObjects(bucket: String)
    case getObject(bucket: String, key: String)
    case headObject(bucket: String, key: String)
    case getObjectMeta(bucket: String, key: String)
    case putObject(bucket: String, key: String)
    case copyObject(bucket: String, key: String, source: String)
    case appendObject(bucket: String, key: String)
    case deleteObject(bucket: String, key: String)
    case createMultipartUpload(bucket: String, key: String)
    case uploadPart(bucket: String, key: String, uploadID: String, partNumber: String)
    case uploadPartCopy(bucket: String, key: String, uploadID: String, partNumber: String, source: String)
    case completeMultipartUpload(bucket: String, key: String, uploadID: String)
    case abortMultipartUpload(bucket: String, key: String, uploadID: String)
    case listParts(bucket: String, key: String, uploadID: String)

    /// Sub-resources that select another operation which this gateway does not implement.
    static let unsupportedSubresources: Set<String> = [
        "acl", "cors", "lifecycle", "logging", "policy", "replication", "tagging", "versioning", "versions",
        "website", "encryption", "notification", "object-lock", "legal-hold", "retention", "torrent",
        "restore", "select", "accelerate", "analytics", "inventory", "metrics", "ownershipControls",
        "publicAccessBlock", "requestPayment", "intelligent-tiering", "attributes", "symlink", "referer", "qos", "worm", "cname", "img", "style", "x-oss-process",
    ]

    /// The reads of bucket and object sub-resources that this gateway answers truthfully: an
    /// unversioned store's versions, its (absent) versioning, the owner's ACL, and settings it
    /// never has. Writes to these sub-resources stay unsupported.
    static func subresourceRead(method: String, bucket: String?, key: String?, query: [String: String]) -> GatewayRoute? {
        guard method == "GET", let bucket else { return nil }
        if let key { return query["acl"] != nil ? .getObjectAcl(bucket: bucket, key: key) : nil }
        if query["versions"] != nil { return .listObjectVersions(bucket: bucket) }
        if query["versioning"] != nil { return .getBucketVersioning(bucket: bucket) }
        if query["acl"] != nil { return .getBucketAcl(bucket: bucket) }
        if let setting = BucketSetting.allCases.first(where: { query[$0.rawValue] != nil }) {
            return .getBucketSetting(bucket: bucket, setting: setting)
        }
        return nil
    }

    /// Routes a request. `copySource` is the value of `x-amz-copy-source`/`x-oss-copy-source`.
    static func route(
        method: String, bucket: String?, key: String?, query: [String: String], copySource: String?
    ) throws(GatewayError) -> GatewayRoute {
        if let read = subresourceRead(method: method, bucket: bucket, key: key, query: query) { return read }
        if let bucket, key == nil, query["cors"] != nil {
            switch method {
            case "GET": return .getBucketCors(bucket: bucket)
            case "PUT": return .putBucketCors(bucket: bucket)
            case "DELETE": return .deleteBucketCors(bucket: bucket)
            default: break
            }
        }
        if let bucket, let key, query["tagging"] != nil {
            switch method {
            case "GET": return .getObjectTagging(bucket: bucket, key: key)
            case "PUT": return .putObjectTagging(bucket: bucket, key: key)
            case "DELETE": return .deleteObjectTagging(bucket: bucket, key: key)
            default: break
            }
        }
        if let unsupported = query.keys.first(where: { unsupportedSubresources.contains($0) }) {
            throw .notImplemented("The \(unsupported) sub-resource is not implemented by this gateway")
        }
        guard let bucket else {
            guard method == "GET" else { throw .methodNotAllowed(method) }
            return .listBuckets
        }
        guard let key else {
            switch method {
            case "GET":
                if query["location"] != nil { return .getBucketLocation(bucket: bucket) }
                if query["bucketInfo"] != nil { return .getBucketInfo(bucket: bucket) }
                if query["stat"] != nil { return .getBucketStat(bucket: bucket) }
                if query["uploads"] != nil { return .listMultipartUploads(bucket: bucket) }
                if query["list-type"] == "2" { return .listObjectsV2(bucket: bucket) }
                if let listType = query["list-type"], listType != "1" {
                    throw .invalidArgument("list-type must be 1 or 2", name: "list-type", value: listType)
                }
                return .listObjects(bucket: bucket)
            case "HEAD": return .headBucket(bucket: bucket)
            case "PUT": return .createBucket(bucket: bucket)
            case "DELETE": return .deleteBucket(bucket: bucket)
            case "POST":
                if query["delete"] != nil { return .deleteObjects(bucket: bucket) }
                throw .methodNotAllowed(method)
            default: throw .methodNotAllowed(method)
            }
        }
        let uploadID = query["uploadId"]
        switch method {
        case "GET":
            if let uploadID { return .listParts(bucket: bucket, key: key, uploadID: uploadID) }
            if query["objectMeta"] != nil { return .getObjectMeta(bucket: bucket, key: key) }
            return .getObject(bucket: bucket, key: key)
        case "HEAD":
            if query["objectMeta"] != nil { return .getObjectMeta(bucket: bucket, key: key) }
            return .headObject(bucket: bucket, key: key)
        case "PUT":
            if let uploadID {
                guard let partNumber = query["partNumber"] else {
                    throw .invalidArgument("partNumber is required with uploadId", name: "partNumber", value: "")
                }
                if let copySource {
                    return .uploadPartCopy(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, source: copySource)
                }
                return .uploadPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber)
            }
            if let copySource { return .copyObject(bucket: bucket, key: key, source: copySource) }
            return .putObject(bucket: bucket, key: key)
        case "POST":
            if query["uploads"] != nil { return .createMultipartUpload(bucket: bucket, key: key) }
            if let uploadID { return .completeMultipartUpload(bucket: bucket, key: key, uploadID: uploadID) }
            if query["append"] != nil { return .appendObject(bucket: bucket, key: key) }
            throw .methodNotAllowed(method)
        case "DELETE":
            if let uploadID { return .abortMultipartUpload(bucket: bucket, key: key, uploadID: uploadID) }
            return .deleteObject(bucket: bucket, key: key)
        default:
            throw .methodNotAllowed(method)
        }
    }

    /// The policy operation this route needs.
    var operation: GatewayOperation {
        switch self {
        case .listBuckets: .listBuckets
        case .createBucket: .createBucket
        case .headBucket: .headBucket
        case .getBucketInfo: .getBucketInfo
        case .getBucketStat: .getBucketStat
        case .listObjectVersions: .listObjectVersions
        case .getBucketVersioning: .getBucketVersioning
        case .getBucketAcl: .getBucketAcl
        case .getBucketSetting(_, let setting): setting.operation
        case .getBucketCors: .getBucketCors
        case .putBucketCors: .putBucketCors
        case .deleteBucketCors: .deleteBucketCors
        case .getObjectAcl: .getObjectAcl
        case .getObjectTagging: .getObjectTagging
        case .putObjectTagging: .putObjectTagging
        case .deleteObjectTagging: .deleteObjectTagging
        case .deleteBucket: .deleteBucket
        case .getBucketLocation: .getBucketLocation
        case .listObjects: .listObjects
        case .listObjectsV2: .listObjectsV2
        case .listMultipartUploads: .listMultipartUploads
        case .deleteObjects: .deleteObjects
        case .getObject: .getObject
        case .headObject: .headObject
        case .getObjectMeta: .getObjectMeta
        case .putObject: .putObject
        case .copyObject: .copyObject
        case .appendObject: .appendObject
        case .deleteObject: .deleteObject
        case .createMultipartUpload: .createMultipartUpload
        case .uploadPart: .uploadPart
        case .uploadPartCopy: .uploadPartCopy
        case .completeMultipartUpload: .completeMultipartUpload
        case .abortMultipartUpload: .abortMultipartUpload
        case .listParts: .listParts
        }
    }

    var bucket: String? {
        switch self {
        case .listBuckets: nil
        case .createBucket(let b), .headBucket(let b), .getBucketInfo(let b), .getBucketStat(let b), .listObjectVersions(let b),
             .getBucketVersioning(let b), .getBucketAcl(let b), .getBucketSetting(let b, _), .getBucketCors(let b), .putBucketCors(let b),
             .deleteBucketCors(let b), .deleteBucket(let b), .getBucketLocation(let b),
             .listObjects(let b), .listObjectsV2(let b), .listMultipartUploads(let b), .deleteObjects(let b): b
        case .getObject(let b, _), .getObjectAcl(let b, _), .getObjectTagging(let b, _), .putObjectTagging(let b, _),
             .deleteObjectTagging(let b, _), .headObject(let b, _), .getObjectMeta(let b, _), .putObject(let b, _),
             .copyObject(let b, _, _), .appendObject(let b, _), .deleteObject(let b, _), .createMultipartUpload(let b, _),
             .uploadPart(let b, _, _, _), .uploadPartCopy(let b, _, _, _, _), .completeMultipartUpload(let b, _, _),
             .abortMultipartUpload(let b, _, _), .listParts(let b, _, _): b
        }
    }

    var key: String? {
        switch self {
        case .listBuckets, .createBucket, .headBucket, .getBucketInfo, .getBucketStat, .listObjectVersions, .getBucketVersioning,
             .getBucketAcl, .getBucketSetting, .getBucketCors, .putBucketCors, .deleteBucketCors, .deleteBucket, .getBucketLocation, .listObjects,
             .listObjectsV2, .listMultipartUploads, .deleteObjects: nil
        case .getObject(_, let k), .getObjectAcl(_, let k), .getObjectTagging(_, let k), .putObjectTagging(_, let k),
             .deleteObjectTagging(_, let k), .headObject(_, let k), .getObjectMeta(_, let k), .putObject(_, let k),
             .copyObject(_, let k, _), .appendObject(_, let k), .deleteObject(_, let k), .createMultipartUpload(_, let k),
             .uploadPart(_, let k, _, _), .uploadPartCopy(_, let k, _, _, _), .completeMultipartUpload(_, let k, _),
             .abortMultipartUpload(_, let k, _), .listParts(_, let k, _): k
        }
    }

    /// The copy source for copy operations.
    var copySource: String? {
        switch self {
        case .copyObject(_, _, let source), .uploadPartCopy(_, _, _, _, let source): source
        default: nil
        }
    }
}

/// Bucket settings this gateway never has (CORS rules it has: see `getBucketCors`), each read answered with the error S3 uses when the
/// setting is not configured (OSS uses the same codes).
enum BucketSetting: String, CaseIterable, Sendable {
    case lifecycle, policy, encryption, tagging, website

    var operation: GatewayOperation {
        switch self {
        case .lifecycle: .getBucketLifecycle
        case .policy: .getBucketPolicy
        case .encryption: .getBucketEncryption
        case .tagging: .getBucketTagging
        case .website: .getBucketWebsite
        }
    }

    var notConfigured: GatewayError {
        switch self {
        case .lifecycle: GatewayError(.notFound, "NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist")
        case .policy: GatewayError(.notFound, "NoSuchBucketPolicy", "The bucket policy does not exist")
        case .encryption:
            GatewayError(.notFound, "ServerSideEncryptionConfigurationNotFoundError", "The server side encryption configuration was not found")
        case .tagging: GatewayError(.notFound, "NoSuchTagSet", "The TagSet does not exist")
        case .website: GatewayError(.notFound, "NoSuchWebsiteConfiguration", "The specified bucket does not have a website configuration")
        }
    }
}
