import Foundation
import TollgateConfig
import TollgateCrypto
import TollgatePolicy
import TollgateSignature
import TollgateToken

/// Who a verified request is, and what it may do.
package struct GatewayIdentity: Sendable {
    package let accessKeyId: String
    /// The root credentials from config.json: full access, no policy.
    package let isRoot: Bool
    /// The verified token's claims, for temporary credentials.
    package let claims: TokenClaims?
    /// The S3 verification result (payload mode, checksums), nil for OSS requests.
    package let s3: S3VerifiedRequest?
    /// OSS: the body's SHA-256 from a signed `x-oss-content-sha256` (nil when absent or
    /// `UNSIGNED-PAYLOAD`), checked against the body as it streams.
    package var ossContentSHA256: [UInt8]? = nil

    package init(accessKeyId: String, isRoot: Bool, claims: TokenClaims?, s3: S3VerifiedRequest?, ossContentSHA256: [UInt8]? = nil) {
        self.accessKeyId = accessKeyId
        self.isRoot = isRoot
        self.claims = claims
        self.s3 = s3
        self.ossContentSHA256 = ossContentSHA256
    }
}

/// Authenticates gateway requests: the signature (S3 SigV4 or OSS V1/V4) over a secret that is
/// either the root secret or one re-derived from the request's security token.
package struct Authenticator: Sendable {
    let root: RootCredentials
    let tokens: TokenService
    /// Revoked credentials are refused (see `refuseIfRevoked`); nil: none are.
    var revocations: RevocationStore? = nil

    package init(root: RootCredentials, tokens: TokenService, revocations: RevocationStore? = nil) {
        self.root = root
        self.tokens = tokens
        self.revocations = revocations
    }

    /// The secret lookup the signature verifiers call. It verifies the security token first, so
    /// a temporary key is usable only together with its own, valid, token.
    private func lookup(_ query: CredentialQuery, now: Date, claims: inout TokenClaims?) throws(CredentialLookupError) -> String {
        if query.accessKeyId == root.accessKeyID {
            return root.accessKeySecret
        }
        guard query.accessKeyId.hasPrefix("STS.") else { throw .unknownAccessKey }
        guard let token = query.securityToken, !token.isEmpty else { throw .missingSecurityToken }
        do {
            let verified = try tokens.verify(token, now: now)
            guard Crypto.constantTimeEqual(verified.claims.accessKeyId, query.accessKeyId) else { throw CredentialLookupError.invalidSecurityToken }
            claims = verified.claims
            return verified.secret
        } catch TokenError.expired {
            throw .expiredSecurityToken
        } catch {
            throw .invalidSecurityToken
        }
    }

    package func authenticateS3(_ request: SignatureRequest) throws(S3AuthError) -> GatewayIdentity {
        var claims: TokenClaims?
        let verified = try S3SigV4.verify(request) { (query) throws(CredentialLookupError) in
            try lookup(query, now: request.now, claims: &claims)
        }
        let accessKeyId = verified.identity.accessKeyId
        return GatewayIdentity(accessKeyId: accessKeyId, isRoot: claims == nil, claims: claims, s3: verified)
    }

    /// An S3 request signed with Signature Version 2 (`authPath`: the path with its bucket).
    package func authenticateS3V2(_ request: SignatureRequest, authPath: String, bucketLevel: Bool) throws(S3AuthError) -> GatewayIdentity {
        var claims: TokenClaims?
        let verified = try S3SigV2.verify(request, authPath: authPath, bucketLevel: bucketLevel) { (query) throws(CredentialLookupError) in
            try lookup(query, now: request.now, claims: &claims)
        }
        return GatewayIdentity(accessKeyId: verified.identity.accessKeyId, isRoot: claims == nil, claims: claims, s3: verified)
    }

    /// A request to another SigV4 service on this server (`sts`), whose body the caller hashed.
    func authenticate(_ request: SignatureRequest, service: String, bodySHA256: String) throws(S3AuthError) -> GatewayIdentity {
        var claims: TokenClaims?
        let verified = try S3SigV4.verify(request, service: service, bodySHA256: bodySHA256) { (query) throws(CredentialLookupError) in
            try lookup(query, now: request.now, claims: &claims)
        }
        return GatewayIdentity(accessKeyId: verified.identity.accessKeyId, isRoot: claims == nil, claims: claims, s3: verified)
    }

    package func authenticateOSS(_ request: SignatureRequest, bucket: String?, key: String?) throws(OSSAuthError) -> GatewayIdentity {
        var claims: TokenClaims?
        let identity = try OSSSignature.verify(request, bucket: bucket, key: key) { (query) throws(CredentialLookupError) in
            try lookup(query, now: request.now, claims: &claims)
        }
        return GatewayIdentity(accessKeyId: identity.accessKeyId, isRoot: claims == nil, claims: claims, s3: nil,
                               ossContentSHA256: try Self.ossContentSHA256(request))
    }

    /// `x-oss-content-sha256`, which OSS V4 signs (as V1 signs every `x-oss-*` header): either
    /// `UNSIGNED-PAYLOAD` or the hex SHA-256 of the body, which is then verified; anything else
    /// is refused, so a signed claim about the body is never silently ignored.
    static func ossContentSHA256(_ request: SignatureRequest) throws(OSSAuthError) -> [UInt8]? {
        guard let value = request.headers["x-oss-content-sha256"]?.trimmingCharacters(in: .whitespaces),
              value != "UNSIGNED-PAYLOAD" else { return nil }
        guard value.utf8.count == 64, let digest = Hex.decode(value) else {
            throw .invalidArgument(message: "x-oss-content-sha256 must be UNSIGNED-PAYLOAD or the hex SHA-256 of the body.",
                                   name: "x-oss-content-sha256", value: value)
        }
        return digest
    }
}

/// Which protocol a gateway request speaks; errors and headers answer in the same one.
package enum Dialect: Sendable {
    case s3, oss
}
