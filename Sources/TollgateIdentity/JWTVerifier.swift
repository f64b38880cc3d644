import Foundation
import JWTKit

/// A login token that verified: who it names and what it says.
public struct VerifiedIdentity: Sendable, Equatable {
    public var provider: String
    public var issuer: String
    public var subject: String
    public var claims: [String: JSONValue]
    public var expiresAt: Date
    /// The audience the token was accepted for.
    public var audience: String?
    /// The role the app's login webhook named, if it named one.
    public var role: String?
    /// The longest validity the webhook allows for this user's credentials.
    public var maxValiditySeconds: Int?

    /// The claims carried into the token: the provider's chosen claims (scalars) as `NAME`,
    /// `sub`, and AWS session tags as `aws:PrincipalTag/KEY`.
    public func carriedClaims(_ names: [String]) -> [String: String] {
        var carried: [String: String] = ["sub": subject]
        for name in names {
            if let text = claims[name]?.scalarText { carried[name] = text }
        }
        if case .object(let tags)? = claims[Self.sessionTagsClaim], case .object(let principal)? = tags["principal_tags"] {
            for (key, value) in principal {
                if let first = value.strings.first { carried["aws:PrincipalTag/" + key] = first }
            }
        }
        return carried
    }

    /// Where AWS puts session tags in a web identity token.
    public static let sessionTagsClaim = "https://aws.amazon.com/tags"
}

/// Verifies a provider's JWT: signature (by jwt-kit, with the one key the header's `kid` names),
/// algorithm, issuer, audience, expiry and not-before with the leeway, and the subject. Pure:
/// the keys and the time are inputs.
public enum JWTVerifier {
    /// Longer login tokens are refused before anything is decoded.
    public static let maxTokenLength = 16 * 1024

    /// The parts of the header the key choice needs, read before any signature check.
    public struct Header: Sendable, Equatable {
        public var algorithm: String
        public var keyID: String?
    }

    public static func header(of token: String) throws(IdentityError) -> Header {
        guard token.utf8.count <= maxTokenLength else { throw .invalidToken("the token is too long") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { throw .invalidToken("not a signed JWT") }
        guard let data = base64URLDecode(parts[0]),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let algorithm = object["alg"] as? String
        else { throw .invalidToken("the header is malformed") }
        guard object["crit"] == nil else { throw .invalidToken("critical header parameters are not supported") }
        let kid = object["kid"]
        guard kid == nil || kid is String else { throw .invalidToken("the header's kid is not a string") }
        return Header(algorithm: algorithm, keyID: kid as? String)
    }

    /// Verifies `token` for `provider`. `keys` is the provider's current key set (nil for a
    /// provider that only uses an HMAC secret).
    public static func verify(_ token: String, provider: ProviderSettings, keys: JWKS?, now: Date) async throws(IdentityError) -> VerifiedIdentity {
        let header = try header(of: token)
        guard let algorithm = JWTAlgorithmName(rawValue: header.algorithm) else {
            throw .invalidToken("the algorithm \"\(header.algorithm)\" is not accepted")
        }
        guard provider.algorithms.contains(algorithm) else {
            throw .invalidToken("the algorithm \(algorithm.rawValue) is not accepted for this provider")
        }
        let collection = try await keyCollection(for: header, algorithm: algorithm, provider: provider, keys: keys)
        let payload: Payload
        do {
            payload = try await collection.verify(token, as: Payload.self)
        } catch {
            throw .invalidToken("the signature does not verify")
        }
        return try checkClaims(payload.claims, provider: provider, now: now)
    }

    /// A collection holding exactly the key this token may be checked with: jwt-kit falls back
    /// to a default key for an unknown `kid`, so the choice is made here.
    static func keyCollection(for header: Header, algorithm: JWTAlgorithmName, provider: ProviderSettings,
                              keys: JWKS?) async throws(IdentityError) -> JWTKeyCollection {
        let collection = JWTKeyCollection()
        if algorithm.isHMAC {
            guard let secret = provider.hmacSecret, !secret.isEmpty else {
                throw .invalidToken("the algorithm \(algorithm.rawValue) is not accepted for this provider")
            }
            let digest: DigestAlgorithm = switch algorithm {
            case .hs384: .sha384
            case .hs512: .sha512
            default: .sha256
            }
            return await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: digest, kid: JWKIdentifier(string: "hmac"))
        }
        let candidates = keys?.keys ?? []
        let key: JWK?
        if let kid = header.keyID {
            key = candidates.first { $0.keyIdentifier?.string == kid }
        } else {
            key = candidates.count == 1 ? candidates.first : nil
        }
        guard var key else { throw .invalidToken("no key of the provider matches the token's kid") }
        guard key.keyType.rawValue == algorithm.keyType else {
            throw .invalidToken("the key \(header.keyID ?? "") is not a \(algorithm.rawValue) key")
        }
        if let keyAlgorithm = key.algorithm, keyAlgorithm.rawValue != algorithm.rawValue {
            throw .invalidToken("the key \(header.keyID ?? "") is for \(keyAlgorithm.rawValue), not \(algorithm.rawValue)")
        }
        if let curve = algorithm.curve, key.curve?.rawValue != curve {
            throw .invalidToken("the key \(header.keyID ?? "") is not on \(curve)")
        }
        key.keyIdentifier = JWKIdentifier(string: "the-key")
        key.algorithm = JWK.Algorithm(rawValue: algorithm.rawValue)
        do {
            return try await collection.add(jwk: key, isDefault: true)
        } catch {
            throw .invalidToken("the provider's key \(header.keyID ?? "") cannot be used")
        }
    }

