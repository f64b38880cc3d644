import Foundation

/// The `Authentication` section of config.json: who may get a token, and with which role.
public struct AuthenticationSettings: Sendable, Equatable {
    /// Anonymous callers get `DefaultRole` (false unless the section says otherwise).
    public var allowAnonymous: Bool
    public var providers: [ProviderSettings]
    /// Ordered: the first rule that matches the caller's claims names the role.
    public var roleRules: [RoleRule]
    /// The role of a caller no rule matches; nil refuses such a caller.
    public var defaultRole: String?
    /// The app's own login, asked over HTTP for tokens that are not a provider's JWT.
    public var webhook: WebhookSettings?

    public init(allowAnonymous: Bool, providers: [ProviderSettings], roleRules: [RoleRule], defaultRole: String?,
                webhook: WebhookSettings? = nil) {
        self.allowAnonymous = allowAnonymous
        self.providers = providers
        self.roleRules = roleRules
        self.defaultRole = defaultRole
        self.webhook = webhook
    }

    /// The roles a caller with `claims` may have: the first matching rule's role (or the role
    /// the webhook named) and the default role (either may be absent).
    public func allowedRoles(for claims: [String: JSONValue], named: String? = nil) -> (matched: String?, fallback: String?) {
        (named ?? roleRules.first { $0.matches(claims) }?.role, defaultRole)
    }

    /// The role for a caller: the requested one when a matching rule yields it (or the webhook
    /// named it) or it is the default role; without a request, that matched role, else the
    /// default role.
    public func role(for claims: [String: JSONValue], named: String? = nil, requested: String?) throws(IdentityError) -> String {
        let (matched, fallback) = allowedRoles(for: claims, named: named)
        if let requested {
            guard requested == matched || requested == fallback else {
                throw .roleDenied("The role \"\(requested)\" is not allowed for this identity.")
            }
            return requested
        }
        guard let role = matched ?? fallback else {
            throw .rejectedClaim("No role rule matches this identity and there is no DefaultRole.")
        }
        return role
    }
}

/// `{"URL": …, "TimeoutMs": …, "CacheSeconds": …}`: the server POSTs `{"token": …}` and reads
/// `{"user": …, "role"?: …, "claims"?: {…}, "maxValiditySeconds"?: …}` from a 200, or a refusal
/// from any other status.
public struct WebhookSettings: Sendable, Equatable {
    public var url: String
    public var timeoutMilliseconds: Int
    /// How long an answer is reused for the same token.
    public var cacheSeconds: Int
    /// Put before the user it names (see `ProviderSettings.subjectPrefix`).
    public var subjectPrefix: String

    public init(url: String, timeoutMilliseconds: Int = 2000, cacheSeconds: Int = 60, subjectPrefix: String = "") {
        self.url = url
        self.timeoutMilliseconds = timeoutMilliseconds
        self.cacheSeconds = cacheSeconds
        self.subjectPrefix = subjectPrefix
    }
}

/// One OIDC / JWT identity provider.
public struct ProviderSettings: Sendable, Equatable {
    public var name: String
    /// The exact `iss` of its tokens.
    public var issuer: String
    /// Where its keys are: a JWKS URL, or an OIDC discovery URL (its `jwks_uri` is used).
    public var jwksURL: String?
    public var discoveryURL: String?
    /// `aud` must name one of these.
    public var audiences: [String]
    /// The accepted `alg` values (never `none`).
    public var algorithms: [JWTAlgorithmName]
    /// The claim that names the user (`sub` by default).
    public var subjectClaim: String
    public var leewaySeconds: Int
    /// The shared secret for HS256/384/512 (read from the environment variable the config names).
    public var hmacSecret: [UInt8]?
    /// Claims carried into the token as `${jwt:NAME}` / `jwt:NAME` condition keys.
    public var carriedClaims: [String]
    /// Put before the subject claim to make the user's name (`${user}`): with more than one
    /// identity source, each has its own, so that `alice` of one is never `alice` of another.
    public var subjectPrefix: String

    public init(name: String, issuer: String, jwksURL: String?, discoveryURL: String?, audiences: [String],
                algorithms: [JWTAlgorithmName], subjectClaim: String = "sub", leewaySeconds: Int = 60,
                hmacSecret: [UInt8]? = nil, carriedClaims: [String] = [], subjectPrefix: String = "") {
        self.subjectPrefix = subjectPrefix
        self.name = name
        self.issuer = issuer
        self.jwksURL = jwksURL
        self.discoveryURL = discoveryURL
        self.audiences = audiences
        self.algorithms = algorithms
        self.subjectClaim = subjectClaim
        self.leewaySeconds = leewaySeconds
        self.hmacSecret = hmacSecret
        self.carriedClaims = carriedClaims
    }
}

