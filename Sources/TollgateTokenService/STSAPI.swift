import Foundation
import Hummingbird
import TollgateConfig
import TollgateCrypto
import TollgateDates
import TollgateIdentity
import TollgatePolicy
import TollgateSignature
import TollgateXML
import TollgateToken

/// The AWS STS query API on the token port, for AWS SDKs and back-end services:
///
/// - `AssumeRoleWithWebIdentity` (unsigned: the login token is the authentication), decided
///   exactly like the JSON endpoint (providers, role rules, durations);
/// - `AssumeRole`, SigV4-signed (service `sts`) with the root credentials;
/// - `GetCallerIdentity`, SigV4-signed with any credentials the gateway accepts.
///
/// `RoleArn` is any ARN ending in `:role/NAME`, naming the Tollgate role NAME. An inline
/// `Policy` becomes the session policy, intersected with the role's. Answers are AWS's XML,
/// with AWS's element names, namespace and error codes.
package struct STSAPI: Sendable {
    static let namespace = "https://sts.amazonaws.com/doc/2011-06-15/"
    static let account = "000000000000"
    static let service = "sts"
    /// AWS limits packed session policies to about 2 KiB; this is generous and still bounded.
    static let maxSessionPolicy = 8 * 1024

    let authenticator: Authenticator
    /// The configured roles, by name.
    let roles: [String: Policy]

    /// An STS error: HTTP status, AWS code, message.
    struct Failure: Error {
        var status: Int
        var code: String
        var message: String

        init(_ status: Int, _ code: String, _ message: String) {
            self.status = status
            self.code = code
            self.message = message
        }

        init(_ error: IdentityError) {
            // STS answers a role its rules deny, and a missing token, with these codes.
            switch error {
            case .roleDenied(let message): self.init(403, "AccessDenied", message)
            case .missingToken: self.init(400, "ValidationError", "WebIdentityToken is required.")
            default: self.init(error.httpStatus == 401 ? 400 : error.httpStatus, error.code, error.message)
            }
        }
    }

    func handle(action: String, parameters: TokenController.Parameters, request: Request, context: TollgateRequestContext,
                controller: TokenController) async -> Response {
        let requestID = RequestID.next()
        do {
            do {
                try controller.rateLimits.admit(address: context.clientAddress, now: controller.clock(), logger: context.logger)
            } catch {
                throw Failure(429, "Throttling", "Rate exceeded")
            }
            guard parameters.fields["Version"].map({ $0 == "2011-06-15" }) ?? true else {
                throw Failure(400, "InvalidParameterValue", "Version must be 2011-06-15.")
            }
            switch action {
            case "AssumeRoleWithWebIdentity":
                return try await assumeRoleWithWebIdentity(parameters, context: context, controller: controller, requestID: requestID)
            case "AssumeRole":
                return try await assumeRole(parameters, request: request, context: context, controller: controller, requestID: requestID)
            case "GetCallerIdentity":
                return try getCallerIdentity(parameters, request: request, context: context, now: controller.clock(), requestID: requestID)
            default:
                throw Failure(400, "InvalidAction", "Could not find operation \(action) for version 2011-06-15.")
            }
        } catch {
            let failure = (error as? Failure) ?? (error as? IdentityError).map(Failure.init)
                ?? Failure(500, "InternalFailure", "The request could not be processed.")
            controller.metrics.refusals[failure.code].increment()
            RefusalLog.shared.log(context.logger, .info, "sts request refused", kind: "sts " + failure.code, key: context.clientAddress,
                                  now: controller.clock(), metadata: [
                "sts.action": .string(action), "token.refusal": .string(failure.code), "token.reason": .string(failure.message),
                "client.address": .string(context.clientAddress),
            ])
            return Self.errorResponse(failure, requestID: requestID)
        }
    }

    // MARK: Actions

    func assumeRoleWithWebIdentity(_ parameters: TokenController.Parameters, context: TollgateRequestContext,
                                   controller: TokenController, requestID: String) async throws -> Response {
        guard controller.authentication != nil else {
            throw Failure(400, "InvalidIdentityToken", "This server has no identity providers configured (no Authentication section).")
        }
        guard let webIdentityToken = parameters.fields["WebIdentityToken"], !webIdentityToken.isEmpty else {
            throw Failure(400, "ValidationError", "WebIdentityToken is required.")
        }
        let role = try Self.roleName(parameters.fields["RoleArn"], known: roles)
        let sessionName = try Self.sessionName(parameters.fields["RoleSessionName"])
        let sessionPolicy = try Self.sessionPolicy(parameters.fields["Policy"])
        let now = controller.clock()
        let decision = try await controller.decide(loginToken: webIdentityToken, role: role,
                                                   duration: parameters.fields["DurationSeconds"], now: now)
        if let subject = decision.subject {
            do {
                try controller.rateLimits.admit(subject: subject, address: context.clientAddress, now: now, logger: context.logger)
            } catch {
                throw Failure(429, "Throttling", "Rate exceeded")
            }
        }
        if let route = controller.upstreams?.route(decision.role) {
            return try await upstreamWebIdentity(route, decision, sessionPolicy: sessionPolicy, context: context, controller: controller,
                                                 now: now, requestID: requestID)
        }
        let issued = try controller.tokens.issue(subject: decision.subject, role: decision.role, sessionName: sessionName,
                                                 sessionPolicy: sessionPolicy, claims: decision.claims,
                                                 duration: Int64(decision.duration), now: now)
        controller.logIssued(issued, issuer: decision.issuer, context: context, via: "AssumeRoleWithWebIdentity")
        var xml = Self.document("AssumeRoleWithWebIdentityResponse")
        xml.element("AssumeRoleWithWebIdentityResult") { result in
            result.element("SubjectFromWebIdentityToken", decision.subject ?? "")
            result.element("Audience", decision.audience)
            Self.assumedRoleUser(&result, role: decision.role, session: sessionName)
            Self.credentials(&result, issued)
            result.element("Provider", decision.issuer)
        }
        return Self.finish(xml, requestID: requestID)
    }

    /// `AssumeRoleWithWebIdentity` for a role an upstream STS vends: the upstream's credentials,
    /// exactly as the JSON endpoint gets them (the session name and policy Tollgate renders for
    /// the caller, reuse, revocation), in STS's XML. The upstream's own `AssumedRoleUser` is not
    /// known here and is left out; an inline `Policy` is refused (the rendered role policy is
    /// the session policy the upstream receives).
    func upstreamWebIdentity(_ route: (role: UpstreamRole, vendor: UpstreamVendor), _ decision: TokenController.Decision,
                             sessionPolicy: String?, context: TollgateRequestContext, controller: TokenController, now: Date,
                             requestID: String) async throws -> Response {
        guard sessionPolicy == nil else {
            throw Failure(400, "ValidationError",
                          "The role \(decision.role) is vended by the upstream STS \(route.role.upstream), which receives the role's own policy: Policy is not accepted.")
        }
        switch await controller.upstreamCredentials(route, decision, context: context, now: now, via: "AssumeRoleWithWebIdentity") {
        case .refused(let status, let code, let message, _):
            throw Failure(status, code, message)
        case .vended(let credentials, _):
            var xml = Self.document("AssumeRoleWithWebIdentityResponse")
            xml.element("AssumeRoleWithWebIdentityResult") { result in
                result.element("SubjectFromWebIdentityToken", decision.subject ?? "")
                result.element("Audience", decision.audience)
                result.element("Credentials") { element in
                    element.element("AccessKeyId", credentials.accessKeyId)
                    element.element("SecretAccessKey", credentials.accessKeySecret)
                    element.element("SessionToken", credentials.securityToken)
                    element.element("Expiration", WireDate.iso8601(credentials.expiration))
                }
                result.element("Provider", decision.issuer)
            }
            return Self.finish(xml, requestID: requestID)
        }
    }

    func assumeRole(_ parameters: TokenController.Parameters, request: Request, context: TollgateRequestContext,
                    controller: TokenController, requestID: String) async throws -> Response {
        let now = controller.clock()
        let caller = try authenticate(request, body: parameters.body, context: context, now: now)
        guard caller.isRoot else {
            throw Failure(403, "AccessDenied", "Only the root credentials may call AssumeRole.")
        }
        let role = try Self.roleName(parameters.fields["RoleArn"], known: roles)
        try Self.refuseUpstreamRole(role, controller: controller)
        let sessionName = try Self.sessionName(parameters.fields["RoleSessionName"])
        let sessionPolicy = try Self.sessionPolicy(parameters.fields["Policy"])
        let duration = try controller.duration(parameters.fields["DurationSeconds"], role: role)
        let issued = try controller.tokens.issue(subject: nil, role: role, sessionName: sessionName, sessionPolicy: sessionPolicy,
                                                 duration: Int64(duration), now: now)
        controller.logIssued(issued, issuer: nil, context: context, via: "AssumeRole")
        var xml = Self.document("AssumeRoleResponse")
        xml.element("AssumeRoleResult") { result in
            Self.assumedRoleUser(&result, role: role, session: sessionName)
            Self.credentials(&result, issued)
        }
        return Self.finish(xml, requestID: requestID)
    }

    func getCallerIdentity(_ parameters: TokenController.Parameters, request: Request, context: TollgateRequestContext,
                           now: Date, requestID: String) throws -> Response {
        let caller = try authenticate(request, body: parameters.body, context: context, now: now)
        var xml = Self.document("GetCallerIdentityResponse")
        xml.element("GetCallerIdentityResult") { result in
            if let claims = caller.claims {
                result.element("Arn", "arn:aws:sts::\(Self.account):assumed-role/\(claims.role)/\(claims.sessionName)")
                result.element("UserId", "\(Self.roleID(claims.role)):\(claims.sessionName)")
            } else {
                result.element("Arn", "arn:aws:iam::\(Self.account):root")
                result.element("UserId", Self.account)
            }
            result.element("Account", Self.account)
        }
        return Self.finish(xml, requestID: requestID)
    }

    /// SigV4 for service `sts`, with the root secret or a vended credential's re-derived one.
    func authenticate(_ request: Request, body: [UInt8], context: TollgateRequestContext, now: Date) throws -> GatewayIdentity {
        let signed = SignatureRequest(request.head, now: now)
        let bodyHash: String
        do { bodyHash = Hex.encode(try Crypto.sha256(body)) } catch { throw Failure(500, "InternalFailure", "The request could not be processed.") }
        do {
            let identity = try authenticator.authenticate(signed, service: Self.service, bodySHA256: bodyHash)
            try authenticator.refuseIfRevoked(identity, dialect: .s3, context: context)
            return identity
        } catch let error as S3AuthError {
            switch error.code {
            case "InvalidAccessKeyId", "InvalidToken": throw Failure(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
            case "ExpiredToken": throw Failure(400, "ExpiredToken", "The security token included in the request is expired.")
            case "RequestTimeTooSkewed": throw Failure(400, "RequestExpired", error.message)
            default: throw Failure(error.httpStatus, error.code, error.message)
            }
        }
    }

    // MARK: Parameters

    /// `arn:…:role/NAME` → NAME, which must be a configured role.
    static func roleName(_ arn: String?, known: [String: Policy]) throws(Failure) -> String {
        guard let arn, !arn.isEmpty else { throw Failure(400, "ValidationError", "RoleArn is required.") }
        guard arn.hasPrefix("arn:"), let range = arn.range(of: ":role/", options: .backwards) else {
            throw Failure(400, "ValidationError", "RoleArn must be an ARN ending in :role/NAME.")
        }
        let name = String(arn[range.upperBound...].split(separator: "/").last ?? "")
        guard known[name] != nil else { throw Failure(403, "AccessDenied", "No role named \(name) is configured.") }
        return name
    }

    /// `AssumeRole` (root credentials, no app user) has no caller to render a role policy for:
    /// a role an upstream STS vends is refused there.
    static func refuseUpstreamRole(_ role: String, controller: TokenController) throws(Failure) {
        guard let route = controller.upstreams?.route(role) else { return }
        throw Failure(400, "ValidationError",
                      "The role \(role) is vended by the upstream STS \(route.role.upstream): ask for it with AssumeRoleWithWebIdentity or the token endpoint (GET /).")
    }

    /// RoleSessionName: 2 to 64 of `[\w+=,.@-]`, as AWS requires.
    static func sessionName(_ value: String?) throws(Failure) -> String {
        guard let value else { throw Failure(400, "ValidationError", "RoleSessionName is required.") }
        let allowed = value.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "_+=,.@-".unicodeScalars.contains(scalar))
        }
        guard (2...64).contains(value.count), allowed else {
            throw Failure(400, "ValidationError", "RoleSessionName must be 2 to 64 characters of letters, digits and _+=,.@-")
        }
        return value
    }

    /// The inline `Policy`, validated by the policy engine; it can only narrow the role.
    static func sessionPolicy(_ text: String?) throws(Failure) -> String? {
        guard let text, !text.isEmpty else { return nil }
        guard text.utf8.count <= maxSessionPolicy else {
            throw Failure(400, "PackedPolicyTooLarge", "The session policy is larger than \(maxSessionPolicy) bytes.")
        }
        do {
            _ = try Policy.load(text: text, file: "Policy", variables: [:])
        } catch {
            throw Failure(400, "MalformedPolicyDocument", error.diagnostics.map(\.description).joined(separator: "; "))
        }
        return text
    }

    // MARK: Rendering

    static func roleID(_ role: String) -> String {
        "AROA" + String(role.uppercased().unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
            .map(Character.init).prefix(17))
    }

    static func document(_ root: String) -> XMLWriter {
        var xml = XMLWriter()
        xml.start(root, namespace: namespace)
        return xml
    }

    static func assumedRoleUser(_ xml: inout XMLWriter, role: String, session: String) {
        xml.element("AssumedRoleUser") { user in
            user.element("Arn", "arn:aws:sts::\(account):assumed-role/\(role)/\(session)")
            user.element("AssumedRoleId", "\(roleID(role)):\(session)")
        }
    }

    static func credentials(_ xml: inout XMLWriter, _ issued: IssuedCredentials) {
        xml.element("Credentials") { credentials in
            credentials.element("AccessKeyId", issued.accessKeyId)
            credentials.element("SecretAccessKey", issued.accessKeySecret)
            credentials.element("SessionToken", issued.securityToken)
            credentials.element("Expiration", WireDate.iso8601(issued.claims.expiresAt))
        }
    }

    static func finish(_ xml: XMLWriter, requestID: String) -> Response {
        var xml = xml
        xml.element("ResponseMetadata") { $0.element("RequestId", requestID) }
        xml.endAll()
        return Response(status: .ok, headers: [.contentType: "text/xml", .cacheControl: "no-store"],
                        body: .init(byteBuffer: xml.buffer))
    }

    static func errorResponse(_ failure: Failure, requestID: String) -> Response {
        var xml = document("ErrorResponse")
        xml.element("Error") { error in
            error.element("Type", failure.status >= 500 ? "Receiver" : "Sender")
            error.element("Code", failure.code)
            error.element("Message", failure.message)
        }
        xml.element("RequestId", requestID)
        xml.endAll()
        var headers: HTTPFields = [.contentType: "text/xml", .cacheControl: "no-store"]
        if failure.code == "Throttling" { headers[.retryAfter] = "1" }
        return Response(status: HTTPResponse.Status(code: failure.status), headers: headers,
                        body: .init(byteBuffer: xml.buffer))
    }
}
