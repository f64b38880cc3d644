import Foundation
import TollgateCrypto
import TollgateDates
import TollgateJSON

/// What a security token says. Serialised as compact JSON with short, sorted keys.
public struct TokenClaims: Codable, Sendable, Equatable {
    /// Token format version; this code writes and reads 1.
    public var version: Int
    /// Which root secret signed the token (see `SigningKey.id`). Travels in the token's
    /// header, outside the claims JSON, so the key is chosen before anything is parsed.
    public var keyId: String = ""
    /// The temporary access key id, `STS.` followed by 24 random characters.
    public var accessKeyId: String
    /// Issue time, seconds since 1970. Also the start of validity.
    public var issuedAt: Int64
    /// Expiry, seconds since 1970.
    public var expiresAt: Int64
    /// The app user the token was issued for, if any (`${user}`, `${aws:username}`, `${jwt:sub}`).
    public var subject: String?
    /// Role name; its policy is read by name at request time, so policy edits apply at once.
    public var role: String
    /// Session name, for logs and `aws:userid`.
    public var sessionName: String
    /// A session policy (JSON text) that narrows the role policy, if one was given.
    public var sessionPolicy: String?
    /// Further claims (`jwt:*` condition keys) carried from app authentication.
    public var claims: [String: String]?

    public init(
        keyId: String, accessKeyId: String, issuedAt: Int64, expiresAt: Int64, subject: String?,
        role: String, sessionName: String, sessionPolicy: String? = nil, claims: [String: String]? = nil
    ) {
        self.version = 1
        self.keyId = keyId
        self.accessKeyId = accessKeyId
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.subject = subject
        self.role = role
        self.sessionName = sessionName
        self.sessionPolicy = sessionPolicy
        self.claims = claims
    }

    enum CodingKeys: String, CodingKey {
        case version = "v", accessKeyId = "ak", issuedAt = "iat", expiresAt = "exp"
        case subject = "sub", role, sessionName = "sn", sessionPolicy = "sp", claims = "ctx"
    }

    public var expiration: Date { Date(timeIntervalSince1970: TimeInterval(expiresAt)) }

    /// Compact JSON with sorted keys, written directly: minting is on the token endpoint's hot
    /// path, and this is several times cheaper than `JSONEncoder`. `JSONDecoder` reads it back.
    var json: [UInt8] {
        var json = JSONObjectWriter()
        json.add("ak", accessKeyId)
        if let claims {
            var nested = JSONObjectWriter()
            for (name, value) in claims.sorted(by: { $0.key < $1.key }) { nested.add(member: name, value) }
            json.add("ctx", raw: nested.finish())
        }
        json.add("exp", expiresAt)
        json.add("iat", issuedAt)
        json.add("role", role)
        json.add("sn", sessionName)
        if let sessionPolicy { json.add("sp", sessionPolicy) }
        if let subject { json.add("sub", subject) }
        json.add("v", Int64(version))
        return json.finishBytes()
    }
}

/// Why a token was refused.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    case badSignature
    case expired(at: Int64)
    case notYetValid(from: Int64)
    case unknownKey(String)

    public var description: String {
        switch self {
        case .malformed(let why): "malformed token: \(why)"
        case .badSignature: "bad signature"
        case .expired(let at): "expired at \(WireDate.iso8601(at))"
        case .notYetValid(let from): "not valid before \(WireDate.iso8601(from))"
        case .unknownKey(let id): "signed with unknown key \(id)"
        }
    }
}

/// Keys derived from one root secret. Every instance holding the same root secret derives the
/// same keys, so any of them verifies any token: no shared state.
public struct SigningKey: Sendable {
    /// Public identifier of the root secret: the first 8 bytes of HMAC(root, "tollgate/key-id"), hex.
    public let id: String
    let macKey: HMACKey
    let secretKey: HMACKey

    public init(rootSecret: String) throws(CryptoError) {
        let root = Array(rootSecret.utf8)
        id = Hex.encode(try Crypto.hmacSHA256(key: root, "tollgate/key-id/v1").prefix(8))
        macKey = try HMACKey(.sha256, key: try Crypto.hmacSHA256(key: root, "tollgate/token-mac/v1"))
        secretKey = try HMACKey(.sha256, key: try Crypto.hmacSHA256(key: root, "tollgate/temporary-secret/v1"))
    }

    func mac(_ signedPart: Substring) throws(CryptoError) -> [UInt8] {
        let result: Result<[UInt8], CryptoError>? = signedPart.utf8.withContiguousStorageIfAvailable { bytes in
            Result { () throws(CryptoError) in try macKey.authenticate(UnsafeRawBufferPointer(bytes)) }
        }
        if let result { return try result.get() }
        return try macKey.authenticate(String(signedPart))
    }

    /// The temporary secret of a token: derived from its identity, never stored.
    /// base64url(HMAC(secretKey, "<access key id>\n<issued at>\n<expires at>")).
    func temporarySecret(for claims: TokenClaims) throws(CryptoError) -> String {
        var identity = [UInt8]()
        identity.reserveCapacity(claims.accessKeyId.utf8.count + 24)
        identity.append(contentsOf: claims.accessKeyId.utf8)
        identity.append(UInt8(ascii: "\n"))
        JSONObjectWriter.appendDecimal(claims.issuedAt, to: &identity)
        identity.append(UInt8(ascii: "\n"))
        JSONObjectWriter.appendDecimal(claims.expiresAt, to: &identity)
        return Base64.encodeURL(try secretKey.authenticate(identity))
    }
}

