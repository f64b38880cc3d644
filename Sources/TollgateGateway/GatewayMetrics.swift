import Dispatch
import Metrics
import NIOCore
import Synchronization
import TollgateCache
import TollgatePolicy
import TollgateSignature
import TollgateStore
import TollgateTokenService

/// The gateway's metrics (swift-metrics, exported on the token listener's `/metrics`):
///
/// - `tollgate_gateway_requests_total{operation,dialect,status}`
/// - `tollgate_gateway_request_duration_seconds{operation,dialect}`: until the response head is
///   ready (for a streamed GET, the time to its first byte)
/// - `tollgate_gateway_bytes_received_total{dialect}`: request bodies as they stream in
/// - `tollgate_gateway_bytes_sent_total{dialect}`: object bytes of GET responses, ranges included
/// - `tollgate_gateway_denials_total{reason}`
/// - `tollgate_store_errors_total{kind}`
///
/// Every label comes from a fixed set (the operations, `unknown` for a request that could not
/// be routed, the two dialects, the statuses the gateway answers), and every instrument is made
/// once: a request costs two table lookups (under one uncontended lock each), a histogram
/// update and a few atomic adds.
package final class GatewayMetrics: Sendable {
    package static let durationLabel = "tollgate_gateway_request_duration_seconds"
    /// From half a millisecond (a small object served from the cache) to a minute (a large
    /// upload): what `tollgate serve` configures for the duration histogram.
    package static let durationBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    struct RequestKey: Hashable, Sendable {
        var operation: GatewayOperation?
        var dialect: Dialect
        var status: Int
    }

    struct OperationKey: Hashable, Sendable {
        var operation: GatewayOperation?
        var dialect: Dialect
    }

    private let requests = InstrumentCache<RequestKey, Counter> { key in
        Counter(label: "tollgate_gateway_requests_total", dimensions: GatewayMetrics.labels(key))
    }
    private let durations = InstrumentCache<OperationKey, Timer> { key in
        Timer(label: GatewayMetrics.durationLabel, dimensions: GatewayMetrics.labels(key))
    }
    private let received: [Counter] = [Dialect.s3, .oss].map {
        Counter(label: "tollgate_gateway_bytes_received_total", dimensions: [("dialect", $0.label)])
    }
    private let sent: [Counter] = [Dialect.s3, .oss].map {
        Counter(label: "tollgate_gateway_bytes_sent_total", dimensions: [("dialect", $0.label)])
    }
    private let denials: [DenialReason: Counter] = Dictionary(uniqueKeysWithValues: DenialReason.allCases.map {
        ($0, Counter(label: "tollgate_gateway_denials_total", dimensions: [("reason", $0.rawValue)]))
    })
    private let storeErrors: [StoreErrorKind: Counter] = Dictionary(uniqueKeysWithValues: StoreErrorKind.allCases.map {
        ($0, Counter(label: "tollgate_store_errors_total", dimensions: [("kind", $0.rawValue)]))
    })

    /// The labels of `tollgate_gateway_requests_total`.
    static func labels(_ key: RequestKey) -> [(String, String)] {
        labels(OperationKey(operation: key.operation, dialect: key.dialect)) + [("status", String(key.status))]
    }

    /// The labels of `tollgate_gateway_request_duration_seconds`.
    static func labels(_ key: OperationKey) -> [(String, String)] {
        [("operation", key.operation?.rawValue ?? "unknown"), ("dialect", key.dialect.label)]
    }

    /// Now, on the clock request durations are measured with.
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Counts one answered request (nil operation: it could not be routed) and its duration.
    func request(_ operation: GatewayOperation?, dialect: Dialect, status: Int, startedAt start: UInt64) {
        let elapsed = Self.now() &- start
        requests[RequestKey(operation: operation, dialect: dialect, status: status)].increment()
        durations[OperationKey(operation: operation, dialect: dialect)].recordNanoseconds(Int64(clamping: elapsed))
    }

    func bytesReceived(_ dialect: Dialect) -> Counter { received[dialect == .s3 ? 0 : 1] }
    func bytesSent(_ dialect: Dialect) -> Counter { sent[dialect == .s3 ? 0 : 1] }

    func denied(_ reason: DenialReason?) {
        if let reason { denials[reason]?.increment() }
    }

    /// Counts the error if the store failed (not when it refused a request: NoSuchKey is no store error).
    func failed(_ error: any Error) {
        if let error = error as? StoreError, let kind = StoreErrorKind(error) { storeErrors[kind]?.increment() }
    }
}

