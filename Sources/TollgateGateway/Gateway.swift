import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import TollgateCORS
import TollgateCache
import TollgateConfig
import TollgateCrypto
import TollgateHTTP
import TollgatePolicy
import TollgateSignature
import TollgateStore
import TollgateToken
import TollgateTokenService

/// The object gateway: every request is routed, authenticated, authorized, and only then
/// handed to the handler for its operation. S3 and OSS requests share all of it; only the
/// signature check and the rendering differ.
package struct Gateway: HTTPResponder, Sendable {
    package typealias Context = TollgateRequestContext

    let store: any ObjectStore
    /// What the store can do, read once (handlers consult it instead of assuming).
    let capabilities: StoreCapabilities
    /// The configuration in force: each request reads it once, when it arrives.
    let live: LiveConfig
    /// Revoked credentials are refused; nil: none are.
    let revocations: RevocationStore?
    /// The gateway listener speaks TLS.
    let tls: Bool
    /// Connections are plain TCP: file-backed bodies go out with sendfile (`HTTP1Codec.SendFile`).
    let sendsFiles: Bool
    /// Writes to keys inside a mobile collection go through its change feed; nil: none kept.
    var changes: ChangeFeed? = nil
    let clock: @Sendable () -> Date
    let metrics = GatewayMetrics()
    /// GETs the fast path fetched and handed on to the responder, by connection (`FromStore.stream`).
    let prefetched = PrefetchedReads()

    package init(store: any ObjectStore, capabilities: StoreCapabilities, live: LiveConfig, revocations: RevocationStore?, tls: Bool,
                 sendsFiles: Bool, changes: ChangeFeed? = nil, clock: @escaping @Sendable () -> Date) {
        self.store = store
        self.capabilities = capabilities
        self.live = live
        self.revocations = revocations
        self.tls = tls
        self.sendsFiles = sendsFiles
        self.changes = changes
        self.clock = clock
    }
    /// Both listeners' `Server` header.
    package static let serverName = "tollgate"

    /// A routed, authenticated and authorized request: what every handler receives.
    struct Call: Sendable {
        let head: HTTPRequest
        /// The request's body, not yet read (empty for a request answered at once).
        let body: RequestBody
        let route: GatewayRoute
        let identity: GatewayIdentity
        /// What the token's role (and session policy) allows; nil for the root credentials.
        let policy: EffectivePolicy?
        let dialect: Dialect
        /// Decoded query parameters (first value of each name).
        let query: [String: String]
        let requestID: String
        /// The client's IP address, for `aws:SourceIp`.
        let sourceIP: String?
        /// The client's address as logs write it.
        var clientAddress: String { sourceIP ?? "-" }
        /// `aws:SecureTransport`.
        let secureTransport: Bool
        let baseLogger: Logger
        /// The connection, for `HTTP1Codec.SendFile`.
        let channel: any Channel
        /// The request's logger, with its id and access key (built only when something is logged).
        var logger: Logger {
            var logger = baseLogger
            logger[metadataKey: "gateway.request_id"] = "\(requestID)"
            logger[metadataKey: "gateway.access_key_id"] = "\(identity.accessKeyId)"
            return logger
        }
        var headers: HTTPFields { head.headerFields }
        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { head.headerFields[$0] } }
        /// The read the fast path already fetched for this request, if it handed it on with one.
        var prefetched: ObjectRead? = nil
        var metadataPrefix: String { dialect == .s3 ? "x-amz-meta-" : "x-oss-meta-" }
    }

    /// CORS first (see `CORS.swift`): a preflight `OPTIONS` is answered from the rules alone,
    /// before and without authentication, and returns nothing stored; every other answer, error
    /// or not, carries the headers of the rule that admits its `Origin`. The rules are the
    /// addressed bucket's own (PutBucketCors), else config.json's default for every bucket.
    package func respond(to request: Request, context: Context) async throws -> Response {
        let config = live.current.config
        if request.method == .options { return await preflight(request, config: config, context: context) }
        var response = try await answer(request, context: context)
        // Without the rules (the store failed) the answer goes without CORS headers, and the
        // browser keeps it from the page.
        if let origin = request.headers[.origin],
           let rule = try? await corsRules(request, config: config).first(admitting: origin, method: request.method.rawValue) {
            response.headers[.accessControlAllowOrigin] = rule.allowOrigin(for: origin)
            response.headers[.accessControlExposeHeaders] = (CORSSettings.exposedByDefault + rule.exposeHeaders).joined(separator: ", ")
            response.headers.append(HTTPField(name: .vary, value: "Origin"))
        }
        return response
    }

    /// The CORS rules for the bucket `request` addresses (virtual-hosted or path-style, as any
    /// request): its own when it has any, else config.json's `CORS.Gateway`. The store keeps
    /// every bucket's rules in memory, so this reads nothing from disk after the first time.
    func corsRules(_ request: Request, config: TollgateConfig) async throws -> [CORSRule] {
        let rawPath = RequestTarget.split(request.head.path ?? "/").path
        guard let bucket = try? Self.address(host: request.head.authority, rawPath: rawPath, baseDomain: config.gatewayBaseDomain).bucket else {
            return config.cors.gateway
        }
        return try await store.bucketCORS(bucket)?.rules ?? config.cors.gateway
    }

    /// A CORS preflight, as S3 answers it: 200 with the rule's grants, or 403 AccessForbidden.
    func preflight(_ request: Request, config: TollgateConfig, context: Context) async -> Response {
        let origin = request.headers[.origin] ?? ""
        let method = request.headers[.accessControlRequestMethod] ?? ""
        let requested = CORSSettings.requestedHeaders(request.headers[.accessControlRequestHeaders])
        let rules: [CORSRule]
        do { rules = try await corsRules(request, config: config) } catch {
            context.logger.error("gateway preflight failed", metadata: ["error": "\(error)"])
            return GatewayError.internalError().response(dialect: .s3, requestID: RequestID.next(), resource: request.uri.path, isHead: false)
        }
        guard !origin.isEmpty, let rule = rules.first(admitting: origin, method: method, requestHeaders: requested) else {
            let message = rules.isEmpty
                ? "CORSResponse: CORS is not enabled for this bucket."
                : "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."
            return GatewayError(.forbidden, "AccessForbidden", message, details: [("Method", method)])
                .response(dialect: .s3, requestID: RequestID.next(), resource: request.uri.path, isHead: false)
        }
        var headers: HTTPFields = [
            .accessControlAllowOrigin: rule.allowOrigin(for: origin),
            .accessControlAllowMethods: rule.allowedMethods.joined(separator: ", "),
            .vary: "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
            .contentLength: "0",
        ]
        if !requested.isEmpty { headers[.accessControlAllowHeaders] = requested.joined(separator: ", ") }
        headers[.accessControlExposeHeaders] = (CORSSettings.exposedByDefault + rule.exposeHeaders).joined(separator: ", ")
        if let maxAge = rule.maxAgeSeconds { headers[.accessControlMaxAge] = String(maxAge) }
        return Response(status: .ok, headers: headers)
    }

    /// A request on its way through the gateway: what its answer, or its refusal, is rendered
    /// with. Each step fills in what it learnt.
    struct Attempt {
        let start = GatewayMetrics.now()
        let requestID = RequestID.next()
        let isHead: Bool
        /// The path as sent, without the query (`admit` sets it before anything can fail).
        var rawPath = "/"
        var dialect = Dialect.s3
        var addressed: (bucket: String?, key: String?)?
        var operation: GatewayOperation?

        init(_ head: HTTPRequest) {
            isHead = head.method == .head
        }
    }

    func answer(_ request: Request, context: Context) async throws -> Response {
        var context = context
        var attempt = Attempt(request.head)
        // Taken before admission, so that a request refused this time drops its read too.
        let prefetched = request.method == .get ? prefetched.take(for: request.head, on: context.channel) : nil
        do {
            var call = try admit(request.head, body: request.body, context: &context, attempt: &attempt)
            call.prefetched = prefetched
            if request.headers[.expect] != nil {
                // Accepted: now the client may send the body it held back (see ExpectContinueHandler).
                try? await context.channel.triggerUserOutboundEvent(ExpectContinueHandler.SendContinue())
            }
            var response = try await handle(call)
            finish(&response.headers, status: response.status, attempt)
            return response
        } catch {
            return refusal(error, attempt, context: context).response
        }
    }

    /// What `GatewayFastPath` does with a GET or HEAD, decided on the connection's event loop.
    enum FastAnswer {
        /// Answered at once: the store had the object (for HEAD, its row) at hand, or it was refused.
        case now(WholeAnswer)
        /// Admitted; the store has to be asked (`answerFromStore`).
        case fromStore(Call, Attempt)
        /// Admitted, but not a GET or HEAD of an object, or a GET of a body that the store sends
        /// in pieces (`ReadAtOnce.inPieces`): Hummingbird hands it to `respond`, which streams it.
        case handOn
    }

    /// An answer that `GatewayFastPath` writes at once: its head, and its body in memory or as
    /// one span of cached file pages that the connection sends with sendfile.
    struct WholeAnswer: Sendable {
        var rendered: Rendered
        var span: ZeroCopyRegion? = nil
    }

    /// A GET or HEAD at the fast path (`GatewayFastPath`), by the same steps as `answer`:
    /// admitted, then rendered by `objectAnswer` or `headAnswer`, at once when the store has what
    /// it needs at hand (`readAtOnce`, `infoInMemory`); or refused. The store is asked only once
    /// the request is admitted, so a refusal takes the same path and time whether or not the
    /// object is at hand, and tells nothing of it.
    func answerAtOnce(_ head: HTTPRequest, context: Context) -> FastAnswer {
        var context = context
        var attempt = Attempt(head)
        do {
            let call = try admit(head, body: RequestBody(buffer: ByteBuffer()), context: &context, attempt: &attempt)
            var answer: WholeAnswer
            switch call.route {
            case .getObject where !capabilities.readsAtOnce, .headObject where !capabilities.readsAtOnce:
                return .fromStore(call, attempt)
            case .getObject(let bucket, let key):
                switch try store.readAtOnce(bucket: bucket, key: key, range: Self.range(call)) {
                case .read(let read)?:
                    guard let whole = try wholeAnswer(call, read: read) else { return .fromStore(call, attempt) }
                    answer = whole
                case .inPieces?:
                    return .handOn
                case nil:
                    return .fromStore(call, attempt)
                }
            case .headObject(let bucket, let key):
                guard let info = store.infoInMemory(bucket: bucket, key: key) else { return .fromStore(call, attempt) }
                answer = WholeAnswer(rendered: try headAnswer(call, info: info))
            default:
                return .handOn
            }
            finish(&answer.rendered.headers, status: answer.rendered.status, attempt)
            return .now(answer)
        } catch {
            return .now(WholeAnswer(rendered: refusal(error, attempt, context: context)))
        }
    }

    /// What the store gave for an admitted GET or HEAD at the fast path (`answerFromStore`).
    enum FromStore: Sendable {
        /// An answer `GatewayFastPath` writes at once (a HEAD, a refusal, a body it can send whole).
        case whole(WholeAnswer)
        /// The GET's read, whose body streams: the fast path hands the request on to the
        /// responder with it (`prefetched`), so the responder does not ask the store again.
        case stream(ObjectRead)
    }

    /// The answer to an admitted GET or HEAD (`FastAnswer.fromStore`) from the store, as
    /// `handle` renders it, when it can be sent whole at once (`wholeAnswer`); a HEAD, a
    /// refusal. A GET whose body is still to be read (from the disk, from a remote backend) or
    /// is longer than one span comes back as its open read: Hummingbird's responder then
    /// admits the request again and streams that read, without a second fetch. (Once the store
    /// has the object's row at hand, a body longer than one span is handed on before the store
    /// is asked: `ReadAtOnce.inPieces`.)
    func answerFromStore(_ call: Call, _ attempt: Attempt, context: Context) async -> FromStore {
        do {
            var answer: WholeAnswer
            switch call.route {
            case .getObject(let bucket, let key):
                let read = try await store.getObject(bucket: bucket, key: key, range: Self.range(call))
                guard let whole = try wholeAnswer(call, read: read) else { return .stream(read) }
                answer = whole
            case .headObject(let bucket, let key):
                answer = WholeAnswer(rendered: try headAnswer(call, info: try await store.headObject(bucket: bucket, key: key)))
            default:
                answer = WholeAnswer(rendered: refusal(GatewayError.internalError(), attempt, context: context))
            }
            finish(&answer.rendered.headers, status: answer.rendered.status, attempt)
            return .whole(answer)
        } catch {
            return .whole(WholeAnswer(rendered: refusal(error, attempt, context: context)))
        }
    }

    /// A GET's answer for `read` (`objectAnswer`) when it can be sent whole at once: a 304, a
    /// body in memory, or one span of cached file pages (plain TCP only). Nil otherwise.
    func wholeAnswer(_ call: Call, read: ObjectRead) throws(GatewayError) -> WholeAnswer? {
        let rendered = try objectAnswer(call, read: read)
        if rendered.status == .notModified || read.body.isInMemory { return WholeAnswer(rendered: rendered) }
        guard sendsFiles, let span = read.body.zeroCopy?.whole else { return nil }
        metrics.bytesSent(call.dialect).increment(by: Int64(span.range.count))
        return WholeAnswer(rendered: rendered, span: span)
    }

    /// Routes, authenticates and authorizes a request: every step before its handler, none of
    /// which waits. Nothing is counted or logged unless the request is refused.
    func admit(_ head: HTTPRequest, body: RequestBody, context: inout Context, attempt: inout Attempt) throws -> Call {
        let snapshot = live.current
        context.identifyClient(head.headerFields, tls: tls, trustedProxies: snapshot.config.trustedProxies)
        let signed = SignatureRequest(head, now: clock())
        attempt.rawPath = signed.rawPath
        let scheme = SignatureScheme.detect(signed)
        let dialect: Dialect = scheme.isOSS ? .oss : .s3
        attempt.dialect = dialect
        let (bucket, key) = try Self.address(host: head.authority, rawPath: signed.rawPath, baseDomain: snapshot.config.gatewayBaseDomain)
        attempt.addressed = (bucket, key)
        let query = Self.decodeQuery(signed.query)
        let copySource = head.headerFields[dialect == .s3 ? .amzCopySource : .ossCopySource]
        let route = try GatewayRoute.route(method: head.method.rawValue, bucket: bucket, key: key, query: query, copySource: copySource)
        attempt.operation = route.operation
        let authenticator = Authenticator(root: snapshot.root, tokens: snapshot.tokens, revocations: revocations)
        let identity = try authenticate(signed, scheme: scheme, dialect: dialect, bucket: bucket, key: key,
                                        authenticator: authenticator, context: context)
        try Self.checkCoverage(route, scheme: scheme, method: head.method.rawValue, bucket: bucket, key: key, query: query,
                               copySource: copySource)
        try Self.refuseEncryption(head.headerFields)
        let policy: EffectivePolicy?
        do throws(GatewayError) { policy = try identity.claims.map { claims throws(GatewayError) in try Self.effectivePolicy(claims, policies: snapshot.policies) } } catch {
            metrics.denied(.policyImplicitDeny)
            context.logger.info("gateway request denied", metadata: [
                "gateway.operation": "\(route.operation.rawValue)", "gateway.access_key_id": "\(identity.accessKeyId)",
                "token.role": "\(identity.claims?.role ?? "-")", "policy.decision": "Deny (implicit)", "policy.statement": "\(error.message)",
            ])
            throw error
        }
        let call = Call(head: head, body: body, route: route, identity: identity, policy: policy, dialect: dialect, query: query,
                        requestID: attempt.requestID, sourceIP: context.clientIP, secureTransport: context.secureTransport,
                        baseLogger: context.logger, channel: context.channel)
        try authorize(call)
        return call
    }

    /// Every answer's last touch: the dialect's request id (no handler sets it: appended, not
    /// searched for), and the request counted.
    func finish(_ headers: inout HTTPFields, status: HTTPResponse.Status, _ attempt: Attempt) {
        headers.append(HTTPField(name: attempt.dialect == .s3 ? .amzRequestID : .ossRequestID, value: attempt.requestID))
        metrics.request(attempt.operation, dialect: attempt.dialect, status: Int(status.code), startedAt: attempt.start)
    }

    /// A refused or failed request's answer, in its dialect, counted and, for a server error, logged.
    func refusal(_ error: any Error, _ attempt: Attempt, context: Context) -> Rendered {
        metrics.failed(error)
        let addressed = attempt.addressed
        let gatewayError = Self.gatewayError(error, dialect: attempt.dialect, bucket: addressed?.bucket, key: addressed?.key)
        metrics.request(attempt.operation, dialect: attempt.dialect, status: Int(gatewayError.status.code), startedAt: attempt.start)
        if gatewayError.status == .internalServerError {
            context.logger.error("gateway request failed", metadata: ["error": "\(error)", "gateway.request_id": "\(attempt.requestID)"])
        }
        let resource = addressed.map { "/" + [$0.bucket, $0.key].compactMap { $0 }.joined(separator: "/") } ?? PercentEncoding.decode(attempt.rawPath)
        return gatewayError.rendered(dialect: attempt.dialect, requestID: attempt.requestID, resource: resource, isHead: attempt.isHead)
    }

    // MARK: Addressing

    /// Bucket and key from the Host header (virtual-host style, when a base domain is set) and
    /// the path (path style). The key is percent-decoded and must be UTF-8.
    static func address(host: String?, rawPath: String, baseDomain: String?) throws(GatewayError) -> (bucket: String?, key: String?) {
        var path = rawPath.hasPrefix("/") ? rawPath.dropFirst() : rawPath[...]
        var bucket = virtualHostBucket(host: host, baseDomain: baseDomain)
        if bucket == nil {
            let slash = path.utf8.firstIndex(of: UInt8(ascii: "/")) ?? path.endIndex
            if slash != path.startIndex { bucket = try Self.decodeUTF8(path[..<slash]) }
            path = slash == path.endIndex ? path[slash...] : path[path.utf8.index(after: slash)...]
        }
        let key = path.isEmpty ? nil : try Self.decodeUTF8(path)
        return (bucket, key)
    }

    /// The bucket a virtual-hosted request names in its Host (`bucket.BASE`), or nil.
    static func virtualHostBucket(host: String?, baseDomain: String?) -> String? {
        guard let baseDomain, let host else { return nil }
        let hostname = host.split(separator: ":").first.map(String.init)?.lowercased() ?? ""
        guard hostname.hasSuffix("." + baseDomain.lowercased()) else { return nil }
        return String(hostname.dropLast(baseDomain.count + 1))
    }

    static func decodeUTF8(_ raw: Substring) throws(GatewayError) -> String {
        // Nothing escaped: the text is the request's own, already valid UTF-8.
        if !raw.utf8.contains(UInt8(ascii: "%")) { return String(raw) }
        let bytes = PercentEncoding.decodeBytes(raw)
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw GatewayError(.badRequest, "InvalidURI", "Couldn't parse the specified URI.")
        }
        return string
    }

    /// The first value of each query parameter, decoded, for routing and handlers. The S3
    /// signature's own parameters (`X-Amz-*`) are left out: only the signature check reads them,
    /// from the query's bytes, and a presigned GET then builds no dictionary at all.
    static func decodeQuery(_ items: RawQuery) -> [String: String] {
        var query: [String: String] = [:]
        for index in items.indices where !items.nameHasPrefix(index, "X-Amz-") {
            let name = items.name(at: index)
            if query[name] == nil { query[name] = items.value(at: index) }
        }
        return query
    }

    // MARK: Authentication and authorization

    /// Verifies the signature (root or a vended credential) and refuses revoked credentials;
    /// every refusal is counted by its reason.
    func authenticate(_ signed: SignatureRequest, scheme: SignatureScheme, dialect: Dialect, bucket: String?, key: String?,
                      authenticator: Authenticator, context: Context) throws -> GatewayIdentity {
        let identity: GatewayIdentity
        switch scheme {
        case .anonymous:
            // With an AnonymousPolicyFile, an unsigned request is decided by it, as a token of
            // its own role with no user would be; without one it is refused.
            guard live.current.policies[TollgateConfig.anonymousRole] != nil else {
                metrics.denied(.missingAuth)
                throw GatewayError.accessDenied("Anonymous access is not allowed; sign the request with credentials from the token endpoint.")
            }
            return Self.anonymousIdentity
        case .unsupported(let name):
            metrics.denied(.malformedAuth)
            // In the dialect the scheme's name claims (an `OSS…` one is answered as OSS).
            guard dialect == .s3 else {
                throw GatewayError.invalidArgument("The authorization mechanism you have provided (\(name)) is not supported. Please use OSS, OSS2 or OSS4-HMAC-SHA256.",
                                                   name: "Authorization", value: name)
            }
            throw GatewayError(.badRequest, "InvalidRequest",
                               "The authorization mechanism you have provided (\(name)) is not supported. Please use AWS4-HMAC-SHA256.")
        case .s3SigV4Header, .s3SigV4Query:
            do throws(S3AuthError) { identity = try authenticator.authenticateS3(signed) } catch {
                metrics.denied(DenialReason(error))
                throw error
            }
        case .s3SigV2Header, .s3SigV2Query:
            // SigV2 signs the path with its bucket, also for a virtual-hosted request.
            let virtualBucket = Self.virtualHostBucket(host: signed.headers["host"], baseDomain: live.current.config.gatewayBaseDomain)
            let authPath = virtualBucket.map { "/" + $0 + signed.rawPath } ?? signed.rawPath
            do throws(S3AuthError) {
                identity = try authenticator.authenticateS3V2(signed, authPath: authPath, bucketLevel: bucket != nil && key == nil)
            } catch {
                metrics.denied(DenialReason(error))
                throw error
            }
        case .ossV1Header, .ossV1Query, .ossV2Header, .ossV2Query, .ossV4Header, .ossV4Query:
            do throws(OSSAuthError) { identity = try authenticator.authenticateOSS(signed, bucket: bucket, key: key) } catch {
                metrics.denied(DenialReason(error))
                throw error
            }
        }
        do { try authenticator.refuseIfRevoked(identity, dialect: dialect, context: context) } catch {
            metrics.denied(.revoked)
            throw error
        }
        return identity
    }

    /// A signature that covers only some query parameters (S3 SigV2, OSS V1) must cover every
    /// one that selects the operation: the request is routed again with only the parameters it
    /// covers, and must land on the same operation. Otherwise anyone holding a presigned GET
    /// could add `&stat` or `&objectMeta` and have another operation run under its signature.
    /// `list-type` picks a listing's format, not what it is allowed to list (v1 and v2 are the
    /// same action), and needs no signature, as on S3 (botocore's SigV2 leaves it unsigned).
    static func checkCoverage(_ route: GatewayRoute, scheme: SignatureScheme, method: String, bucket: String?, key: String?,
                              query: [String: String], copySource: String?) throws(GatewayError) {
        let unsigned = query.keys.filter { !scheme.signsQueryParameter($0) && $0 != "list-type" }
        guard !unsigned.isEmpty else { return }
        let covered = query.filter { scheme.signsQueryParameter($0.key) || $0.key == "list-type" }
        let signedRoute = try? GatewayRoute.route(method: method, bucket: bucket, key: key, query: covered, copySource: copySource)
        guard signedRoute != route else { return }
        let selecting = unsigned.sorted().first { name in
            var without = query
            without[name] = nil
            return (try? GatewayRoute.route(method: method, bucket: bucket, key: key, query: without, copySource: copySource)) != route
        }
        throw .accessDenied("The query parameter \(selecting ?? unsigned.sorted()[0]) selects the operation, and the signature does not cover it.")
    }

    /// Server-side encryption is not applied here, so no request that asks for it is served as
    /// if it were: `x-amz-server-side-encryption*` (SSE-S3, SSE-KMS, SSE-C keys, their copy-source
    /// forms) and `x-oss-server-side-encryption*` are `NotImplemented`, never stored in the clear.
    static func refuseEncryption(_ headers: HTTPFields) throws(GatewayError) {
        for field in headers {
            let name = field.name.canonicalName
            guard name.hasPrefix("x-amz-") || name.hasPrefix("x-oss-") else { continue }
            if name.contains("server-side-encryption") {
                throw .notImplemented("Server-side encryption (\(name)) is not implemented by this gateway: objects are stored "
                    + "unencrypted, so a request for it is refused rather than answered as if it were applied.")
            }
        }
    }

    /// Decides with the token's policy before any body byte is read. The root credentials may
    /// do anything. DeleteObjects is checked per key by its handler, as S3 reports per key;
    /// here it needs only that some key in the bucket could be deleted, so a caller who may
    /// delete nothing there is refused before its body is read, whether the bucket exists or not.
    func authorize(_ call: Call) throws(GatewayError) {
        guard let claims = call.identity.claims else { return }
        // A token always has its policy here (respond refuses one whose role has none).
        guard let policy = call.policy else { throw .accessDenied() }
        let route = call.route
        if case .deleteObjects(let bucket) = route {
            let context = policyContext(call, claims: claims)
            guard policy.mayAllowSomeObject(.deleteObject, bucket: bucket, context: context) else {
                let refusing = policy.role.mayAllowSomeObject(.deleteObject, bucket: bucket, context: context) ? policy.session : policy.role
                denied(call, claims: claims, outcome: .implicitDeny, policyFile: refusing?.file ?? "-", statement: "no statement allowed")
                throw .accessDenied()
            }
            return
        }
        var checks: [PolicyCheck]
        if let source = route.copySource {
            let (sourceBucket, sourceKey) = try Self.parseCopySource(source)
            checks = route.operation.requiredChecks(bucket: route.bucket, key: route.key, sourceBucket: sourceBucket, sourceKey: sourceKey)
        } else {
            checks = route.operation.requiredChecks(bucket: route.bucket, key: route.key)
        }
        // Tags given with a write set the object's tags: that needs PutObjectTagging too, as in
        // S3 and OSS, or a role without it could tag objects all the same.
        if Self.tagsTheObject(call) { checks.append(PolicyCheck(operation: .putObjectTagging, bucket: route.bucket, key: route.key)) }
        let decision = policy.evaluate(checks, context: policyContext(call, claims: claims))
        guard decision.isAllowed else {
            denied(call, claims: claims, outcome: decision.outcome, policyFile: decision.statement?.file ?? decision.policyFile ?? "-",
                   statement: decision.statement.map(\.description) ?? "no statement allowed")
            throw .accessDenied()
        }
    }

    /// A write that carries tags (`x-amz-tagging` / `x-oss-tagging`): PutObject, AppendObject,
    /// CopyObject and CreateMultipartUpload store them with the object, but for what `ignoresTags`.
    static func tagsTheObject(_ call: Call) -> Bool {
        switch call.route.operation {
        case .putObject, .appendObject, .copyObject, .createMultipartUpload:
            return !ignoresTags(call) && call.headers[call.dialect == .s3 ? .amzTagging : .ossTagging] != nil
        default:
            return false
        }
    }

    /// An append after the first (at a position past 0) keeps the object's tags, as its other
    /// metadata, and OSS ignores the tags it carries: they are neither checked nor stored, and
    /// need no PutObjectTagging.
    static func ignoresTags(_ call: Call) -> Bool {
        guard case .appendObject = call.route else { return false }
        return call.query["position"].flatMap { Int64($0) }.map { $0 > 0 } ?? false
    }

    /// Counts a policy denial and writes its audit line: what was asked (operation, bucket, key),
    /// by whom (access key id, subject, role, address; never a secret or token), and which
    /// policy and statement decided. Formatted only here, on the refusal path.
    func denied(_ call: Call, claims: TokenClaims, outcome: PolicyDecision.Outcome, policyFile: String, statement: String) {
        metrics.denied(DenialReason(outcome))
        var metadata: Logger.Metadata = [
            "gateway.operation": .string(call.route.operation.rawValue),
            "gateway.bucket": .string(call.route.bucket ?? "-"),
            "gateway.key": .string(call.route.key ?? "-"),
            "token.subject": .string(claims.subject ?? "-"),
            "token.role": .string(claims.role),
            "client.address": .string(call.clientAddress),
            "policy.decision": .string(outcome == .explicitDeny ? "Deny (explicit)" : "Deny (implicit)"),
            "policy.file": .string(policyFile),
            "policy.statement": .string(statement),
        ]
        if let source = call.route.copySource { metadata["gateway.copy_source"] = .string(source) }
        // The same refusal again and again (a client retrying it) is logged once per interval.
        let what = "\(call.identity.accessKeyId) \(call.route.operation.rawValue) \(call.route.bucket ?? "-")/\(call.route.key ?? "-")"
        RefusalLog.shared.log(call.logger, .info, "gateway request denied", kind: "denied", key: what, now: clock(), metadata: metadata)
    }

    /// Who an unsigned request is, when `AnonymousPolicyFile` admits such requests: claims of the
    /// anonymous role, no user, no session policy, never expiring (nothing was presented).
    static let anonymousIdentity = GatewayIdentity(
        accessKeyId: "anonymous", isRoot: false,
        claims: TokenClaims(keyId: "", accessKeyId: "anonymous", issuedAt: 0, expiresAt: .max, subject: nil,
                            role: TollgateConfig.anonymousRole, sessionName: "anonymous"),
        s3: nil
    )

    /// Session policies compiled once per text, kept under the text's SHA-256 (32 bytes, however
    /// long the text): a user's token carries the same one on every request.
    static let sessionPolicies = BoundedCache<SessionPolicyKey, Policy>(capacity: 1024)

    /// A session policy's SHA-256, as the cache's key: hashed from the text's bytes in place,
    /// into a value without an allocation (this runs for every request whose token has one).
    struct SessionPolicyKey: Hashable, Sendable {
        let digest: SIMD4<UInt64>

        init(_ text: String) throws(CryptoError) {
            var text = text
            var digest = SIMD4<UInt64>()
            let hashed = text.withUTF8 { utf8 in
                withUnsafeMutableBytes(of: &digest) { output in
                    Result { () throws(CryptoError) in try Crypto.digest(.sha256, UnsafeRawBufferPointer(utf8), into: output) }
                }
            }
            _ = try hashed.get()
            self.digest = digest
        }
    }

    static func effectivePolicy(_ claims: TokenClaims, policies: [String: Policy]) throws(GatewayError) -> EffectivePolicy {
        guard let role = policies[claims.role] else { throw .accessDenied("The token's role has no policy.") }
        guard let sessionText = claims.sessionPolicy else { return EffectivePolicy(role: role) }
        do {
            let session = try sessionPolicies.value(for: try SessionPolicyKey(sessionText)) {
                try Policy.load(text: sessionText, file: "session policy", variables: [:])
            }
            return EffectivePolicy(role: role, session: session)
        } catch {
            throw .accessDenied("The token's session policy is invalid.")
        }
    }

    func policyContext(_ call: Call, claims: TokenClaims) -> PolicyContext {
        var policyContext = PolicyContext(
            now: clock(), sourceIp: call.sourceIP, secureTransport: call.secureTransport,
            username: claims.subject, userid: claims.sessionName,
            userAgent: call.headers[.userAgent], referer: call.headers[.referer],
            jwtClaims: claims.claims ?? [:]
        )
        switch call.route {
        case .listObjects, .listObjectsV2, .listMultipartUploads:
            policyContext.setListing(prefix: call.query["prefix"] ?? "", delimiter: call.query["delimiter"],
                                     maxKeys: call.query["max-keys"].flatMap { Int($0) })
        default: break
        }
        return policyContext
    }

    /// `bucket/key` or `/bucket/key`, URL-encoded, optionally with `?versionId=`.
    static func parseCopySource(_ value: String) throws(GatewayError) -> (bucket: String, key: String) {
        var raw = Substring(value)
        if let mark = raw.firstIndex(of: "?") { raw = raw[..<mark] }
        if raw.hasPrefix("/") { raw = raw.dropFirst() }
        let decoded = try decodeUTF8(raw)
        guard let slash = decoded.firstIndex(of: "/"), slash != decoded.startIndex, decoded.index(after: slash) != decoded.endIndex else {
            throw .invalidArgument("Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
                                   name: "x-amz-copy-source", value: value)
        }
        return (String(decoded[..<slash]), String(decoded[decoded.index(after: slash)...]))
    }

    // MARK: Errors

    /// Every error a request can meet, as the client-visible error of its dialect.
    static func gatewayError(_ error: any Error, dialect: Dialect, bucket: String?, key: String?) -> GatewayError {
        switch error {
        case let error as GatewayError:
            return error
        case let error as S3AuthError:
            // Every response, this one included, carries the server's Date (Hummingbird sets it),
            // which is what SDKs correct their clocks from after RequestTimeTooSkewed.
            return GatewayError(HTTPResponse.Status(code: error.httpStatus), error.code, error.message,
                                details: error.details.map { ($0.name, $0.value) })
        case let error as OSSAuthError:
            return GatewayError(HTTPResponse.Status(code: error.httpStatus), error.code, error.message,
                                details: error.details.map { ($0.name, $0.value) })
        case let error as StoreError:
            return storeError(error, dialect: dialect, bucket: bucket, key: key)
        default:
            return .internalError()
        }
    }

    static func storeError(_ error: StoreError, dialect: Dialect, bucket: String?, key: String?) -> GatewayError {
        var rendered = GatewayError(error)
        switch error {
        case .noSuchBucket, .bucketNotEmpty, .bucketExists, .invalidBucketName:
            if let bucket { rendered.details = [("BucketName", bucket)] }
        case .noSuchKey:
            if let key { rendered.details = [("Key", key)] }
        case .invalidRange(let size):
            rendered.headers[.contentRange] = "bytes */\(size)"
            rendered.details = [("ActualObjectSize", String(size))]
        case .positionNotEqualToLength(let next):
            rendered.headers[.ossNextAppendPosition] = String(next)
        case .badDigest where dialect == .oss:
            rendered.code = "InvalidDigest"
        case .copySourceConditionFailed(let condition):
            rendered.details = [("Condition", copySourceConditionPrefix(dialect) + condition.rawValue)]
        default: break
        }
        return rendered
    }
}

/// GETs that `GatewayFastPath` fetched from the store and handed on to Hummingbird's responder,
/// one at most per connection: the fast path asks the store only while no request of the
/// connection is with the responder, so the request it hands on is the next one the responder
/// takes there. The responder takes the read if the request is that one (same head); a read
/// not taken goes when the connection closes, or when the next one replaces it.
final class PrefetchedReads: Sendable {
    private let reads = Mutex<[ObjectIdentifier: (head: HTTPRequest, read: ObjectRead)]>([:])

    func put(_ read: ObjectRead, for head: HTTPRequest, on channel: any Channel) {
        reads.withLock { $0[ObjectIdentifier(channel)] = (head, read) }
    }

    /// The read handed on for `head` on `channel`, removed; nil when there is none for it.
    func take(for head: HTTPRequest, on channel: any Channel) -> ObjectRead? {
        let id = ObjectIdentifier(channel)
        guard let entry = reads.withLock({ $0.removeValue(forKey: id) }) else { return nil }
        return entry.head == head ? entry.read : nil
    }

    func drop(on channel: any Channel) {
        _ = reads.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    var count: Int { reads.withLock { $0.count } }
}
