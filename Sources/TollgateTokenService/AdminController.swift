import Foundation
import Hummingbird
import Logging
import NIOCore
import TollgateConfig
import TollgateCrypto
import TollgateDates
import TollgateJSON
import TollgateSignature
import TollgateToken

/// The admin endpoint on the token port: `POST /admin/revoke` with a JSON body naming exactly
/// one of `Subject`, `AccessKeyId` or `Role`. Only the root credentials may call it: the request
/// is signed with AWS Signature Version 4 by the root access key, with the service `tollgate`
/// in the credential scope and the body's SHA-256 in `x-amz-content-sha256` (botocore's
/// `S3SigV4Auth(credentials, "tollgate", region)` signs exactly that). Any other caller gets 403
/// in the token endpoint's JSON error shape.
package struct AdminController: Sendable {
    static let service = "tollgate"
    static let path: RouterPath = "/admin/revoke"
    static let maxBodyBytes = 16 * 1024

    let root: RootCredentials
    let revocations: RevocationStore
    let clock: @Sendable () -> Date

    package init(root: RootCredentials, revocations: RevocationStore, clock: @escaping @Sendable () -> Date) {
        self.root = root
        self.revocations = revocations
        self.clock = clock
    }

    package func addRoutes(to router: Router<TollgateRequestContext>) {
        router.post(Self.path, use: revoke)
    }

    @Sendable func revoke(_ request: Request, context: TollgateRequestContext) async throws -> Response {
        let verified = try authenticate(request, context: context)
        guard case .sha256(let expected) = verified.payload else {
            throw refusal(context, accessKeyId: verified.identity.accessKeyId, code: "AccessDenied",
                          message: "Admin requests must sign the SHA-256 of their body in x-amz-content-sha256")
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.maxBodyBytes {
            throw TokenEndpointError(.contentTooLarge, code: "RequestTooLarge", message: "The body is larger than \(Self.maxBodyBytes) bytes")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Self.maxBodyBytes) } catch {
            throw TokenEndpointError(.contentTooLarge, code: "RequestTooLarge", message: "The body is larger than \(Self.maxBodyBytes) bytes")
        }
        let bytes = Array(body.readableBytesView)
        guard Crypto.constantTimeEqual(try Crypto.sha256(bytes), expected) else {
            throw refusal(context, accessKeyId: verified.identity.accessKeyId, code: "XAmzContentSHA256Mismatch",
                          message: "The body does not match x-amz-content-sha256")
        }
        let (kind, value) = try Self.parseTarget(bytes)
        do { try Revocation.validate(kind: kind, value: value) } catch {
            throw TokenEndpointError(.badRequest, code: "InvalidParameterValue", message: error.description)
        }
        let entry: Revocation
        do { entry = try await revocations.record(kind, value, now: clock()) } catch {
            context.logger.error("revocation not recorded", metadata: ["revocation.error": "\(error)"])
            throw TokenEndpointError(.internalServerError, code: "InternalError", message: "The revocation could not be recorded")
        }
        context.logger.notice(
            "credentials revoked",
            metadata: [
                "revocation.type": .string(entry.kind.rawValue),
                "revocation.value": .string(entry.value),
                "revocation.revoked_at": .string(WireDate.iso8601(entry.revokedAt)),
                "admin.access_key_id": .string(verified.identity.accessKeyId),
                "client.address": .string(context.clientAddress),
            ]
        )
        return TokenJSON.response(.ok, Self.json(entry, count: revocations.list.count, maxTokenLifetime: revocations.maxTokenLifetime))
    }

    /// SigV4 over the root secret, service `tollgate`; nothing else is accepted.
    private func authenticate(_ request: Request, context: TollgateRequestContext) throws(TokenEndpointError) -> S3VerifiedRequest {
        let signed = SignatureRequest(request.head, now: clock())
        let root = self.root
        do {
            return try S3SigV4.verify(signed, service: Self.service) { (query) throws(CredentialLookupError) in
                guard query.accessKeyId == root.accessKeyID else { throw .unknownAccessKey }
                return root.accessKeySecret
            }
        } catch {
            if error == .internalError {
                throw TokenEndpointError(.internalServerError, code: "InternalError", message: "The request could not be verified")
            }
            let accessKeyId: String
            switch error {
            case .invalidAccessKeyId(let id): accessKeyId = id
            case .signatureDoesNotMatch(let mismatch): accessKeyId = mismatch.accessKeyId
            default: accessKeyId = "-"
            }
            throw refusal(context, accessKeyId: accessKeyId, code: error.code,
                          message: "Only the root credentials may call the admin endpoint: \(error.message)")
        }
    }

    private func refusal(_ context: TollgateRequestContext, accessKeyId: String, code: String, message: String) -> TokenEndpointError {
        context.logger.warning(
            "admin request refused",
            metadata: [
                "token.subject": "-",
                "token.role": "-",
                "token.access_key_id": .string(accessKeyId),
                "client.address": .string(context.clientAddress),
                "refusal.reason": .string(code),
            ]
        )
        return TokenEndpointError(.forbidden, code: code, message: message)
    }

    /// `{"Subject": "alice"}`, `{"AccessKeyId": "STS.…"}` or `{"Role": "readwrite"}`.
    static func parseTarget(_ body: [UInt8]) throws(TokenEndpointError) -> (RevocationKind, String) {
        let members: [String: String]
        do { members = try JSONDecoder().decode([String: String].self, from: Data(body)) } catch {
            throw TokenEndpointError(.badRequest, code: "InvalidParameterValue",
                                     message: "The body must be a JSON object with one string member: Subject, AccessKeyId or Role")
        }
        guard members.count == 1, case let (name, value)? = members.first, let kind = RevocationKind(rawValue: name) else {
            throw TokenEndpointError(.badRequest, code: "InvalidParameterValue",
                                     message: "The body must name exactly one of Subject, AccessKeyId or Role")
        }
        return (kind, value)
    }

    /// `{"StatusCode":200,"Type":"Subject","Value":"alice","RevokedAt":"…Z","KeptUntil":"…Z","Revocations":N}`.
    static func json(_ entry: Revocation, count: Int, maxTokenLifetime: Int64) -> String {
        var json = JSONObjectWriter()
        json.add("StatusCode", 200)
        json.add("Type", entry.kind.rawValue)
        json.add("Value", entry.value)
        json.add("RevokedAt", WireDate.iso8601(entry.revokedAt))
        json.add("KeptUntil", WireDate.iso8601(entry.prunableAt(maxTokenLifetime: maxTokenLifetime)))
        json.add("Revocations", Int64(count))
        return json.finish()
    }
}
