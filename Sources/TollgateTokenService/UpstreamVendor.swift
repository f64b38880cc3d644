import AsyncHTTPClient
import Foundation
import Metrics
import NIOCore
import Synchronization
import TollgateCache
import TollgateConfig
import TollgatePolicy
import TollgateUpstream

/// Sends one signed request to an upstream and returns its status and body (at most
/// `maxUpstreamAnswerBytes`), or throws; `deadline` bounds the whole exchange.
package typealias UpstreamTransport = @Sendable (UpstreamHTTPRequest, NIODeadline) async throws -> (status: Int, body: [UInt8])

/// The upstream STSs of a configuration: one `UpstreamVendor` each, with its reuse cache, and
/// the session policy of each role they vend. A reload that leaves an upstream's settings as
/// they were keeps its vendor, and so its cache.
public final class UpstreamVendors: Sendable {
    let config: UpstreamConfig
    let vendors: [String: UpstreamVendor]
    let sessionPolicies: [String: SessionPolicyTemplate]

    init(_ config: UpstreamConfig, sessionPolicies: [String: SessionPolicyTemplate], running: UpstreamVendors?,
         transport: UpstreamTransport? = nil) {
        self.config = config
        self.sessionPolicies = sessionPolicies
        var vendors: [String: UpstreamVendor] = [:]
        for (name, settings) in config.upstreams {
            if let previous = running?.vendors[name], previous.settings == settings, transport == nil {
                vendors[name] = previous
            } else {
                vendors[name] = UpstreamVendor(settings, transport: transport ?? UpstreamVendor.send)
            }
        }
        self.vendors = vendors
    }

    /// The upstream of `role`, nil for a role Tollgate vends itself.
    func route(_ role: String) -> (role: UpstreamRole, vendor: UpstreamVendor)? {
        guard let upstreamRole = config.roles[role], let vendor = vendors[upstreamRole.upstream] else { return nil }
        return (upstreamRole, vendor)
    }
}

/// One upstream STS: `AssumeRole` with bounded retries under one deadline, concurrent identical
/// requests joined into one call, answers reused by the `CredentialCache`, metrics by upstream.
package final class UpstreamVendor: Sendable {
    let settings: UpstreamSettings
    let cache: CredentialCache
    let transport: UpstreamTransport
    let metrics: UpstreamMetrics
    /// Calls under way, by what they ask for: an app-launch burst waits for one.
    private let inflight = Mutex<[CredentialCache.Key: Task<UpstreamCredentials, any Error>]>([:])

    init(_ settings: UpstreamSettings, transport: @escaping UpstreamTransport) {
        self.settings = settings
        cache = CredentialCache(rule: settings.cache)
        self.transport = transport
        metrics = UpstreamMetrics(upstream: settings.name)
    }

    package struct Vended: Sendable {
        var credentials: UpstreamCredentials
        /// Handed out again from the cache (or from a call another request started).
        var reused: Bool
        /// When the upstream minted them (as far as Tollgate knows: when its answer came).
        var fetchedAt: Date
    }

    /// Credentials for `parameters`: from the cache when `key` is there, else from the upstream.
    func vend(_ parameters: AssumeRoleParameters, key: CredentialCache.Key, now: @escaping @Sendable () -> Date) async throws(UpstreamFailure) -> Vended {
        if let entry = cache.lookup(key, now: now()) {
            return Vended(credentials: entry.credentials, reused: true, fetchedAt: entry.fetchedAt)
        }
        let (task, started) = inflight.withLock { calls -> (Task<UpstreamCredentials, any Error>, Bool) in
            if let running = calls[key] { return (running, false) }
            let task = Task { try await self.assumeRole(parameters, key: key, now: now) }
            calls[key] = task
            return (task, true)
        }
        do {
            let credentials = try await task.value
            if started { inflight.withLock { $0[key] = nil } }
            return Vended(credentials: credentials, reused: !started, fetchedAt: now())
        } catch {
            if started { inflight.withLock { $0[key] = nil } }
            throw (error as? UpstreamFailure) ?? .unreachable(upstream: settings.name, String(describing: type(of: error)))
        }
    }

    /// Attempts under one deadline (`TimeoutMs`), pausing with jitter between retryable failures.
    private func assumeRole(_ parameters: AssumeRoleParameters, key: CredentialCache.Key,
                            now: @Sendable () -> Date) async throws(UpstreamFailure) -> UpstreamCredentials {
        let start = NIODeadline.now()
        let deadline = start + .milliseconds(Int64(settings.timeoutMilliseconds))
        var attempt = 0
        while true {
            attempt += 1
            let result = await attemptOnce(parameters, deadline: deadline, now: now())
            switch result {
            case .success(let credentials):
                cache.store(credentials, for: key, now: now())
                return credentials
            case .failure(let failure):
                metrics.errors(failure.code).increment()
                let remaining = Int((deadline - NIODeadline.now()).nanoseconds / 1_000_000)
                guard let pause = settings.retry.pause(after: attempt, failure: failure, remaining: remaining,
                                                       random: Double.random(in: 0...1)) else { throw failure }
                metrics.retries.increment()
                try? await Task.sleep(for: .milliseconds(pause))
            }
        }
    }

    private func attemptOnce(_ parameters: AssumeRoleParameters, deadline: NIODeadline, now: Date) async -> Result<UpstreamCredentials, UpstreamFailure> {
        let request: UpstreamHTTPRequest
        do {
            switch settings.kind {
            case .aliyunSTS:
                request = try AliyunSTS.assumeRole(parameters, endpoint: settings.endpoint, regionID: settings.region, keys: settings.keys,
                                                   timestamp: now, nonce: try AliyunSTS.newNonce())
            case .awsSTS:
                request = try AWSSTS.assumeRole(parameters, endpoint: settings.endpoint, region: settings.signingRegion,
                                                keys: settings.keys, timestamp: now)
            }
        } catch {
            return .failure(UpstreamFailure(kind: .malformed, code: "UpstreamSigningFailed",
                                            message: "The request to the upstream STS \(settings.name) could not be signed."))
        }
        let started = NIODeadline.now()
        let answer: (status: Int, body: [UInt8])
        do {
            answer = try await transport(request, deadline)
        } catch {
            metrics.duration.recordNanoseconds((NIODeadline.now() - started).nanoseconds)
            if Self.isTimeout(error) || NIODeadline.now() >= deadline {
                return .failure(.timeout(upstream: settings.name, milliseconds: settings.timeoutMilliseconds))
            }
            return .failure(.unreachable(upstream: settings.name, Self.describe(error)))
        }
        metrics.duration.recordNanoseconds((NIODeadline.now() - started).nanoseconds)
        switch settings.kind {
        case .aliyunSTS: return AliyunSTS.parseAssumeRole(status: answer.status, body: answer.body, upstream: settings.name)
        case .awsSTS: return AWSSTS.parseAssumeRole(status: answer.status, body: answer.body, upstream: settings.name)
        }
    }

    static func isTimeout(_ error: any Error) -> Bool {
        guard let error = error as? HTTPClientError else { return false }
        return error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout || error == .writeTimeout
    }

    /// A transport error as a few words: its type and, for system errors, the errno text. Never
    /// the request (which carries the signature and the policy).
    static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return "\(error.description)" }
        if let error = error as? HTTPClientError { return "\(error)" }
        return String(describing: type(of: error))
    }

    /// The client of every upstream call, for the process's life: a refused connection fails at
    /// once (the shared client would try again until the deadline, and the vendor's own bounded
    /// retry decides), connecting takes at most 3 s, and a redirect is not followed (nothing
    /// signed goes anywhere but the configured endpoint).
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(3)))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// The HTTP exchange.
    static let send: UpstreamTransport = { request, deadline in
        var http = HTTPClientRequest(url: request.url)
        http.method = .init(rawValue: request.method)
        for header in request.headers { http.headers.replaceOrAdd(name: header.name, value: header.value) }
        http.body = .bytes(ByteBuffer(bytes: request.body))
        let response = try await client.execute(http, deadline: deadline)
        let body = try await response.body.collect(upTo: maxUpstreamAnswerBytes + 1)
        return (Int(response.status.code), Array(buffer: body))
    }
}

