/// The resource an operation acts on, which decides the resource string a policy must match:
/// `*`-only for the service, `bucket` for a bucket, `bucket/key` for an object.
public enum ResourceLevel: String, Sendable, Hashable {
    case service
    case bucket
    case object
}

/// Every operation the object gateway serves, each with the canonical policy action it needs.
///
/// The OSS and S3 names follow the providers' own mappings, so a RAM policy (`oss:` actions)
/// governs S3 clients and an IAM policy (`s3:` actions) governs OSS clients.
///
/// | Operation | OSS action | S3 action | Resource |
/// |---|---|---|---|
/// | listBuckets | `oss:ListBuckets` | `s3:ListAllMyBuckets` | service |
/// | createBucket | `oss:PutBucket` | `s3:CreateBucket` | bucket |
/// | headBucket | `oss:ListObjects` | `s3:ListBucket` | bucket |
/// | getBucketInfo | `oss:GetBucketInfo` | `s3:ListBucket` | bucket |
/// | getBucketStat | `oss:GetBucketStat` | `s3:ListBucket` | bucket |
/// | listObjectVersions | `oss:ListObjectVersions` | `s3:ListBucketVersions` | bucket |
/// | getBucketVersioning | `oss:GetBucketVersioning` | `s3:GetBucketVersioning` | bucket |
/// | getBucketAcl | `oss:GetBucketAcl` | `s3:GetBucketAcl` | bucket |
/// | getBucketLifecycle | `oss:GetBucketLifecycle` | `s3:GetLifecycleConfiguration` | bucket |
/// | getBucketPolicy | `oss:GetBucketPolicy` | `s3:GetBucketPolicy` | bucket |
/// | getBucketEncryption | `oss:GetBucketEncryption` | `s3:GetEncryptionConfiguration` | bucket |
/// | getBucketCors | `oss:GetBucketCors` | `s3:GetBucketCORS` | bucket |
/// | putBucketCors | `oss:PutBucketCors` | `s3:PutBucketCORS` | bucket |
/// | deleteBucketCors | `oss:DeleteBucketCors` | `s3:PutBucketCORS` | bucket |
/// | getBucketTagging | `oss:GetBucketTagging` | `s3:GetBucketTagging` | bucket |
/// | getBucketWebsite | `oss:GetBucketWebsite` | `s3:GetBucketWebsite` | bucket |
/// | getObjectAcl | `oss:GetObjectAcl` | `s3:GetObjectAcl` | object |
/// | getObjectTagging | `oss:GetObjectTagging` | `s3:GetObjectTagging` | object |
/// | putObjectTagging | `oss:PutObjectTagging` | `s3:PutObjectTagging` | object |
/// | deleteObjectTagging | `oss:DeleteObjectTagging` | `s3:DeleteObjectTagging` | object |
/// | deleteBucket | `oss:DeleteBucket` | `s3:DeleteBucket` | bucket |
/// | getBucketLocation | `oss:GetBucketLocation` | `s3:GetBucketLocation` | bucket |
/// | listObjects | `oss:ListObjects` | `s3:ListBucket` | bucket |
/// | listObjectsV2 | `oss:ListObjects` | `s3:ListBucket` | bucket |
/// | listMultipartUploads | `oss:ListMultipartUploads` | `s3:ListBucketMultipartUploads` | bucket |
/// | getObject | `oss:GetObject` | `s3:GetObject` | object |
/// | headObject | `oss:GetObject` | `s3:GetObject` | object |
/// | getObjectMeta | `oss:GetObject` | `s3:GetObject` | object |
/// | putObject | `oss:PutObject` | `s3:PutObject` | object |
/// | appendObject | `oss:PutObject` | `s3:PutObject` | object |
/// | deleteObject | `oss:DeleteObject` | `s3:DeleteObject` | object |
/// | deleteObjects | `oss:DeleteObject` | `s3:DeleteObject` | object (checked per key) |
/// | copyObject | `oss:PutObject` + `oss:GetObject` on the source | `s3:PutObject` + `s3:GetObject` on the source | object |
/// | createMultipartUpload | `oss:PutObject` | `s3:PutObject` | object |
/// | uploadPart | `oss:PutObject` | `s3:PutObject` | object |
/// | uploadPartCopy | `oss:PutObject` + `oss:GetObject` on the source | `s3:PutObject` + `s3:GetObject` on the source | object |
/// | completeMultipartUpload | `oss:PutObject` | `s3:PutObject` | object |
/// | abortMultipartUpload | `oss:AbortMultipartUpload` | `s3:AbortMultipartUpload` | object |
/// | listParts | `oss:ListParts` | `s3:ListMultipartUploadParts` | object |
///
/// Operations that touch more than one resource (copy, delete of several keys) are authorised
/// with ``requiredChecks(bucket:key:sourceBucket:sourceKey:)``: every check must be allowed.
public enum GatewayOperation: String, CaseIterable, Sendable, Hashable {
    case listBuckets
    case createBucket
    case headBucket
    case getBucketInfo
    case getBucketStat
    case listObjectVersions
    case getBucketVersioning
    case getBucketAcl
    case getBucketLifecycle
    case getBucketPolicy
    case getBucketEncryption
    case getBucketCors
    case putBucketCors
    case deleteBucketCors
    case getBucketTagging
    case getBucketWebsite
    case getObjectAcl
    case getObjectTagging
    case putObjectTagging
    case deleteObjectTagging
    case deleteBucket
    case getBucketLocation
    case listObjects
    case listObjectsV2
    case listMultipartUploads
    case getObject
    case headObject
    case getObjectMeta
    case putObject
    case appendObject
    case deleteObject
    case deleteObjects
    case copyObject
    case createMultipartUpload
    case uploadPart
    case uploadPartCopy
    case completeMultipartUpload
    case abortMultipartUpload
    case listParts

