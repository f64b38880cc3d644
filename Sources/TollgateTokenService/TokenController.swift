import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore
import Synchronization
import TollgateCache
import TollgateConfig
import TollgateDates
import TollgateIdentity
import TollgatePolicy
import TollgateToken

/// The token endpoint: `GET`/`POST` on `/`, `/sts/getkey` and `/sts/getsts` answer the JSON the
/// OSS mobile SDKs parse. Without an `Authentication` section, anyone gets the default role
/// with no subject (the reference server's behaviour). With one, the caller presents a login
/// token (`Authorization: Bearer`, `?access_token=`, or `access_token` in a form or JSON POST
/// body); its verified identity decides the role and fills `${user}` and `${jwt:*}`.
///
/// `TokenRoutes` makes one for each configuration snapshot, when the first request under it
/// arrives, and answers every request with the one of the configuration in force.
package final class TokenController: Sendable {
    let tokens: TokenService
    let lifetime: Int
    let policies: [String: Policy]
    let authentication: AuthenticationSettings?
    let identities: IdentityVerifier?
    let roleMaxSessionSeconds: [String: Int]
    /// The AWS STS query API on the same port (requests with an `Action` parameter).
    let sts: STSAPI
    /// Per address and per subject (`RateLimits`).
    let rateLimits: TokenRateLimits
    /// The durable record of every issue (`token list`); nil: only the log line.
    let audit: TokenAuditLog?
    let clock: @Sendable () -> Date
    let metrics: TokenMetrics
    /// Roles vended by an upstream STS (`Upstreams`, `AssumeRoleArn`); nil: none.
    let upstreams: UpstreamVendors?
    /// Revocations in force: a revoked subject gets no new upstream credentials.
    let revocations: RevocationStore?

    init(_ snapshot: ConfigSnapshot, revocations: RevocationStore?, audit: TokenAuditLog?, clock: @escaping @Sendable () -> Date,
         metrics: TokenMetrics) {
        tokens = snapshot.tokens
        lifetime = snapshot.config.tokenExpireTime
        policies = snapshot.policies
        authentication = snapshot.config.authentication
        identities = snapshot.identities
        roleMaxSessionSeconds = snapshot.config.roleMaxSessionSeconds
        sts = STSAPI(authenticator: Authenticator(root: snapshot.root, tokens: snapshot.tokens, revocations: revocations),
                     roles: snapshot.policies)
        rateLimits = snapshot.rateLimits
        self.audit = audit
        self.clock = clock
        self.metrics = metrics
        upstreams = snapshot.upstreams
        self.revocations = revocations
    }

    /// What the caller sent: the query and body parameters, the body itself, the login token.
    struct Parameters: Sendable {
        /// Query parameters, then body parameters (form or JSON) for names the query lacks.
        var fields: [String: String] = [:]
        var body: [UInt8] = []
        /// From `Authorization: Bearer`, else the `access_token` parameter.
        var loginToken: String?
        var role: String? { fields["role"] }
        var duration: String? { fields["duration"] }

        /// The largest POST body read: a login token is at most 16 KiB, a session policy 8 KiB.
        static let maxBody = 64 * 1024

        /// A POST body larger than `maxBody`, with what was read of it.
        struct BodyTooLarge: Error {
            let prefix: [UInt8]
        }

        /// The body, at most `maxBody` bytes, else `BodyTooLarge` once it passes the limit (what
        /// was read by then tells an STS request by its `Action`).
        static func readBody(_ request: Request) async throws -> [UInt8] {
            var body: [UInt8] = []
            for try await part in request.body {
                guard body.count + part.readableBytes <= maxBody else { throw BodyTooLarge(prefix: body) }
                body += part.readableBytesView
            }
            return body
        }

        /// The answer to a body larger than `maxBody`: 413 in the STS API's XML when the request is
        /// one (its query, or what was read of its form body, names an `Action`), else in the
        /// endpoint's JSON. The rest of the body is not read: the connection ends after it.
        static func tooLarge(_ request: Request, read: [UInt8]) -> (code: String, response: Response) {
            let code = "RequestTooLarge", message = "The request body is larger than \(maxBody) bytes."
            let names = request.uri.queryParameters.map { String($0.key) }
                + URLEncodedForm.decode(String(decoding: read, as: UTF8.self)).map(\.0)
            var response = names.contains("Action")
                ? STSAPI.errorResponse(STSAPI.Failure(413, code, message), requestID: RequestID.next())
                : TokenJSON.response(.contentTooLarge, TokenJSON.error(status: 413, code: code, message: message))
            response.headers[.connection] = "close"
            return (code, response)
        }

        static func read(_ request: Request) async throws -> Parameters {
            var parameters = Parameters()
            // Most requests (a mobile SDK's GET /) have no query: skip parsing one.
            if request.head.path?.utf8.contains(UInt8(ascii: "?")) == true {
                for (key, value) in request.uri.queryParameters where parameters.fields[String(key)] == nil {
                    parameters.fields[String(key)] = String(value)
                }
            }
            if request.method == .post { parameters.body = try await readBody(request) }
            if !parameters.body.isEmpty {
                let contentType = request.headers[.contentType]?.lowercased() ?? ""
                if contentType.hasPrefix("application/json") {
                    guard let object = try? JSONSerialization.jsonObject(with: Data(parameters.body)) as? [String: Any] else {
                        throw IdentityError.validation("The POST body is not a JSON object.")
                    }
                    for (key, value) in object where parameters.fields[key] == nil {
                        if let text = value as? String { parameters.fields[key] = text }
                        else if let number = value as? NSNumber { parameters.fields[key] = number.stringValue }
                    }
                } else {
                    for (key, value) in URLEncodedForm.decode(String(decoding: parameters.body, as: UTF8.self))
                    where parameters.fields[key] == nil {
                        parameters.fields[key] = value
                    }
                }
            }
            parameters.loginToken = parameters.fields["access_token"]
            // Other schemes (the STS API's AWS4-HMAC-SHA256) are not login tokens. One field is read
            // as it is (`headers[name]` joins a copy of every field of the name, even of one).
            let fields = request.headers[values: .authorization]
            let authorization = fields.count == 1 ? fields[0] : fields.isEmpty ? nil : fields.joined(separator: ", ")
            if let authorization, let token = bearerToken(authorization) {
                parameters.loginToken = token
            }
            return parameters
        }

        /// The token of an `Authorization` value `Bearer <token>` (the scheme in any case, spaces
        /// or tabs before the token), nil for any other scheme. By bytes: splitting the value as
        /// a `String` walks it by grapheme clusters, and Foundation's trimming goes through UTF-16.
        static func bearerToken(_ value: String) -> String? {
            let scheme = "bearer".utf8
            let utf8 = value.utf8
            // `| 0x20` lowercases the scheme's letters (and maps no other byte onto one of them).
            guard utf8.count > scheme.count + 1, zip(utf8, scheme).allSatisfy({ $0 | 0x20 == $1 }),
                  utf8[utf8.index(utf8.startIndex, offsetBy: scheme.count)] == UInt8(ascii: " ") else { return nil }
            let token = utf8.dropFirst(scheme.count + 1).drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            return token.isEmpty ? nil : String(Substring(token))
        }
    }

    /// Who gets which credentials, decided before anything is signed.
    package struct Decision {
        var subject: String?
        var issuer: String?
        var role: String
        var duration: Int
        var claims: [String: String]?
        var audience: String?
    }

    func decide(loginToken: String?, role requested: String?, duration: String?, now: Date) async throws(IdentityError) -> Decision {
        guard let authentication, let identities else {
            return Decision(role: TollgateConfig.defaultRole, duration: lifetime)
        }
        guard let loginToken, !loginToken.isEmpty else {
            guard authentication.allowAnonymous else { throw .missingToken }
            return Decision(role: TollgateConfig.defaultRole, duration: try self.duration(duration, role: TollgateConfig.defaultRole))
        }
        let user = try await identities.appUser(loginToken, requested: requested, authentication: authentication, roles: policies, now: now)
        return Decision(subject: user.identity.subject, issuer: user.identity.issuer, role: user.role,
                        duration: try self.duration(duration, role: user.role, limit: user.identity.maxValiditySeconds),
                        claims: user.claims, audience: user.identity.audience)
    }

    /// The lifetime: the requested duration, bounded by the role's maximum; without a request,
    /// `TokenExpireTime` (or the role's maximum, when that is shorter).
    /// `limit` is the login webhook's `maxValiditySeconds`, which may be shorter than any role's.
    func duration(_ requested: String?, role: String, limit: Int? = nil) throws(IdentityError) -> Int {
        let maximum = min(roleMaxSessionSeconds[role] ?? TollgateConfig.maximumTokenLifetime, limit ?? .max)
        let minimum = min(TollgateConfig.minimumTokenLifetime, maximum)
        guard let requested else { return min(lifetime, maximum) }
        guard let seconds = Int(requested), seconds >= minimum, seconds <= maximum else {
            throw .validation("The requested duration must be \(minimum) to \(maximum) seconds for the role \(role).")
        }
        return seconds
    }

    @Sendable func issue(_ request: Request, context: TollgateRequestContext) async throws -> Response {
        let now = clock()
        let decision: Decision
        do {
            let parameters: Parameters
            do { parameters = try await Parameters.read(request) } catch let error as Parameters.BodyTooLarge {
                let (code, response) = Parameters.tooLarge(request, read: error.prefix)
                metrics.refusals[code].increment()
                RefusalLog.shared.log(context.logger, .info, "token refused", kind: code, key: context.clientAddress, now: now, metadata: [
                    "token.refusal": .string(code), "client.address": .string(context.clientAddress),
                ])
                return response
            }
            if let action = parameters.fields["Action"] {
                return await sts.handle(action: action, parameters: parameters, request: request, context: context, controller: self)
            }
            // A flood from one address costs a lookup, not a signature check.
            try rateLimits.admit(address: context.clientAddress, now: now, logger: context.logger)
            decision = try await decide(loginToken: parameters.loginToken, role: parameters.role, duration: parameters.duration, now: now)
            if let subject = decision.subject {
                try rateLimits.admit(subject: subject, address: context.clientAddress, now: now, logger: context.logger)
            }
        } catch let error as IdentityError {
            metrics.refusals[error.code].increment()
            RefusalLog.shared.log(context.logger, .info, "token refused", kind: error.code, key: context.clientAddress, now: now, metadata: [
                "token.refusal": .string(error.code), "token.reason": .string(error.message),
                "client.address": .string(context.clientAddress),
            ])
            // The stock Android provider drops the body of any status >= 400; `errors=inline` asks
            // for HTTP 200 with the real status in StatusCode, which it (and iOS) then reports.
            let inline = request.uri.queryParameters["errors"] == "inline"
            let status = HTTPResponse.Status(code: error.httpStatus)
            let body = TokenJSON.error(status: status.code, code: error.code, message: error.message)
            var response = TokenJSON.response(inline ? .ok : status, body)
            if error.httpStatus == 401 { response.headers[.wwwAuthenticate] = #"Bearer realm="tollgate""# }
            return response
        }
        guard policies[decision.role] != nil else {
            throw TokenEndpointError(.serviceUnavailable, code: "PolicyUnavailable", message: "The role policy is not loaded")
        }
        if let route = upstreams?.route(decision.role) {
            return await vendUpstream(route, decision, inline: request.uri.queryParameters["errors"] == "inline", context: context, now: now)
        }
        let issued = try tokens.issue(subject: decision.subject, role: decision.role, claims: decision.claims,
                                      duration: Int64(decision.duration), now: now)
        let expiration = WireDate.iso8601(issued.claims.expiresAt)
        logIssued(issued, issuer: decision.issuer, expiration: expiration, context: context, via: "json")
        return TokenJSON.response(.ok, TokenJSON.credentials(issued, expiration: expiration))
    }

    /// The record of every issue in the audit file, the `token issued` log line (never a token
    /// or a secret), and the counter by role.
    func logIssued(_ issued: IssuedCredentials, issuer: String?, expiration: String? = nil, context: TollgateRequestContext, via: String) {
        let expiration = expiration ?? WireDate.iso8601(issued.claims.expiresAt)
        let clientAddress = context.clientAddress
        context.logger.log(
            level: issuedLogLevel,
            "token issued",
            metadata: [
                "token.subject": .string(issued.claims.subject ?? "-"),
                "token.issuer": .string(issuer ?? "-"),
                "token.role": .string(issued.claims.role),
                "token.access_key_id": .string(issued.accessKeyId),
                "token.expiration": .string(expiration),
                "token.via": .string(via),
                "client.address": .string(clientAddress),
            ]
        )
        audit?.record(TokenAuditEntry(
            time: WireDate.iso8601(issued.claims.issuedAt), subject: issued.claims.subject, issuer: issuer, role: issued.claims.role,
            accessKeyId: issued.accessKeyId, expiration: expiration, via: via, clientAddress: clientAddress
        ))
        metrics.issued[issued.claims.role].increment()
    }

    /// The level of the `token issued` line: the audit file records every issue, so the line only
    /// repeats it, at `debug` (issuing is the hot path, and the line cost more than minting);
    /// without an audit file (tests, embedders) it is the record, at `info`.
    var issuedLogLevel: Logger.Level { audit == nil ? .info : .debug }

    /// POSTs the presented token to the app's login webhook.
    static func post(_ url: String, _ body: [UInt8], _ timeoutMilliseconds: Int) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let deadline = NIODeadline.now() + .milliseconds(Int64(timeoutMilliseconds))
        let response = try await HTTPClient.shared.execute(request, deadline: deadline)
        let answer = try await response.body.collect(upTo: 64 * 1024)
        return (Int(response.status.code), Array(buffer: answer))
    }

    /// Fetches a provider's JWKS or discovery document (at most 1 MiB, 5 s).
    static func fetch(_ url: String) async throws -> [UInt8] {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(5))
        guard response.status == .ok else { throw IdentityError.communication("\(url) answered \(response.status.code)") }
        let body = try await response.body.collect(upTo: JWKSCache.maxDocumentBytes)
        return Array(buffer: body)
    }
}

