import HTTPTypes
import TollgateTokenService

/// Header names of the two dialects, spelled once.
extension HTTPField.Name {
    static let amzRequestID = Self("x-amz-request-id")!
    static let ossRequestID = Self("x-oss-request-id")!
    static let amzCopySource = Self("x-amz-copy-source")!
    static let ossCopySource = Self("x-oss-copy-source")!
    static let amzMetadataDirective = Self("x-amz-metadata-directive")!
    static let ossMetadataDirective = Self("x-oss-metadata-directive")!
    static let amzBucketRegion = Self("x-amz-bucket-region")!
    static let ossNextAppendPosition = Self("x-oss-next-append-position")!
    static let ossObjectType = Self("x-oss-object-type")!
    static let ossForbidOverwrite = Self("x-oss-forbid-overwrite")!
    /// OSS: a bodiless error answer's `<Error>` document, base64 (HEAD).
    static let ossErr = Self("x-oss-err")!
    /// OSS CompleteMultipartUpload: `yes` completes with every uploaded part, without a body.
    static let ossCompleteAll = Self("x-oss-complete-all")!
    static let amzTagging = Self("x-amz-tagging")!
    static let ossTagging = Self("x-oss-tagging")!
    static let amzTaggingCount = Self("x-amz-tagging-count")!
    static let ossTaggingCount = Self("x-oss-tagging-count")!
    static let amzTaggingDirective = Self("x-amz-tagging-directive")!
    static let ossTaggingDirective = Self("x-oss-tagging-directive")!
    static let amzChecksumMode = Self("x-amz-checksum-mode")!
    static let amzChecksumType = Self("x-amz-checksum-type")!
    static let amzChecksumAlgorithm = Self("x-amz-checksum-algorithm")!
    static let ossHashCRC64ECMA = Self("x-oss-hash-crc64ecma")!
    static let contentMD5 = Self("Content-MD5")!
    static let expires = Self("Expires")!
}