    /// The RAM action name, e.g. `oss:GetObject`.
    public var ossAction: String {
        switch self {
        case .listBuckets: "oss:ListBuckets"
        case .createBucket: "oss:PutBucket"
        case .getBucketInfo: "oss:GetBucketInfo"
        case .getBucketStat: "oss:GetBucketStat"
        case .listObjectVersions: "oss:ListObjectVersions"
        case .getBucketVersioning: "oss:GetBucketVersioning"
        case .getBucketAcl: "oss:GetBucketAcl"
        case .getBucketLifecycle: "oss:GetBucketLifecycle"
        case .getBucketPolicy: "oss:GetBucketPolicy"
        case .getBucketEncryption: "oss:GetBucketEncryption"
        case .getBucketCors: "oss:GetBucketCors"
        case .putBucketCors: "oss:PutBucketCors"
        case .deleteBucketCors: "oss:DeleteBucketCors"
        case .getBucketTagging: "oss:GetBucketTagging"
        case .getBucketWebsite: "oss:GetBucketWebsite"
        case .getObjectAcl: "oss:GetObjectAcl"
        case .getObjectTagging: "oss:GetObjectTagging"
        case .putObjectTagging: "oss:PutObjectTagging"
        case .deleteObjectTagging: "oss:DeleteObjectTagging"
        case .deleteBucket: "oss:DeleteBucket"
        case .getBucketLocation: "oss:GetBucketLocation"
        case .headBucket, .listObjects, .listObjectsV2: "oss:ListObjects"
        case .listMultipartUploads: "oss:ListMultipartUploads"
        case .getObject, .headObject, .getObjectMeta: "oss:GetObject"
        case .putObject, .appendObject, .copyObject, .createMultipartUpload, .uploadPart, .uploadPartCopy,
             .completeMultipartUpload: "oss:PutObject"
        case .deleteObject, .deleteObjects: "oss:DeleteObject"
        case .abortMultipartUpload: "oss:AbortMultipartUpload"
        case .listParts: "oss:ListParts"
        }
    }

    /// The IAM action name, e.g. `s3:GetObject`.
    public var s3Action: String {
        switch self {
        case .listBuckets: "s3:ListAllMyBuckets"
        case .createBucket: "s3:CreateBucket"
        case .headBucket, .getBucketInfo, .getBucketStat: "s3:ListBucket"
        case .listObjectVersions: "s3:ListBucketVersions"
        case .getBucketVersioning: "s3:GetBucketVersioning"
        case .getBucketAcl: "s3:GetBucketAcl"
        case .getBucketLifecycle: "s3:GetLifecycleConfiguration"
        case .getBucketPolicy: "s3:GetBucketPolicy"
        case .getBucketEncryption: "s3:GetEncryptionConfiguration"
        case .getBucketCors: "s3:GetBucketCORS"
        // IAM has no DeleteBucketCORS: deleting the configuration needs s3:PutBucketCORS.
        case .putBucketCors, .deleteBucketCors: "s3:PutBucketCORS"
        case .getBucketTagging: "s3:GetBucketTagging"
        case .getBucketWebsite: "s3:GetBucketWebsite"
        case .getObjectAcl: "s3:GetObjectAcl"
        case .getObjectTagging: "s3:GetObjectTagging"
        case .putObjectTagging: "s3:PutObjectTagging"
        case .deleteObjectTagging: "s3:DeleteObjectTagging"
        case .deleteBucket: "s3:DeleteBucket"
        case .getBucketLocation: "s3:GetBucketLocation"
        case .listObjects, .listObjectsV2: "s3:ListBucket"
        case .listMultipartUploads: "s3:ListBucketMultipartUploads"
        case .getObject, .headObject, .getObjectMeta: "s3:GetObject"
        case .putObject, .appendObject, .copyObject, .createMultipartUpload, .uploadPart, .uploadPartCopy,
             .completeMultipartUpload: "s3:PutObject"
        case .deleteObject, .deleteObjects: "s3:DeleteObject"
        case .abortMultipartUpload: "s3:AbortMultipartUpload"
        case .listParts: "s3:ListMultipartUploadParts"
        }
    }

    /// Operations only the OSS API has (S3 clients never send them): what an `s3:` action
    /// authorises for S3 requests leaves them out (`policy simulate`'s headline).
    public var isOSSOnly: Bool {
        switch self {
        case .getBucketInfo, .getBucketStat, .getObjectMeta, .appendObject: true
        default: false
        }
    }