    static func checkClaims(_ claims: [String: JSONValue], provider: ProviderSettings, now: Date) throws(IdentityError) -> VerifiedIdentity {
        guard claims["iss"] == .string(provider.issuer) else { throw .invalidToken("the issuer is not \(provider.issuer)") }
        let audiences = claims["aud"]?.strings ?? []
        guard audiences.contains(where: provider.audiences.contains) else {
            throw .invalidToken("the audience is not one this server accepts")
        }
        let leeway = TimeInterval(provider.leewaySeconds)
        guard case .number(let exp)? = claims["exp"] else { throw .invalidToken("the token has no exp") }
        guard now.timeIntervalSince1970 <= exp + leeway else { throw .expired }
        if let nbf = claims["nbf"] {
            guard case .number(let notBefore) = nbf else { throw .invalidToken("nbf is not a number") }
            guard now.timeIntervalSince1970 + leeway >= notBefore else { throw .invalidToken("the token is not valid yet") }
        }
        if case .number(let iat)? = claims["iat"], iat > now.timeIntervalSince1970 + leeway {
            throw .invalidToken("the token was issued in the future")
        }
        // A string, as RFC 7519 has `sub`: a number or a boolean is not a user's name.
        guard let subjectClaim = claims[provider.subjectClaim] else {
            throw .rejectedClaim("The token has no \(provider.subjectClaim) claim.")
        }
        guard case .string(let claimed) = subjectClaim else {
            throw .rejectedClaim("The token's \(provider.subjectClaim) claim is \(subjectClaim.kind), not a string.")
        }
        let subject = provider.subjectPrefix + claimed
        if let problem = Subject.problem(claimed) ?? Subject.problem(subject) { throw .rejectedClaim("The subject is not allowed: \(problem).") }
        return VerifiedIdentity(provider: provider.name, issuer: provider.issuer, subject: subject, claims: claims,
                                expiresAt: Date(timeIntervalSince1970: exp), audience: audiences.first(where: provider.audiences.contains))
    }

    /// Every claim of the payload; the checks are made above, with the configured leeway.
    struct Payload: JWTPayload {
        var claims: [String: JSONValue]

        init(from decoder: any Decoder) throws {
            claims = try [String: JSONValue](from: decoder)
        }

        func encode(to encoder: any Encoder) throws {
            throw EncodingError.invalidValue(claims, .init(codingPath: [], debugDescription: "verification only"))
        }

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