/// The credentials handed to a client, in the order the token endpoint prints them.
public struct IssuedCredentials: Sendable {
    public let accessKeyId: String
    public let accessKeySecret: String
    public let securityToken: String
    public let claims: TokenClaims
}

/// Mints and verifies security tokens.
///
/// Format: `TG1.<key id>.<base64url(claims JSON)>.<base64url(HMAC-SHA256(macKey, "TG1.<key id>.<claims>"))>`.
/// The current key signs; previous keys (rotated-out root secrets) only verify. The MAC is
/// checked before the claims are parsed.
public struct TokenService: Sendable {
    public static let prefix = "TG1"
    /// Issuers' clocks may differ a little; a token from up to a minute in the future is accepted.
    public static let allowedClockSkew: Int64 = 60

    public let current: SigningKey
    let keys: [String: SigningKey]

    public init(rootSecret: String, previousSecrets: [String] = []) throws(CryptoError) {
        current = try SigningKey(rootSecret: rootSecret)
        var keys = [current.id: current]
        for secret in previousSecrets {
            let key = try SigningKey(rootSecret: secret)
            if keys[key.id] == nil { keys[key.id] = key }
        }
        self.keys = keys
    }

    public func issue(
        subject: String?, role: String, sessionName: String? = nil, sessionPolicy: String? = nil,
        claims extra: [String: String]? = nil, duration: Int64, now: Date
    ) throws(CryptoError) -> IssuedCredentials {
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let accessKeyId = try Self.newAccessKeyId()
        let claims = TokenClaims(
            keyId: current.id, accessKeyId: accessKeyId, issuedAt: issuedAt, expiresAt: issuedAt + duration,
            subject: subject, role: role, sessionName: sessionName ?? accessKeyId, sessionPolicy: sessionPolicy,
            claims: extra
        )
        // Written into one buffer: prefix, key id, claims, then the MAC of all that.
        let json = claims.json
        var token = [UInt8]()
        // Two dots, base64 rounding, then a dot and the 43 characters of the MAC.
        token.reserveCapacity(Self.prefix.utf8.count + current.id.utf8.count + json.count * 4 / 3 + 48)
        token.append(contentsOf: Self.prefix.utf8)
        token.append(UInt8(ascii: "."))
        token.append(contentsOf: current.id.utf8)
        token.append(UInt8(ascii: "."))
        Base64.appendURL(json, to: &token)
        let mac = try current.macKey.authenticate(token)
        token.append(UInt8(ascii: "."))
        Base64.appendURL(mac, to: &token)
        return IssuedCredentials(
            accessKeyId: accessKeyId, accessKeySecret: try current.temporarySecret(for: claims),
            securityToken: String(decoding: token, as: UTF8.self), claims: claims
        )
    }

    /// Verifies a token and returns its claims and temporary secret, or the reason it is refused.
    /// Checks, in order: structure, key id, signature, validity period.
    public func verify(_ token: String, now: Date) throws(TokenError) -> (claims: TokenClaims, secret: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == Self.prefix else { throw .malformed("not a \(Self.prefix) token") }
        guard let key = keys[String(parts[1])] else { throw .unknownKey(String(parts[1].prefix(16))) }
        guard let payload = Base64.decodeURLStrict(parts[2]), let mac = Base64.decodeURLStrict(parts[3]) else {
            throw .malformed("bad encoding")
        }
        let signedPart = token[token.startIndex..<parts[3].startIndex].dropLast()
        let expected: [UInt8]
        do { expected = try key.mac(signedPart) } catch { throw .badSignature }
        guard Crypto.constantTimeEqual(expected, mac) else { throw .badSignature }
        var claims: TokenClaims
        do { claims = try JSONDecoder().decode(TokenClaims.self, from: Data(payload)) } catch {
            throw .malformed("bad claims")
        }
        guard claims.version == 1 else { throw .malformed("unsupported version \(claims.version)") }
        claims.keyId = key.id
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        guard nowSeconds < claims.expiresAt else { throw .expired(at: claims.expiresAt) }
        guard nowSeconds + Self.allowedClockSkew >= claims.issuedAt else { throw .notYetValid(from: claims.issuedAt) }
        let secret: String
        do { secret = try key.temporarySecret(for: claims) } catch { throw .badSignature }
        return (claims, secret)
    }

    private static let alphanumerics = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    private static let random = RandomPool()

    /// `STS.` and 24 random letters and digits.
    static func newAccessKeyId() throws(CryptoError) -> String {
        let alphabet = alphanumerics
        var id: [UInt8] = []
        id.reserveCapacity(28)
        id.append(contentsOf: "STS.".utf8)
        while id.count < 28 {
            // Rejection sampling keeps every character equally likely (248 = 4 × 62).
            for byte in try random.bytes(count: 32) where byte < 248 && id.count < 28 {
                id.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: id, as: UTF8.self)
    }
}
