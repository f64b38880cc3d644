import Foundation
import TollgateCrypto
import TollgateDates

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
            for (name, value) in claims.sorted(by: { $0.key < $1.key }) { nested.add(name, value) }
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

/// Writes one flat JSON object, members in the order they are added, straight into UTF-8
/// bytes. Hand-written because the token endpoint's field order is part of its contract
/// (`JSONEncoder` promises none) and because minting is on its hot path.
public struct JSONObjectWriter {
    private var bytes: [UInt8] = []

    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// A string member (escaped per RFC 8259).
    public mutating func add(_ name: String, _ value: String) {
        member(name)
        appendQuoted(value)
    }

    /// A string member, or `null`.
    public mutating func add(_ name: String, _ value: String?) {
        if let value { add(name, value) } else { add(name, raw: "null") }
    }

    public mutating func add(_ name: String, _ value: Int64) {
        member(name)
        appendDecimal(value, to: &bytes)
    }

    public mutating func add(_ name: String, _ value: Bool) {
        add(name, raw: value ? "true" : "false")
    }

    /// A member whose value is already JSON text (a number, a nested object).
    public mutating func add(_ name: String, raw value: String) {
        member(name)
        bytes.append(contentsOf: value.utf8)
    }

    public consuming func finish() -> String {
        String(decoding: finishBytes(), as: UTF8.self)
    }

    public consuming func finishBytes() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func member(_ name: String) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Whether `utf8` holds a byte that JSON strings must escape: a control character, `"` or
    /// `\`. Checks eight bytes at a time (the token and its secret are read on every issue).
    static func needsEscaping(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        /// A high bit set in every byte of `word` that is zero (exact as a yes/no answer).
        func zeroBytes(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highs }
        var index = 0
        if let base = utf8.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= utf8.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // Bytes below 0x20, then bytes equal to `"` (0x22) or `\` (0x5c).
                let control = (word &- ones &* 0x20) & ~word & highs
                if control | zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5c)) != 0 { return true }
                index += 8
            }
        }
        while index < utf8.count {
            let byte = utf8[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
            index += 1
        }
        return false
    }

    private mutating func appendQuoted(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Fast path: nothing to escape (every token field, almost every message).
            if !Self.needsEscaping(utf8) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                              hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// Appends the decimal digits of `value` (with a leading `-` when negative).
func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes, room for the 19 digits of Int64.min
    withUnsafeMutableBytes(of: &digits) { buffer in
        var start = buffer.count
        repeat {
            start -= 1
            buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        bytes.append(contentsOf: buffer[start...])
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
        appendDecimal(claims.issuedAt, to: &identity)
        identity.append(UInt8(ascii: "\n"))
        appendDecimal(claims.expiresAt, to: &identity)
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
        var id = Array("STS.".utf8)
        id.reserveCapacity(28)
        while id.count < 28 {
            // Rejection sampling keeps every character equally likely (248 = 4 × 62).
            for byte in try random.bytes(count: 32) where byte < 248 && id.count < 28 {
                id.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: id, as: UTF8.self)
    }
}
