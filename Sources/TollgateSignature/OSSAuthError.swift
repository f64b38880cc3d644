import Foundation
import TollgateDates

/// Every way OSS request authentication can fail, with OSS's error code, message and status.
/// The HTTP layer renders `code`, `message` and `details` into OSS's `<Error>` body.
public enum OSSAuthError: Error, Sendable, Equatable {
    case accessDenied(String)
    /// AccessDenied "Request has expired." (presigned URL past its expiry).
    case requestExpired(expires: Date, serverTime: Date)
    case signatureDoesNotMatch(SignatureMismatch)
    case invalidAccessKeyId(String)
    /// The token is malformed, forged or missing for a temporary key.
    case invalidSecurityToken
    case securityTokenExpired
    case requestTimeTooSkewed(requestTime: Date, serverTime: Date)
    /// Malformed authorization parameters, or a security token sent both as header and query.
    case invalidArgument(message: String, name: String, value: String)
    case internalError

    public var code: String {
        switch self {
        case .accessDenied, .requestExpired: "AccessDenied"
        case .signatureDoesNotMatch: "SignatureDoesNotMatch"
        case .invalidAccessKeyId: "InvalidAccessKeyId"
        case .invalidSecurityToken: "InvalidSecurityToken"
        case .securityTokenExpired: "SecurityTokenExpired"
        case .requestTimeTooSkewed: "RequestTimeTooSkewed"
        case .invalidArgument: "InvalidArgument"
        case .internalError: "InternalError"
        }
    }

    public var httpStatus: Int {
        switch self {
        case .invalidArgument: 400
        case .internalError: 500
        default: 403
        }
    }

    public var message: String {
        switch self {
        case .accessDenied(let message): message
        case .requestExpired: "Request has expired."
        case .signatureDoesNotMatch:
            "The request signature we calculated does not match the signature you provided. Check your key and signing method."
        case .invalidAccessKeyId: "The OSS Access Key Id you provided does not exist in our records."
        case .invalidSecurityToken: "The security token you provided is invalid."
        case .securityTokenExpired: "The security token you provided has expired."
        case .requestTimeTooSkewed: "The difference between the request time and the current time is too large."
        case .invalidArgument(let message, _, _): message
        case .internalError: "We encountered an internal error. Please try again."
        }
    }

    /// Extra elements of the OSS error body, in order.
    public var details: [(name: String, value: String)] {
        switch self {
        case .signatureDoesNotMatch(let m):
            var out: [(name: String, value: String)] = [
                ("StringToSign", m.stringToSign),
                ("SignatureProvided", m.signatureProvided),
                ("StringToSignBytes", S3AuthError.spacedHex(m.stringToSign).uppercased()),
            ]
            if !m.canonicalRequest.isEmpty {
                out.append(("CanonicalRequest", m.canonicalRequest))
            }
            out.append(("OSSAccessKeyId", m.accessKeyId))
            return out
        case .invalidAccessKeyId(let accessKeyId):
            return [("OSSAccessKeyId", accessKeyId)]
        case .requestExpired(let expires, let serverTime):
            return [("Expires", WireDate.iso8601(expires)),
                    ("ServerTime", WireDate.iso8601(serverTime))]
        case .requestTimeTooSkewed(let requestTime, let serverTime):
            return [("RequestTime", WireDate.iso8601(requestTime)),
                    ("ServerTime", WireDate.iso8601(serverTime)),
                    ("MaxAllowedSkewMilliseconds", "900000")]
        case .invalidArgument(_, let name, let value):
            return [("ArgumentName", name), ("ArgumentValue", value)]
        default:
            return []
        }
    }

    init(_ error: CredentialLookupError, accessKeyId: String) {
        switch error {
        case .unknownAccessKey: self = .invalidAccessKeyId(accessKeyId)
        case .missingSecurityToken, .invalidSecurityToken: self = .invalidSecurityToken
        case .expiredSecurityToken: self = .securityTokenExpired
        }
    }
}