/// An upstream's instruments, labelled by its name (from config.json: a bounded set). Each is
/// made when first used, so that one made before the process's metrics system is set up (the
/// first configuration is read before it) still reaches it.
package final class UpstreamMetrics: Sendable {
    /// Error codes are the upstream's: at most this many distinct ones get their own series,
    /// the rest count as `other`.
    static let maxCodes = 32
    package static let durationLabel = "tollgate_upstream_request_duration_seconds"

    let upstream: String
    private let credentials: InstrumentCache<String, Counter>
    private let durations: InstrumentCache<String, Timer>
    private let retryCounts: InstrumentCache<String, Counter>
    private let refusalCounts: InstrumentCache<String, Counter>
    private let errorCounts: InstrumentCache<String, Counter>
    private let seenCodes = Mutex<Set<String>>([])

    init(upstream: String) {
        self.upstream = upstream
        credentials = InstrumentCache { source in
            Counter(label: "tollgate_upstream_credentials_total", dimensions: [("upstream", upstream), ("source", source)])
        }
        durations = InstrumentCache { _ in
            Timer(label: UpstreamMetrics.durationLabel, dimensions: [("upstream", upstream)], preferredDisplayUnit: .seconds)
        }
        retryCounts = InstrumentCache { _ in Counter(label: "tollgate_upstream_retries_total", dimensions: [("upstream", upstream)]) }
        refusalCounts = InstrumentCache { reason in
            Counter(label: "tollgate_upstream_refusals_total", dimensions: [("upstream", upstream), ("reason", reason)])
        }
        errorCounts = InstrumentCache { code in
            Counter(label: "tollgate_upstream_errors_total", dimensions: [("upstream", upstream), ("code", code)])
        }
    }

    /// `tollgate_upstream_credentials_total{upstream, source="upstream"}`.
    var fetched: Counter { credentials["upstream"] }
    /// `tollgate_upstream_credentials_total{upstream, source="cache"}`.
    var reused: Counter { credentials["cache"] }
    /// `tollgate_upstream_request_duration_seconds{upstream}`: each attempt, answered or not.
    var duration: Timer { durations[""] }
    /// `tollgate_upstream_retries_total{upstream}`.
    var retries: Counter { retryCounts[""] }

    /// `tollgate_upstream_refusals_total{upstream, reason}`: requests refused before any call
    /// (`revoked`, `policy_too_large`, `policy_variable`) and after one (`upstream_error`).
    func refusals(_ reason: String) -> Counter { refusalCounts[reason] }

    /// `tollgate_upstream_errors_total{upstream, code}`.
    func errors(_ code: String) -> Counter {
        let label = seenCodes.withLock { seen -> String in
            if seen.contains(code) { return code }
            guard seen.count < Self.maxCodes else { return "other" }
            seen.insert(code)
            return code
        }
        return errorCounts[label]
    }
}