/// Why the gateway refused a request before its handler ran: the `reason` of
/// `tollgate_gateway_denials_total`.
enum DenialReason: String, CaseIterable, Sendable {
    /// No signature at all (anonymous request).
    case missingAuth = "missing_auth"
    /// An authorization header or query that is malformed, incomplete or of an unsupported kind.
    case malformedAuth = "malformed_auth"
    case unknownAccessKey = "unknown_access_key"
    case signatureMismatch = "signature_mismatch"
    case clockSkew = "clock_skew"
    case presignedExpired = "presigned_expired"
    /// A temporary key without its security token, or with a malformed or forged one.
    case tokenInvalid = "token_invalid"
    case tokenExpired = "token_expired"
    case revoked
    case policyExplicitDeny = "policy_explicit_deny"
    /// No statement allowed the request (or the role has no policy).
    case policyImplicitDeny = "policy_implicit_deny"

    /// The reason of an S3 authentication failure; nil for a server failure.
    init?(_ error: S3AuthError) {
        switch error {
        case .signatureDoesNotMatch: self = .signatureMismatch
        case .invalidAccessKeyId: self = .unknownAccessKey
        case .requestExpired: self = .presignedExpired
        case .requestTimeTooSkewed: self = .clockSkew
        case .missingSecurityHeader, .invalidToken: self = .tokenInvalid
        case .expiredToken: self = .tokenExpired
        case .internalError: return nil
        case .accessDenied, .authorizationHeaderMalformed, .authorizationQueryParametersError, .contentSHA256Mismatch,
             .invalidDigest, .contentMD5Mismatch, .checksumMismatch, .invalidChecksumValue, .incompleteBody,
             .missingDecodedContentLength, .malformedChunkedBody, .invalidContentSHA256, .invalidRequest:
            self = .malformedAuth
        }
    }

    /// The reason of an OSS authentication failure; nil for a server failure.
    init?(_ error: OSSAuthError) {
        switch error {
        case .signatureDoesNotMatch: self = .signatureMismatch
        case .invalidAccessKeyId: self = .unknownAccessKey
        case .requestExpired: self = .presignedExpired
        case .requestTimeTooSkewed: self = .clockSkew
        case .invalidSecurityToken: self = .tokenInvalid
        case .securityTokenExpired: self = .tokenExpired
        case .accessDenied, .invalidArgument: self = .malformedAuth
        case .internalError: return nil
        }
    }

    init(_ outcome: PolicyDecision.Outcome) {
        self = outcome == .explicitDeny ? .policyExplicitDeny : .policyImplicitDeny
    }
}

/// The `kind` of `tollgate_store_errors_total`: failures of the store itself, not its refusals.
enum StoreErrorKind: String, CaseIterable, Sendable {
    /// ENOSPC, EDQUOT or SQLITE_FULL (answered 507).
    case storageFull = "storage_full"
    /// A file system call failed (answered 500).
    case io
    /// The metadata database failed (answered 500).
    case database
    /// Stored data contradicts the metadata: damage from outside (answered 500).
    case corrupted

    init?(_ error: StoreError) {
        switch error {
        case .storageFull: self = .storageFull
        case .io: self = .io
        case .database: self = .database
        case .corrupted: self = .corrupted
        default: return nil
        }
    }
}

extension Dialect {
    /// The `dialect` label.
    var label: String {
        switch self {
        case .s3: "s3"
        case .oss: "oss"
        }
    }
}