/// The token endpoint's routes. Each request is answered by the `TokenController` of the
/// configuration in force when it arrives, read once; a controller is made once per snapshot.
package struct TokenRoutes: Sendable {
    static let paths: [RouterPath] = ["/", "/sts/getkey", "/sts/getsts"]

    let live: LiveConfig
    let revocations: RevocationStore?
    let audit: TokenAuditLog?
    let clock: @Sendable () -> Date
    let metrics = TokenMetrics()
    /// The controller of the latest snapshot a request arrived under.
    private let latest = Latest()

    package init(live: LiveConfig, revocations: RevocationStore?, audit: TokenAuditLog?, clock: @escaping @Sendable () -> Date) {
        self.live = live
        self.revocations = revocations
        self.audit = audit
        self.clock = clock
    }

    final class Latest: Sendable {
        let controller = Mutex<(snapshot: ConfigSnapshot, controller: TokenController)?>(nil)
    }

    package func addRoutes(to router: Router<TollgateRequestContext>) {
        for path in Self.paths {
            router.get(path, use: issue)
            router.post(path, use: issue)
        }
    }

    @Sendable func issue(_ request: Request, context: TollgateRequestContext) async throws -> Response {
        try await controller(for: live.current).issue(request, context: context)
    }

    /// The controller of `snapshot`, made when the first request under it arrives.
    func controller(for snapshot: ConfigSnapshot) -> TokenController {
        latest.controller.withLock { cached in
            if let cached, cached.snapshot === snapshot { return cached.controller }
            let controller = TokenController(snapshot, revocations: revocations, audit: audit, clock: clock, metrics: metrics)
            cached = (snapshot, controller)
            return controller
        }
    }
}

/// The token endpoint's counters, made once per label and shared by every request.
package final class TokenMetrics: Sendable {
    /// `tollgate_tokens_issued_total{role=…}`.
    let issued = InstrumentCache<String, Counter> { role in
        Counter(label: "tollgate_tokens_issued_total", dimensions: [("role", role)])
    }
    /// `tollgate_token_refusals_total{code=…}`: requests refused with an identity error (the
    /// fixed set of `IdentityError` codes: missing or invalid login token, rejected claim, …).
    let refusals = InstrumentCache<String, Counter> { code in
        Counter(label: "tollgate_token_refusals_total", dimensions: [("code", code)])
    }
}

/// `application/x-www-form-urlencoded` pairs, `+` as space.
package enum URLEncodedForm {
    static func decode(_ text: String) -> [(String, String)] {
        text.split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ part: Substring) -> String? { part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decoded(parts[0]) else { return nil }
            return (name, parts.count > 1 ? decoded(parts[1]) ?? "" : "")
        }
    }
}
