import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization
import TollgateCrypto
import TollgateDates
import TollgateSignature
import TollgateStore
import TollgateXML

/// One request to the backend, in S3's terms: names are the backend's (prefixed buckets).
struct S3Call: Sendable {
    enum Body: Sendable {
        case none
        /// Bytes in memory: signed with their SHA-256, and sent again when the call is retried.
        case bytes(ByteBuffer)
        /// A body that streams once: never retried.
        case stream(UploadBody)
    }

    var method: HTTPMethod
    var bucket: String?
    var key: String?
    /// Name and value (nil: a bare name, `?uploads`), as given (encoded here).
    var query: [(String, String?)] = []
    /// Lower-case names; every one is signed.
    var headers: [(String, String)] = []
    var body: Body = .none
    /// Safe to send again: no effect beyond the first's (GET, HEAD, DELETE, a PUT of bytes in memory).
    var idempotent: Bool

    init(_ method: HTTPMethod, bucket: String? = nil, key: String? = nil, query: [(String, String?)] = [],
         headers: [(String, String)] = [], body: Body = .none, idempotent: Bool? = nil) {
        self.method = method
        self.bucket = bucket
        self.key = key
        self.query = query
        self.headers = headers
        self.body = body
        if let idempotent {
            self.idempotent = idempotent
        } else if case .stream = body {
            self.idempotent = false
        } else {
            self.idempotent = method != .POST
        }
    }
}

/// The backend's answer: status, headers, and the body still to be read (or dropped).
struct S3Reply: Sendable {
    let status: UInt
    let headers: HTTPHeaders
    let body: BackendBody

    var ok: Bool { (200..<300).contains(status) }

    func header(_ name: String) -> String? { headers.first(name: name) }

    /// The whole body, for XML answers (bounded: a larger one is a failure of the backend).
    func bytes(limit: Int = 8 * 1024 * 1024) async throws -> [UInt8] {
        do {
            return Array(buffer: try await body.collect(upTo: limit))
        } catch {
            throw S3Transport.failure(error, during: "reading an answer")
        }
    }

    /// The S3 error this answer carries (its XML `Code` and `Message`; a HEAD's has none).
    func error() async -> S3ErrorReply {
        let bytes = (try? await self.bytes(limit: 64 * 1024)) ?? []
        let document = try? XMLReader.parse(bytes, limits: XMLLimits(maxBytes: 64 * 1024, maxDepth: 4, maxElements: 64))
        let code = document.flatMap { $0.child(of: $0.root, named: "Code")?.text }
        let message = document.flatMap { $0.child(of: $0.root, named: "Message")?.text }
        return S3ErrorReply(status: status, code: code ?? "", message: message ?? "", headers: headers)
    }
}

/// An error answer of the backend.
struct S3ErrorReply: Error, Sendable {
    let status: UInt
    let code: String
    let message: String
    let headers: HTTPHeaders
}

/// Fails requests at once while the backend is down: after `threshold` consecutive failures
/// (no answer, or a 5xx), for `openTime`; then one request tries the backend again (the probe),
/// and its success closes the circuit.
final class Circuit: Sendable {
    private struct State {
        var failures = 0
        var openUntil: ContinuousClock.Instant?
        var probing = false
    }

    private let state = Mutex(State())
    let threshold: Int
    let openTime: Duration

    init(threshold: Int, openTime: Duration) {
        self.threshold = max(1, threshold)
        self.openTime = openTime
    }

    /// Throws `backendUnavailable` while the circuit is open (or another request is probing).
    func admit() throws(StoreError) {
        let refused: Bool = state.withLock { state in
            guard let until = state.openUntil else { return false }
            if ContinuousClock.now < until || state.probing { return true }
            state.probing = true
            return false
        }
        if refused { throw .backendUnavailable("the backend failed \(threshold) times in a row; failing fast until it answers again") }
    }

    func succeeded() {
        state.withLock { $0 = State() }
    }

    func failed() {
        state.withLock { state in
            state.failures += 1
            state.probing = false
            if state.failures >= threshold { state.openUntil = ContinuousClock.now + openTime }
        }
    }

    var isOpen: Bool { state.withLock { $0.openUntil != nil } }
}

/// The HTTP side of the S3 store: URLs, signatures, timeouts, bounded retries with jitter for
/// idempotent requests, and the circuit. Errors that are the backend's unavailability come out
/// as `StoreError.backendUnavailable` / `backendTimeout` / `backendThrottled`; answers with
/// other statuses come back to the caller, which knows what they mean.
final class S3Transport: Sendable {
    let configuration: S3StoreConfiguration
    let client: HTTPClient
    let signer: S3RequestSigner
    let circuit: Circuit
    let logger: Logger
    private let scheme: String
    /// `host[:port]` of the endpoint.
    private let authority: String
    private let lastSuccess = Mutex<ContinuousClock.Instant?>(nil)

