/// Errors the object store reports. Each case maps to exactly one S3 / OSS error code; the HTTP
/// layer renders them in the request's dialect (`code` and `httpStatus` are the S3 values).
public enum StoreError: Error, Sendable, Equatable {
    case noSuchBucket(bucket: String)
    case noSuchKey(bucket: String, key: String)
    case noSuchUpload(uploadID: String)
    case bucketNotEmpty(bucket: String)
    case bucketAlreadyOwnedByYou(bucket: String)
    case invalidBucketName(bucket: String)
    case keyTooLong
    /// A malformed argument (empty key, NUL in a key, bad continuation token, bad part number…).
    case invalidArgument(String)
    /// The requested range cannot be satisfied; `size` is the object's size for `Content-Range: bytes */size`.
    case invalidRange(size: Int64)
    case invalidPart(partNumber: Int)
    case invalidPartOrder
    /// A part other than the last is smaller than the minimum part size.
    case entityTooSmall(partNumber: Int)
    case preconditionFailed
    /// OSS AppendObject: `position` is not the object's current length; `next` is the length.
    case positionNotEqualToLength(next: Int64)
    case objectNotAppendable
    /// The bucket already holds the configured number of in-progress multipart uploads.
    case tooManyUploads(bucket: String, limit: Int)
    /// The file system or the database is out of space or over quota (ENOSPC, EDQUOT,
    /// SQLITE_FULL). Nothing was written; retrying will not help until space is freed.
    case storageFull(String)
    /// An I/O or database failure. The message is for logs; render a generic 500 to clients.
    case `internal`(String)

    /// The S3 / OSS error code.
    public var code: String {
        switch self {
        case .noSuchBucket: "NoSuchBucket"
        case .noSuchKey: "NoSuchKey"
        case .noSuchUpload: "NoSuchUpload"
        case .bucketNotEmpty: "BucketNotEmpty"
        case .bucketAlreadyOwnedByYou: "BucketAlreadyOwnedByYou"
        case .invalidBucketName: "InvalidBucketName"
        case .keyTooLong: "KeyTooLongError"
        case .invalidArgument: "InvalidArgument"
        case .invalidRange: "InvalidRange"
        case .invalidPart: "InvalidPart"
        case .invalidPartOrder: "InvalidPartOrder"
        case .entityTooSmall: "EntityTooSmall"
        case .preconditionFailed: "PreconditionFailed"
        case .positionNotEqualToLength: "PositionNotEqualToLength"
        case .objectNotAppendable: "ObjectNotAppendable"
        case .tooManyUploads: "TooManyUploads"
        // MinIO's code for the same condition, which S3 tools built for MinIO already know.
        case .storageFull: "XMinioStorageFull"
        case .internal: "InternalError"
        }
    }

    /// The HTTP status S3 / OSS use for the code.
    public var httpStatus: Int {
        switch self {
        case .noSuchBucket, .noSuchKey, .noSuchUpload: 404
        case .bucketNotEmpty, .bucketAlreadyOwnedByYou, .positionNotEqualToLength, .objectNotAppendable: 409
        case .invalidBucketName, .keyTooLong, .invalidArgument, .invalidPart, .invalidPartOrder, .entityTooSmall, .tooManyUploads: 400
        case .invalidRange: 416
        case .preconditionFailed: 412
        // 507 Insufficient Storage, as MinIO answers: not one of the statuses SDKs retry.
        case .storageFull: 507
        case .internal: 500
        }
    }

    /// A message for the error document.
    public var message: String {
        switch self {
        case .noSuchBucket: "The specified bucket does not exist."
        case .noSuchKey: "The specified key does not exist."
        case .noSuchUpload: "The specified multipart upload does not exist."
        case .bucketNotEmpty: "The bucket you tried to delete is not empty."
        case .bucketAlreadyOwnedByYou: "Your previous request to create the named bucket succeeded and you already own it."
        case .invalidBucketName: "The specified bucket is not valid."
        case .keyTooLong: "Your key is too long."
        case .invalidArgument(let detail): detail
        case .invalidRange: "The requested range is not satisfiable."
        case .invalidPart: "One or more of the specified parts could not be found or its entity tag did not match."
        case .invalidPartOrder: "The list of parts was not in ascending order."
        case .entityTooSmall: "Your proposed upload is smaller than the minimum allowed object size."
        case .preconditionFailed: "At least one of the pre-conditions you specified did not hold."
        case .positionNotEqualToLength: "Position is not equal to file length."
        case .objectNotAppendable: "The object is not appendable."
        case .tooManyUploads(_, let limit):
            "The bucket already has \(limit) multipart uploads in progress; complete or abort some before starting another."
        case .storageFull: "The server's storage is full. Delete objects to make room; retrying will not help until space is freed."
        case .internal: "We encountered an internal error. Please try again."
        }
    }
}
