import Foundation
import TollgateCrypto
import TollgateDates

/// Every way S3 request authentication or payload verification can fail, with the S3 error
/// code, message and status each maps to. The HTTP layer renders `code`, `message` and
/// `details` (extra XML elements, in order) into S3's `<Error>` body.
public enum S3AuthError: Error, Sendable, Equatable {
    /// AccessDenied with a specific message (unsigned x-amz-* headers, not yet valid, …).
    case accessDenied(String)
    /// AccessDenied "Request has expired" (presigned URL past X-Amz-Date + X-Amz-Expires).
    case requestExpired(expires: Date, serverTime: Date, expiresSeconds: Int)
    case signatureDoesNotMatch(SignatureMismatch)
    case invalidAccessKeyId(String)
    /// The access key is temporary but no security token was sent.
    case missingSecurityHeader
    case invalidToken
    case expiredToken
    case authorizationHeaderMalformed(String)
    case authorizationQueryParametersError(String)
    case requestTimeTooSkewed(requestTime: Date, serverTime: Date)
    /// The body's SHA-256 differs from `x-amz-content-sha256`.
    case contentSHA256Mismatch(clientComputed: String, serverComputed: String)
    /// `Content-MD5` is not base64 of 16 bytes.
    case invalidDigest
    /// The body's MD5 differs from `Content-MD5`.
    case contentMD5Mismatch
    /// The body's additional checksum differs from the `x-amz-checksum-*` header or trailer.
    case checksumMismatch(ChecksumAlgorithm)
    /// An `x-amz-checksum-*` value is not valid base64 of the right size.
    case invalidChecksumValue(name: String, trailer: Bool)
    /// The body ended before the declared (decoded) content length.
    case incompleteBody
    /// `x-amz-decoded-content-length` missing on a streaming upload.
    case missingDecodedContentLength
    /// The aws-chunked body is not well formed, or a chunk is larger than allowed.
    case malformedChunkedBody(String)
    /// `x-amz-content-sha256` is none of the accepted values.
    case invalidContentSHA256(String)
    case invalidRequest(String)
    /// OpenSSL failed; never caused by the client.
    case internalError

    public var code: String {
        switch self {
        case .accessDenied, .requestExpired: "AccessDenied"
        case .signatureDoesNotMatch: "SignatureDoesNotMatch"
        case .invalidAccessKeyId: "InvalidAccessKeyId"
        case .missingSecurityHeader: "MissingSecurityHeader"
        case .invalidToken: "InvalidToken"
        case .expiredToken: "ExpiredToken"
        case .authorizationHeaderMalformed: "AuthorizationHeaderMalformed"
        case .authorizationQueryParametersError: "AuthorizationQueryParametersError"
        case .requestTimeTooSkewed: "RequestTimeTooSkewed"
        case .contentSHA256Mismatch: "XAmzContentSHA256Mismatch"
        case .invalidDigest: "InvalidDigest"
        case .contentMD5Mismatch, .checksumMismatch: "BadDigest"
        case .invalidChecksumValue, .invalidRequest, .malformedChunkedBody: "InvalidRequest"
        case .incompleteBody: "IncompleteBody"
        case .missingDecodedContentLength: "MissingContentLength"
        case .invalidContentSHA256: "InvalidArgument"
        case .internalError: "InternalError"
        }
    }

    public var httpStatus: Int {
        switch self {
        case .accessDenied, .requestExpired, .signatureDoesNotMatch, .invalidAccessKeyId,
             .requestTimeTooSkewed:
            403
        case .missingDecodedContentLength: 411
        case .internalError: 500
        default: 400
        }
    }

    public var message: String {
        switch self {
        case .accessDenied(let message): message
        case .requestExpired: "Request has expired"
        case .signatureDoesNotMatch:
            "The request signature we calculated does not match the signature you provided. Check your key and signing method."
        case .invalidAccessKeyId: "The AWS Access Key Id you provided does not exist in our records."
        case .missingSecurityHeader: "Your request was missing a required header: x-amz-security-token"
        case .invalidToken: "The provided token is malformed or otherwise invalid."
        case .expiredToken: "The provided token has expired."
        case .authorizationHeaderMalformed(let detail): "The authorization header is malformed; \(detail)"
        case .authorizationQueryParametersError(let detail): detail
        case .requestTimeTooSkewed: "The difference between the request time and the current time is too large."
        case .contentSHA256Mismatch: "The provided 'x-amz-content-sha256' header does not match what was computed."
        case .invalidDigest: "The Content-MD5 you specified is not valid."
        case .contentMD5Mismatch: "The Content-MD5 you specified did not match what we received."
        case .checksumMismatch(let algorithm): "The \(algorithm.displayName) you specified did not match the calculated checksum."
        case .invalidChecksumValue(let name, let trailer):
            trailer ? "Value for \(name) trailing header is invalid." : "Value for \(name) header is invalid."
        case .incompleteBody: "You did not provide the number of bytes specified by the Content-Length HTTP header"
        case .missingDecodedContentLength: "You must provide the x-amz-decoded-content-length HTTP header."
        case .malformedChunkedBody(let detail): "Malformed aws-chunked body: \(detail)"
        case .invalidContentSHA256:
            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value."
        case .invalidRequest(let message): message
        case .internalError: "We encountered an internal error. Please try again."
        }
    }

    /// Extra elements of the S3 error body, in the order S3 writes them.
    public var details: [(name: String, value: String)] {
        switch self {
        case .signatureDoesNotMatch(let m):
            var out: [(name: String, value: String)] = [
                ("AWSAccessKeyId", m.accessKeyId),
                ("StringToSign", m.stringToSign),
                ("SignatureProvided", m.signatureProvided),
                ("StringToSignBytes", Self.spacedHex(m.stringToSign)),
            ]
            if !m.canonicalRequest.isEmpty {
                out.append(("CanonicalRequest", m.canonicalRequest))
                out.append(("CanonicalRequestBytes", Self.spacedHex(m.canonicalRequest)))
            }
            return out
        case .invalidAccessKeyId(let accessKeyId):
            return [("AWSAccessKeyId", accessKeyId)]
        case .requestExpired(let expires, let serverTime, let seconds):
            return [("X-Amz-Expires", String(seconds)),
                    ("Expires", WireDate.iso8601(expires)),
                    ("ServerTime", WireDate.iso8601(serverTime))]
        case .requestTimeTooSkewed(let requestTime, let serverTime):
            return [("RequestTime", WireDate.iso8601(requestTime)),
                    ("ServerTime", WireDate.iso8601(serverTime)),
                    ("MaxAllowedSkewMilliseconds", "900000")]
        case .contentSHA256Mismatch(let client, let server):
            return [("ClientComputedContentSHA256", client), ("S3ComputedContentSHA256", server)]
        default:
            return []
        }
    }

    init(_ error: CredentialLookupError, accessKeyId: String) {
        switch error {
        case .unknownAccessKey: self = .invalidAccessKeyId(accessKeyId)
        case .missingSecurityToken: self = .missingSecurityHeader
        case .invalidSecurityToken: self = .invalidToken
        case .expiredSecurityToken: self = .expiredToken
        }
    }

    static func spacedHex(_ string: String) -> String {
        string.utf8.map { String(format: "%02x", $0) }.joined(separator: " ")
    }
}