    init(configuration: S3StoreConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        guard let schemeEnd = configuration.endpoint.range(of: "://") else {
            throw StoreError.io("Storage.Endpoint \(configuration.endpoint) is not http(s)://HOST[:PORT]")
        }
        scheme = String(configuration.endpoint[..<schemeEnd.lowerBound]).lowercased()
        authority = String(configuration.endpoint[schemeEnd.upperBound...])
        guard scheme == "http" || scheme == "https", !authority.isEmpty, !authority.contains("/") else {
            throw StoreError.io("Storage.Endpoint \(configuration.endpoint) is not http(s)://HOST[:PORT]")
        }
        var http = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .init(configuration.connectTimeout), read: .init(configuration.requestTimeout)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.connectionsPerHost),
            proxy: nil,
            ignoreUncleanSSLShutdown: false,
            decompression: .disabled
        )
        http.httpVersion = .http1Only
        if scheme == "https" {
            var tls = TLSConfiguration.makeClientConfiguration()
            if let caFile = configuration.caFile { tls.trustRoots = .file(caFile) }
            http.tlsConfiguration = tls
        }
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
        signer = S3RequestSigner(accessKeyId: configuration.accessKeyID, secret: configuration.secretAccessKey, region: configuration.region)
        circuit = Circuit(threshold: configuration.circuitFailures, openTime: configuration.circuitOpenTime)
    }

    private let shutDown = Atomic<Bool>(false)

    func shutdown() async throws {
        guard !shutDown.exchange(true, ordering: .relaxed) else { return }
        try await client.shutdown()
    }

    /// A store dropped without `close` still lets its connections go (the client would trap).
    deinit {
        if !shutDown.load(ordering: .relaxed) {
            let client = self.client
            client.shutdown().whenComplete { _ in _ = client }
        }
    }

    /// When the backend last answered (any status), if it has.
    var lastAnswered: ContinuousClock.Instant? { lastSuccess.withLock { $0 } }

    // MARK: Sending

    /// Sends `call`: an answer of any status below 500 (and 501) comes back; the backend's
    /// unavailability throws. Idempotent calls are tried up to `attempts` times.
    func send(_ call: S3Call) async throws -> S3Reply {
        let attempts = call.idempotent ? max(1, configuration.attempts) : 1
        var attempt = 0
        while true {
            attempt += 1
            try circuit.admit()
            let reply: S3Reply
            do {
                reply = try await execute(call)
            } catch let failure as UploadBody.SourceFailed {
                // The client's body failed (it went away, or it did not verify): not the backend's doing.
                circuit.succeeded()
                throw failure.error
            } catch {
                let storeError = Self.failure(error, during: "\(call.method.rawValue) \(call.bucket ?? "/")")
                circuit.failed()
                if attempt < attempts, !Task.isCancelled {
                    try await backoff(attempt)
                    continue
                }
                throw storeError
            }
            lastSuccess.withLock { $0 = .now }
            guard reply.status >= 500, reply.status != 501 else {
                circuit.succeeded()
                return reply
            }
            let error = await reply.error()
            let retryAfter = reply.header("Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            let storeError: StoreError
            if error.code == "SlowDown" || reply.status == 503 && error.code == "" {
                // Asked to slow down: the backend is there; the circuit stays closed.
                circuit.succeeded()
                storeError = .backendThrottled(retryAfterSeconds: retryAfter)
            } else {
                circuit.failed()
                storeError = .backendUnavailable("the backend answered \(reply.status) \(error.code)")
            }
            if attempt < attempts, !Task.isCancelled {
                try await backoff(attempt)
                continue
            }
            throw storeError
        }
    }

    /// 50 ms, 100 ms, 200 ms … for the attempts after the first, each between half and one and a half of that.
    private func backoff(_ attempt: Int) async throws {
        let base = 50.0 * Double(1 << min(attempt - 1, 6))
        try await Task.sleep(for: .milliseconds(Int(base * Double.random(in: 0.5...1.5))))
    }

    /// A failure to get an answer, as the store says it.
    static func failure(_ error: any Error, during what: String) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return .backendTimeout("\(what): \(error)")
            case .cancelled:
                return .backendUnavailable("\(what): cancelled")
            default:
                return .backendUnavailable("\(what): \(error)")
            }
        }
        return .backendUnavailable("\(what): \(error)")
    }

    private func execute(_ call: S3Call) async throws -> S3Reply {
        let (url, host, rawPath, rawQuery) = target(call)
        let timestamp = WireDate.iso8601Basic(Date())
        var signed = SignatureHeaders()
        signed.reserveCapacity(call.headers.count + 4)
        signed.add(name: "host", value: host)
        signed.add(name: "x-amz-date", value: timestamp)
        var request = HTTPClientRequest(url: url)
        request.method = call.method
        var payloadHash = S3RequestSigner.unsignedPayload
        var chunked: (body: UploadBody, length: Int64)?
        switch call.body {
        case .none:
            payloadHash = S3SigV4Constants.emptySHA256
            // RGW refuses a PUT or POST without Content-Length (411), which an absent body omits.
            if call.method == .PUT || call.method == .POST { request.body = .bytes(ByteBuffer()) }
        case .bytes(let bytes):
            payloadHash = Hex.encode(try Crypto.sha256(bytes.readableBytesView))
            request.body = .bytes(bytes)
        case .stream(let body):
            // A body with the client's Content-MD5 goes unsigned: the backend checks every byte
            // against that MD5, so hashing it again with SHA-256 (here and there) adds nothing.
            if configuration.signsPayload, let length = body.length, !call.headers.contains(where: { $0.0 == "content-md5" }) {
                payloadHash = S3RequestSigner.streamingPayload
                // RGW takes a body in signed chunks only under `Content-Encoding: aws-chunked` alone
                // (and keeps it as the object's): the object's own encoding rides in its reserved
                // metadata (`S3Metadata.encodingName`).
                signed.add(name: "content-encoding", value: "aws-chunked")
                signed.add(name: "x-amz-decoded-content-length", value: String(length))
                chunked = (body, length)
            } else {
                request.body = .stream(body.passingThrough(), length: body.length.map { .known($0) } ?? .unknown)
            }
        }
        signed.add(name: "x-amz-content-sha256", value: payloadHash)
        for (name, value) in call.headers where !(chunked != nil && name == "content-encoding") { signed.add(name: name, value: value) }
        let (authorization, signature) = try signer.sign(method: call.method.rawValue, rawPath: rawPath, rawQuery: rawQuery,
                                                         headers: signed, payloadHash: payloadHash, timestamp: timestamp)
        for field in signed.fields where field.name != "host" { request.headers.add(name: field.name, value: field.value) }
        request.headers.add(name: "Authorization", value: authorization)
        if let (body, length) = chunked {
            let chunks = SignedChunks(base: body, length: length, signer: try signer.chunkSigner(timestamp: timestamp, seedSignature: signature))
            request.body = .stream(chunks, length: .known(SignedChunks.encodedLength(length)))
        }
        // A request with a body waits for it as long as the client sends it (the client's own idle
        // timeout bounds that); the answer is then awaited for the request timeout (the read timeout).
        let deadline: NIODeadline
        if case .stream = call.body {
            deadline = .now() + .hours(24)
        } else {
            deadline = .now() + .init(configuration.requestTimeout)
        }
        if case .stream = call.body {
            let response = try await client.execute(request, deadline: deadline, logger: logger)
            return S3Reply(status: response.status.code, headers: response.headers, body: BackendBody(response.body))
        }
        // Without a body to stream, the answer is read through a pipe that reads ahead (`BackendBody`).
        var bytes: ByteBuffer?
        if case .bytes(let buffer) = call.body { bytes = buffer } else if request.body != nil { bytes = ByteBuffer() }
        let plain = try HTTPClient.Request(url: url, method: call.method, headers: request.headers, body: bytes.map { .byteBuffer($0) })
        let (head, body) = try await ResponsePipe.send(plain, client: client, deadline: deadline, logger: logger)
        return S3Reply(status: head.status.code, headers: head.headers, body: body)
    }

    /// URL, `Host`, raw (encoded) path and query of a call.
    func target(_ call: S3Call) -> (url: String, host: String, rawPath: String, rawQuery: String) {
        var path = ""
        var host = authority
        if let bucket = call.bucket {
            if configuration.pathStyle {
                path = "/" + bucket
            } else {
                host = bucket + "." + authority
            }
        }
        if let key = call.key {
            path += "/" + PercentEncoding.encode(key, keepSlash: true)
        } else if path.isEmpty {
            path = "/"
        }
        let query = call.query.map { name, value in
            PercentEncoding.encode(name) + (value.map { "=" + PercentEncoding.encode($0) } ?? "")
        }.joined(separator: "&")
        let url = "\(scheme)://\(host)\(path)" + (query.isEmpty ? "" : "?" + query)
        return (url, host, path, query)
    }
}

enum S3SigV4Constants {
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
