/// Why a caller was not given credentials. The codes are AWS STS's, which both the JSON
/// endpoint and the STS API answer with.
public enum IdentityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No login token, and anonymous callers are not allowed.
    case missingToken
    /// Malformed, badly signed, wrong issuer or audience, unknown key, refused algorithm.
    case invalidToken(String)
    /// Expired (beyond the leeway).
    case expired
    /// A claim the configuration refuses: no role for it, a subject that is not allowed.
    case rejectedClaim(String)
    /// A role the caller asked for and may not have.
    case roleDenied(String)
    /// A requested duration or another parameter out of range.
    case validation(String)
    /// The identity provider could not be reached and nothing usable is cached.
    case communication(String)

    public var code: String {
        switch self {
        case .missingToken: "MissingAuthenticationToken"
        case .invalidToken: "InvalidIdentityToken"
        case .expired: "ExpiredTokenException"
        case .rejectedClaim: "IDPRejectedClaim"
        case .roleDenied: "AccessDenied"
        case .validation: "ValidationError"
        case .communication: "IDPCommunicationError"
        }
    }

    public var httpStatus: Int {
        switch self {
        case .missingToken, .invalidToken, .expired: 401
        case .rejectedClaim, .roleDenied: 403
        case .validation: 400
        case .communication: 503
        }
    }

    public var message: String {
        switch self {
        case .missingToken: "A login token is required: send it as Authorization: Bearer, access_token, or in the POST body."
        case .invalidToken(let reason): "The login token is not valid: \(reason)"
        case .expired: "The login token has expired."
        case .rejectedClaim(let reason), .roleDenied(let reason), .validation(let reason): reason
        case .communication(let reason): "The identity provider could not be reached: \(reason)"
        }
    }

    public var description: String { "\(code): \(message)" }
}

/// The app user's name as it fills `${user}`, `${aws:username}` and `${jwt:sub}`.
public enum Subject {
    public static let maxLength = 128

    /// Nil when `subject` is acceptable; otherwise why not. A subject that could widen what a
    /// policy grants is refused, never rewritten: `/` (it would name a sub-prefix of another
    /// user's space), `*`, `?`, `$` (wildcards and variables, though substituted values are
    /// matched literally), `..`, control characters, empty or longer than 128 bytes of UTF-8
    /// (bytes, not characters: one grapheme can be thousands of bytes).
    public static func problem(_ subject: String) -> String? {
        if subject.isEmpty { return "the subject is empty" }
        if subject.utf8.count > maxLength { return "the subject is longer than \(maxLength) bytes" }
        if subject.contains("..") { return "the subject contains \"..\"" }
        for scalar in subject.unicodeScalars {
            switch scalar {
            case "/", "*", "?", "$", "\\": return "the subject contains \"\(scalar)\""
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: return "the subject contains a control character"
            default: continue
            }
        }
        return nil
    }
}
