import Foundation

/// Which signing scheme a request used.
public enum SignatureDialect: String, Sendable, Equatable {
    /// AWS Signature Version 4 for S3 (header or presigned query).
    case s3SigV4
    /// AWS Signature Version 2 for S3 (`Authorization: AWS ak:sig`, `AWSAccessKeyId` presigned URLs).
    case s3SigV2
    /// OSS `Authorization: OSS ak:sig` / `OSSAccessKeyId` presigned URLs (HMAC-SHA1).
    case ossV1
    /// OSS `Authorization: OSS2 AccessKeyId:…` / `x-oss-signature-version=OSS2` presigned URLs (HMAC-SHA256).
    case ossV2
    /// OSS `OSS4-HMAC-SHA256` (header or presigned query).
    case ossV4
}

/// What the verifier asks the caller for: the secret of `accessKeyId`. For temporary
/// credentials the caller derives the secret from the security token, which this module passes
/// through untouched and never interprets.
public struct CredentialQuery: Sendable, Equatable {
    public var accessKeyId: String
    /// The security token exactly as sent (`X-Amz-Security-Token`, `x-oss-security-token`,
    /// `security-token`), or nil.
    public var securityToken: String?
    public var dialect: SignatureDialect

    public init(accessKeyId: String, securityToken: String?, dialect: SignatureDialect) {
        self.accessKeyId = accessKeyId
        self.securityToken = securityToken
        self.dialect = dialect
    }
}

/// Why the caller could not produce a secret. Each case maps to the dialect's error code
/// (see `S3AuthError` and `OSSAuthError`).
public enum CredentialLookupError: Error, Sendable, Equatable {
    /// No such access key (S3 `InvalidAccessKeyId`, OSS `InvalidAccessKeyId`).
    case unknownAccessKey
    /// The access key is temporary but no security token was sent
    /// (S3 `MissingSecurityHeader`, OSS `InvalidSecurityToken`).
    case missingSecurityToken
    /// The token is malformed, tampered with, not yet valid, signed by an unknown key, or does not
    /// belong to this access key (S3 `InvalidToken`, OSS `InvalidSecurityToken`).
    case invalidSecurityToken
    /// The token has expired (S3 `ExpiredToken`, OSS `SecurityTokenExpired`).
    case expiredSecurityToken
}

/// The caller's secret lookup: returns the (possibly derived) secret access key.
public typealias SecretLookup = (CredentialQuery) throws(CredentialLookupError) -> String

/// A verified request's identity: what handlers and the policy engine may rely on.
public struct VerifiedIdentity: Sendable, Equatable {
    public var accessKeyId: String
    public var dialect: SignatureDialect
    /// The security token exactly as sent, or nil.
    public var securityToken: String?
    /// True for presigned (query-string) requests.
    public var presigned: Bool
    /// The region from the credential scope (SigV4, OSS V4); nil for OSS V1 and V2.
    public var region: String?
    /// Lowercased names of the headers covered by the signature.
    public var signedHeaders: [String]
    /// The time the client signed at (`x-amz-date`, `Date`, `x-oss-date`), or nil when unknown
    /// (OSS V1 presigned URLs carry only an expiry).
    public var requestTime: Date?
    /// When a presigned request stops being valid, or nil.
    public var expires: Date?

    public init(accessKeyId: String, dialect: SignatureDialect, securityToken: String?, presigned: Bool,
                region: String?, signedHeaders: [String], requestTime: Date?, expires: Date?) {
        self.accessKeyId = accessKeyId
        self.dialect = dialect
        self.securityToken = securityToken
        self.presigned = presigned
        self.region = region
        self.signedHeaders = signedHeaders
        self.requestTime = requestTime
        self.expires = expires
    }
}

/// Maximum difference between a header-signed request's time and the server's clock.
public let maxClockSkewSeconds: TimeInterval = 15 * 60

/// What the server computed when a signature did not match; S3 and OSS return these in the
/// error body so that clients can debug. Contains no secret.
public struct SignatureMismatch: Sendable, Equatable {
    public var accessKeyId: String
    public var stringToSign: String
    public var signatureProvided: String
    /// SigV4 and OSS V4 requests only; empty for OSS V1 and for chunk and trailer signatures.
    public var canonicalRequest: String

    public init(accessKeyId: String, stringToSign: String, signatureProvided: String, canonicalRequest: String) {
        self.accessKeyId = accessKeyId
        self.stringToSign = stringToSign
        self.signatureProvided = signatureProvided
        self.canonicalRequest = canonicalRequest
    }
}
