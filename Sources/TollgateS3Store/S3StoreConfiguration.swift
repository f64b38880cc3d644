import Foundation

/// How `S3ObjectStore` reaches its backend and what it assumes of it.
public struct S3StoreConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// `http://host:port` or `https://host[:port]`, without a path.
    public var endpoint: String
    public var region: String
    /// Path-style requests (`endpoint/bucket/key`); false: virtual-hosted (`bucket.host`).
    public var pathStyle: Bool
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Prefixed to every bucket name clients see.
    public var bucketPrefix: String
    /// Where the instances keep what they share besides objects (buckets' CORS rules,
    /// revocations, multipart uploads' checksums). Never a client's bucket.
    public var systemBucket: String
    /// PEM file of the CAs that sign an `https` backend's certificate; nil: the system's.
    public var caFile: String?
    /// How long a request may wait for the backend's answer (its head; for a request with a body,
    /// counted once the body is sent, and between the answer's reads).
    public var requestTimeout: Duration
    public var connectTimeout: Duration
    /// The smallest part but the last that the gateway accepts from S3 clients (S3's 5 MiB), unless
    /// a completion names another (`CompleteOptions.minimumPartSize`, OSS's 100 KiB).
    public var minimumPartSize: Int64
    /// The smallest part but the last that the backend itself accepts (RGW:
    /// `rgw_multipart_min_part_size`; AWS S3: 5 MiB). A completion whose parts are below it is
    /// refused with `notSupported`, naming it.
    public var backendMinimumPartSize: Int64
    /// The backend has appendable objects (Ceph RGW: `PUT ?append&position=N`).
    public var appendableObjects: Bool
    /// In-progress multipart uploads a bucket may hold.
    public var maxUploadsPerBucket: Int
    /// How long a bucket's CORS rules read from the backend are used before they are read again:
    /// another instance's change is seen within this time.
    public var corsStaleness: Duration
    /// Attempts of an idempotent request whose body can be sent again (GET, HEAD, DELETE, small
    /// PUTs), on connection failures and 5xx answers, with jittered backoff.
    public var attempts: Int
    /// Consecutive failures of the backend after which requests fail at once
    /// (`backendUnavailable`) for `circuitOpenTime`; then one request tries the backend again.
    public var circuitFailures: Int
    public var circuitOpenTime: Duration
    /// Connections kept per backend host.
    public var connectionsPerHost: Int
    /// Sign each chunk of uploaded bodies (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`), so the backend
    /// verifies every byte it stores; false: `UNSIGNED-PAYLOAD` (integrity then rests on TLS and a
    /// client's `Content-MD5`). A body that comes with the client's `Content-MD5` goes unsigned
    /// either way: the backend checks it against that MD5.
    public var signsPayload: Bool

    public init(endpoint: String, region: String = "us-east-1", pathStyle: Bool = true, accessKeyID: String, secretAccessKey: String,
                bucketPrefix: String = "", systemBucket: String? = nil, caFile: String? = nil,
                requestTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(5),
                minimumPartSize: Int64 = 5 * 1024 * 1024, backendMinimumPartSize: Int64 = 5 * 1024 * 1024,
                appendableObjects: Bool = true, maxUploadsPerBucket: Int = 1000, corsStaleness: Duration = .seconds(2),
                attempts: Int = 3, circuitFailures: Int = 3, circuitOpenTime: Duration = .seconds(2),
                connectionsPerHost: Int = 256, signsPayload: Bool = true) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.bucketPrefix = bucketPrefix
        self.systemBucket = systemBucket ?? bucketPrefix + "tollgate-system"
        self.caFile = caFile
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.minimumPartSize = minimumPartSize
        self.backendMinimumPartSize = backendMinimumPartSize
        self.appendableObjects = appendableObjects
        self.maxUploadsPerBucket = maxUploadsPerBucket
        self.corsStaleness = corsStaleness
        self.attempts = attempts
        self.circuitFailures = circuitFailures
        self.circuitOpenTime = circuitOpenTime
        self.connectionsPerHost = connectionsPerHost
        self.signsPayload = signsPayload
    }

    /// For logs: everything but the keys.
    public var description: String {
        "S3StoreConfiguration(endpoint: \(endpoint), region: \(region), pathStyle: \(pathStyle), bucketPrefix: \"\(bucketPrefix)\", systemBucket: \(systemBucket), keys: redacted)"
    }
}
