import Logging
import Metrics
import TollgateDates
import TollgateSignature
import TollgateToken

package extension Authenticator {
    private static let revokedCounter = Counter(label: "tollgate_gateway_revoked_requests_total")

    /// Refuses a request whose temporary credentials were revoked (`RevocationStore`). Checked
    /// after the signature, so only a holder of the secret is told, and answered as an unknown
    /// access key (S3 and OSS `InvalidAccessKeyId`, 403): the code on which SDKs' credential
    /// providers fetch new credentials. Logs one audit line.
    func refuseIfRevoked(_ identity: GatewayIdentity, dialect: Dialect, context: TollgateRequestContext) throws {
        guard let revocations, let claims = identity.claims, let revocation = revocations.match(claims) else { return }
        Self.revokedCounter.increment()
        RefusalLog.shared.log(
            context.logger, .warning, "gateway request refused", kind: "revoked", key: claims.accessKeyId,
            metadata: [
                "token.subject": .string(claims.subject ?? "-"),
                "token.role": .string(claims.role),
                "token.access_key_id": .string(claims.accessKeyId),
                "client.address": .string(context.clientAddress),
                "refusal.reason": .string("credentials revoked by \(revocation.kind.rawValue)"),
                "revocation.revoked_at": .string(WireDate.iso8601(revocation.revokedAt)),
            ]
        )
        switch dialect {
        case .s3: throw S3AuthError.invalidAccessKeyId(identity.accessKeyId)
        case .oss: throw OSSAuthError.invalidAccessKeyId(identity.accessKeyId)
        }
    }
}