/// The JWS algorithms a provider may use.
public enum JWTAlgorithmName: String, Sendable, CaseIterable {
    case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512", ps256 = "PS256", ps384 = "PS384", ps512 = "PS512"
    case es256 = "ES256", es384 = "ES384", es512 = "ES512", eddsa = "EdDSA"
    case hs256 = "HS256", hs384 = "HS384", hs512 = "HS512"

    /// The JWK `kty` a key for this algorithm must have; nil for the HMAC algorithms, which never
    /// use a published key.
    var keyType: String? {
        switch self {
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: "RSA"
        case .es256, .es384, .es512: "EC"
        case .eddsa: "OKP"
        case .hs256, .hs384, .hs512: nil
        }
    }

    /// The curve an EC key must be on.
    var curve: String? {
        switch self {
        case .es256: "P-256"
        case .es384: "P-384"
        case .es512: "P-521"
        default: nil
        }
    }

    public var isHMAC: Bool { keyType == nil }
}

/// `{"Claim": "groups", "Match": "Contains", "Value": "editors", "Role": "readwrite"}`.
public struct RoleRule: Sendable, Equatable {
    public enum Match: String, Sendable, CaseIterable {
        case equals = "Equals", startsWith = "StartsWith", contains = "Contains", like = "Like"
    }

    public var claim: String
    public var match: Match
    public var value: String
    public var role: String

    public init(claim: String, match: Match, value: String, role: String) {
        self.claim = claim
        self.match = match
        self.value = value
        self.role = role
    }

    /// A claim that is an array matches when any element does.
    public func matches(_ claims: [String: JSONValue]) -> Bool {
        guard let claimValue = claims[claim] else { return false }
        return claimValue.strings.contains { matches($0) }
    }

    func matches(_ text: String) -> Bool {
        switch match {
        case .equals: text == value
        case .startsWith: text.hasPrefix(value)
        case .contains: text.contains(value)
        case .like: Self.glob(Array(value.unicodeScalars), Array(text.unicodeScalars))
        }
    }

    /// `*` and `?` glob, iterative with single-star backtracking (linear in practice).
    static func glob(_ pattern: [Unicode.Scalar], _ text: [Unicode.Scalar]) -> Bool {
        var p = 0, t = 0, star = -1, mark = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == "?" || pattern[p] == text[t], pattern[p] != "*" {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == "*" {
                star = p
                mark = t
                p += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }
}

/// Any JSON value: a claim's value, or a config.json member whose type varies.
public enum JSONValue: Sendable, Equatable, Decodable {
    case string(String), number(Double), bool(Bool), array([JSONValue]), object([String: JSONValue]), null

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let flag = try? container.decode(Bool.self) { self = .bool(flag) }
        else if let number = try? container.decode(Double.self) { self = .number(number) }
        else if let string = try? container.decode(String.self) { self = .string(string) }
        else if let array = try? container.decode([JSONValue].self) { self = .array(array) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    /// The value as text, for a scalar (numbers without a fraction print as integers).
    public var scalarText: String? {
        switch self {
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        default: nil
        }
    }

    /// What kind of value this is, for messages ("a number").
    public var kind: String {
        switch self {
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .array: "an array"
        case .object: "an object"
        case .null: "null"
        }
    }

    /// A number read from outside (a webhook's answer, a config file) as an `Int` within
    /// `range`: a whole number inside it as it is, one beyond it clamped to it; nil for a
    /// fraction or anything but a number. Every such conversion goes through here, since
    /// `Int(_: Double)` traps on a value that does not fit (`1e19`).
    public func integer(clampedTo range: ClosedRange<Int>) -> Int? {
        guard case .number(let number) = self, number == number.rounded() else { return nil }
        if number <= Double(range.lowerBound) { return range.lowerBound }
        if number >= Double(range.upperBound) { return range.upperBound }
        return Int(number)
    }

    /// A whole number within `range`, exactly; nil otherwise (config values that must be in range).
    public func integer(in range: ClosedRange<Int>) -> Int? {
        guard case .number(let number) = self, let exact = Int(exactly: number), range.contains(exact) else { return nil }
        return exact
    }

    /// Every scalar as text: the value itself, or each element of an array.
    public var strings: [String] {
        if case .array(let items) = self { return items.compactMap(\.scalarText) }
        return scalarText.map { [$0] } ?? []
    }
}
