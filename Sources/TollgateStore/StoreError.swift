import TollgateCrypto

/// What went wrong in the object store, in the store's own terms: no protocol codes, statuses or
/// messages (the gateway maps each case to the S3 / OSS error of the request's dialect).
///
/// The refusals (`noSuchKey`, `preconditionFailed`, …) are answers about the request; the
/// backend cases say that a remote backend cannot serve now; the last four cases are failures of
/// the store itself, whose detail is for logs, never for clients.
public enum StoreError: Error, Sendable, Equatable {
    case noSuchBucket(bucket: String)
    case noSuchKey(bucket: String, key: String)
    case noSuchUpload(uploadID: String)
    case bucketNotEmpty(bucket: String)
    /// The bucket exists already (one tenant: it is the caller's).
    case bucketExists(bucket: String)
    case invalidBucketName(bucket: String)
    case emptyKey
    /// Longer than 1024 bytes of UTF-8.
    case keyTooLong
    /// NUL cannot be carried by XML listings.
    case keyContainsNUL
    /// A listing continuation token this store did not issue.
    case invalidContinuationToken
    /// Not in 1...10000.
    case invalidPartNumber(Int)
    /// CompleteMultipartUpload with an empty part list.
    case noPartsGiven
    /// AppendObject at a negative position.
    case negativePosition
    /// The requested range cannot be satisfied; `size` is the object's size.
    case invalidRange(size: Int64)
    /// A completed part is not uploaded, or its ETag does not match.
    case invalidPart(partNumber: Int)
    case invalidPartOrder
    /// A part other than the last is smaller than the minimum part size.
    case entityTooSmall(partNumber: Int)
    case preconditionFailed
    /// AppendObject: `position` is not the object's current length; `next` is the length.
    case positionNotEqualToLength(next: Int64)
    case objectNotAppendable
    /// The bucket already holds the configured number of in-progress multipart uploads.
    case tooManyUploads(bucket: String, limit: Int)
    /// The object's checksum a CompleteMultipartUpload stated is not the one its parts give.
    case checksumMismatch(ChecksumAlgorithm)
    /// The body's MD5 is not the one its write stated (`WriteOptions.expectedMD5`).
    case badDigest
    /// A part's checksum is of another algorithm than the one its upload was created with.
    case checksumAlgorithmMismatch(expected: ChecksumAlgorithm, actual: ChecksumAlgorithm)
    /// A copy's source fails one of its conditions (`CopySourceConditions`).
    case copySourceConditionFailed(CopySourceConditions.Condition)
    /// The operation is beyond what this store's backend can do (`StoreCapabilities`); the
    /// message names the limit.
    case notSupported(String)

    /// The backend cannot be reached or did not answer (refused or reset connections, a 5xx
    /// other than SlowDown, or the store failing fast while its backend is down). Retrying later
    /// may help: the gateway answers 503 ServiceUnavailable with `Retry-After`.
    case backendUnavailable(String)
    /// The backend did not answer in time (503 ServiceUnavailable with `Retry-After`).
    case backendTimeout(String)
    /// The backend asks its clients to slow down (its 503 SlowDown, or 429): 503 SlowDown with
    /// `Retry-After` (the backend's, when it sent one).
    case backendThrottled(retryAfterSeconds: Int?)

    /// The file system or the database is out of space or over quota (ENOSPC, EDQUOT,
    /// SQLITE_FULL). Nothing was written; retrying will not help until space is freed.
    case storageFull(String)
    /// A file system (or other operating-system) call failed.
    case io(String)
    /// The metadata database failed.
    case database(String)
    /// Stored data contradicts the metadata: a file shorter than its committed size or missing,
    /// an id or ETag the store never writes. Damage from outside the store.
    case corrupted(String)
}
