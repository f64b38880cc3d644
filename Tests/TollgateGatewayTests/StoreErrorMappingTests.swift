import HTTPTypes
import NIOCore
import Testing
@testable import TollgateGateway
import TollgateStore
@testable import TollgateTokenService

/// The store speaks no protocol; the gateway renders its errors exactly as the store used to:
/// same status, code and message for every case, in both dialects.
let storeErrorRenderings: [(StoreError, Int, String, String)] = [
    (.noSuchBucket(bucket: "b"), 404, "NoSuchBucket", "The specified bucket does not exist."),
    (.noSuchKey(bucket: "b", key: "k"), 404, "NoSuchKey", "The specified key does not exist."),
    (.noSuchUpload(uploadID: "u"), 404, "NoSuchUpload", "The specified multipart upload does not exist."),
    (.bucketNotEmpty(bucket: "b"), 409, "BucketNotEmpty", "The bucket you tried to delete is not empty."),
    (.bucketExists(bucket: "b"), 409, "BucketAlreadyOwnedByYou",
     "Your previous request to create the named bucket succeeded and you already own it."),
    (.invalidBucketName(bucket: "B"), 400, "InvalidBucketName", "The specified bucket is not valid."),
    (.emptyKey, 400, "InvalidArgument", "Object key must not be empty."),
    (.keyTooLong, 400, "KeyTooLongError", "Your key is too long."),
    (.keyContainsNUL, 400, "InvalidArgument", "Object key must not contain NUL."),
    (.invalidContinuationToken, 400, "InvalidArgument", "The continuation token provided is incorrect"),
    (.invalidPartNumber(0), 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive"),
    (.noPartsGiven, 400, "InvalidArgument", "You must specify at least one part"),
    (.negativePosition, 400, "InvalidArgument", "Position must not be negative"),
    (.invalidRange(size: 1), 416, "InvalidRange", "The requested range is not satisfiable."),
    (.invalidPart(partNumber: 1), 400, "InvalidPart", "One or more of the specified parts could not be found or its entity tag did not match."),
    (.invalidPartOrder, 400, "InvalidPartOrder", "The list of parts was not in ascending order."),
    (.entityTooSmall(partNumber: 1), 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size."),
    (.preconditionFailed, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold."),
    (.positionNotEqualToLength(next: 3), 409, "PositionNotEqualToLength", "Position is not equal to file length."),
    (.objectNotAppendable, 409, "ObjectNotAppendable", "The object is not appendable."),
    (.tooManyUploads(bucket: "b", limit: 3), 400, "TooManyUploads",
     "The bucket already has 3 multipart uploads in progress; complete or abort some before starting another."),
    (.checksumMismatch(.crc32c), 400, "BadDigest", "The CRC32C you specified did not match the calculated checksum."),
    (.checksumAlgorithmMismatch(expected: .crc32, actual: .sha256), 400, "InvalidRequest",
     "Checksum Type mismatch occurred, expected checksum Type: crc32, actual checksum Type: sha256"),
    (.storageFull("ENOSPC"), 507, "XMinioStorageFull",
     "The server's storage is full. Delete objects to make room; retrying will not help until space is freed."),
    (.io("open: /secret/path: Permission denied"), 500, "InternalError", "We encountered an internal error. Please try again."),
    (.database("database: /secret/meta.sqlite is locked"), 500, "InternalError", "We encountered an internal error. Please try again."),
    (.corrupted("/secret/objects/ab/cd/x shorter"), 500, "InternalError", "We encountered an internal error. Please try again."),
    (.copySourceConditionFailed(.ifMatch), 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"),
    (.notSupported("appendable objects (the backend has none)"), 501, "NotImplemented",
     "A header or operation you provided implies functionality that is not implemented: appendable objects (the backend has none)"),
    (.backendUnavailable("connect to 10.0.0.9:7480 (secret): refused"), 503, "ServiceUnavailable", "The storage backend is unavailable. Please retry."),
    (.backendTimeout("no answer from 10.0.0.9:7480 (secret) in 30 s"), 503, "ServiceUnavailable", "The storage backend is unavailable. Please retry."),
    (.backendThrottled(retryAfterSeconds: 7), 503, "SlowDown", "Please reduce your request rate."),
]

@Test("store errors render as the S3 / OSS error the store used to carry", arguments: storeErrorRenderings)
func storeErrorRendering(error: StoreError, status: Int, code: String, message: String) {
    for dialect in [Dialect.s3, .oss] {
        let rendered = Gateway.gatewayError(error, dialect: dialect, bucket: "b", key: "k")
        #expect(rendered.status.code == status)
        #expect(rendered.code == code)
        #expect(rendered.message == message)
        // A failure's detail (paths, SQLite text) never reaches the client.
        #expect(!rendered.details.contains { $0.1.contains("secret") })
    }
}

@Test func storeErrorDetailsAndHeaders() {
    let missing = Gateway.gatewayError(StoreError.noSuchKey(bucket: "b", key: "k"), dialect: .s3, bucket: "b", key: "k")
    #expect(missing.details.map(\.0) == ["Key"] && missing.details.map(\.1) == ["k"])
    let range = Gateway.gatewayError(StoreError.invalidRange(size: 9), dialect: .s3, bucket: "b", key: "k")
    #expect(range.headers[.contentRange] == "bytes */9")
    #expect(range.details.map(\.1) == ["9"])
    let append = Gateway.gatewayError(StoreError.positionNotEqualToLength(next: 7), dialect: .oss, bucket: "b", key: "k")
    #expect(append.headers[HTTPField.Name("x-oss-next-append-position")!] == "7")
    let bucket = Gateway.gatewayError(StoreError.bucketExists(bucket: "b"), dialect: .s3, bucket: "b", key: nil)
    #expect(bucket.details.map(\.0) == ["BucketName"])
    // The copy's failing condition, named in the caller's dialect.
    for (dialect, name) in [(Dialect.s3, "x-amz-copy-source-if-none-match"), (.oss, "x-oss-copy-source-if-none-match")] {
        let copy = Gateway.gatewayError(StoreError.copySourceConditionFailed(.ifNoneMatch), dialect: dialect, bucket: "b", key: "k")
        #expect(copy.details.map(\.0) == ["Condition"] && copy.details.map(\.1) == [name])
    }
}

/// A backend that cannot serve is a 503 with Retry-After in both dialects, never a 500: every
/// SDK retries a 503, after the time it says.
@Test func backendFailuresAre503WithRetryAfter() {
    for dialect in [Dialect.s3, .oss] {
        for error in [StoreError.backendUnavailable("refused"), .backendTimeout("slow")] {
            let rendered = Gateway.gatewayError(error, dialect: dialect, bucket: "b", key: "k")
            #expect(rendered.status == .serviceUnavailable && rendered.headers[.retryAfter] == "2")
            let answer = rendered.rendered(dialect: dialect, requestID: "r", resource: "/b/k", isHead: false)
            #expect(answer.headers[.retryAfter] == "2")
            #expect(String(buffer: answer.body!).contains("<Code>ServiceUnavailable</Code>"))
        }
        let throttled = Gateway.gatewayError(StoreError.backendThrottled(retryAfterSeconds: 7), dialect: dialect, bucket: "b", key: "k")
        #expect(throttled.status == .serviceUnavailable && throttled.code == "SlowDown" && throttled.headers[.retryAfter] == "7")
        let unsaid = Gateway.gatewayError(StoreError.backendThrottled(retryAfterSeconds: nil), dialect: dialect, bucket: "b", key: "k")
        #expect(unsaid.headers[.retryAfter] == "2")
    }
}