    /// Which resource string the operation is checked against.
    public var resourceLevel: ResourceLevel {
        switch self {
        case .listBuckets: .service
        case .createBucket, .headBucket, .getBucketInfo, .getBucketStat, .listObjectVersions, .getBucketVersioning, .getBucketAcl,
             .getBucketLifecycle, .getBucketPolicy, .getBucketEncryption, .getBucketCors, .putBucketCors, .deleteBucketCors,
             .getBucketTagging, .getBucketWebsite,
             .deleteBucket, .getBucketLocation, .listObjects, .listObjectsV2,
             .listMultipartUploads: .bucket
        default: .object
        }
    }

    /// The checks the gateway must make (all must be allowed) for one request.
    ///
    /// - `copyObject`/`uploadPartCopy`: `putObject` on the target and `getObject` on the source.
    /// - `deleteObjects`: one `deleteObject` check per key; call this once per key in the request.
    /// - everything else: the operation itself on `bucket`/`key`.
    public func requiredChecks(bucket: String?, key: String?, sourceBucket: String? = nil, sourceKey: String? = nil) -> [PolicyCheck] {
        switch self {
        case .copyObject, .uploadPartCopy:
            var checks = [PolicyCheck(operation: .putObject, bucket: bucket, key: key)]
            checks.append(PolicyCheck(operation: .getObject, bucket: sourceBucket, key: sourceKey))
            return checks
        case .deleteObjects:
            return [PolicyCheck(operation: .deleteObject, bucket: bucket, key: key)]
        default:
            return [PolicyCheck(operation: self, bucket: bucket, key: key)]
        }
    }

    /// The operations whose action name, in the namespace of `action` (`oss:` or `s3:`), is `action`
    /// (case-insensitive). Empty when the table has no such action.
    public static func operations(forAction action: String) -> [GatewayOperation] {
        let lowered = action.lowercased()
        if lowered.hasPrefix("oss:") { return allCases.filter { $0.ossAction.lowercased() == lowered } }
        if lowered.hasPrefix("s3:") { return allCases.filter { $0.s3Action.lowercased() == lowered } }
        return []
    }

    /// Every action name the table knows in the namespace of `prefix` (`oss` or `s3`), in table
    /// order without repeats: the only actions a policy can grant or deny here.
    public static func knownActions(namespace prefix: String) -> [String] {
        var seen = Set<String>()
        return allCases.map { prefix.lowercased() == "s3" ? $0.s3Action : $0.ossAction }.filter { seen.insert($0).inserted }
    }

    /// A likely intended action for an unknown `oss:NAME`/`s3:NAME`: the same operations' name
    /// when NAME belongs to the other namespace (`oss:ListBucket` → `oss:GetBucketInfo or
    /// oss:ListObjects`), else the nearest known name by spelling. Nil when nothing is close.
    public static func suggestion(forUnknownAction action: String) -> String? {
        guard let colon = action.firstIndex(of: ":") else { return nil }
        let namespace = action[..<colon].lowercased()
        let name = action[action.index(after: colon)...]
        guard namespace == "oss" || namespace == "s3" else { return nil }
        let other = namespace == "oss" ? "s3" : "oss"
        let crossed = operations(forAction: other + ":" + name)
        if !crossed.isEmpty {
            var seen = Set<String>()
            let names = crossed.map { namespace == "oss" ? $0.ossAction : $0.s3Action }.filter { seen.insert($0).inserted }
            return names.joined(separator: " or ")
        }
        let known = knownActions(namespace: namespace)
        let bare = known.map { String($0.drop { $0 != ":" }.dropFirst()) }
        guard let nearest = Spelling.closest(to: String(name), among: bare) else { return nil }
        return namespace + ":" + nearest
    }

    /// The table above as Markdown (README.md carries it; a test keeps the two equal).
    public static var markdownTable: String {
        var out = "| Operation | OSS action | S3 action | Resource |\n|---|---|---|---|\n"
        for op in allCases {
            var oss = "`\(op.ossAction)`", s3 = "`\(op.s3Action)`"
            var level = op.resourceLevel.rawValue
            switch op {
            case .copyObject, .uploadPartCopy:
                oss += " + `oss:GetObject` on the source"
                s3 += " + `s3:GetObject` on the source"
            case .deleteObjects:
                level += " (checked per key)"
            default: break
            }
            out += "| \(op.rawValue) | \(oss) | \(s3) | \(level) |\n"
        }
        return out
    }

    /// The operation's bit in a statement's operation mask (64 operations at most).
    var bit: UInt64 { 1 << UInt64(Self.allCases.firstIndex(of: self)!) }
}

/// One authorisation check: an operation on a resource.
public struct PolicyCheck: Sendable, Hashable {
    public var operation: GatewayOperation
    public var bucket: String?
    public var key: String?

    public init(operation: GatewayOperation, bucket: String?, key: String?) {
        self.operation = operation
        self.bucket = bucket
        self.key = key
    }
}
