import Foundation
import Logging
import NIOPosix
import TollgateLocalStore
import TollgateS3Store
import TollgateStore

/// config.json's `Storage` section: where objects are stored. Read once, at start-up.
public struct StorageSettings: Sendable, Equatable {
    public enum Backend: Sendable, Equatable {
        /// Files and SQLite in `DataDirectory/store` (the default).
        case local
        /// An S3-compatible cluster.
        case s3(S3Settings)
    }

    public var backend: Backend

    public init(backend: Backend) {
        self.backend = backend
    }

    public static let local = StorageSettings(backend: .local)

    /// `local` or `s3`, as config.json names it.
    public var name: String {
        switch backend {
        case .local: "local"
        case .s3: "s3"
        }
    }
}

/// The S3 backend's settings. Its keys are read from files or the environment, never from
/// config.json itself, and no description of these settings shows them.
public struct S3Settings: Sendable, Equatable, CustomStringConvertible {
    /// `http://host:port` or `https://host`.
    public var endpoint: String
    public var region: String
    /// Path-style requests (`endpoint/bucket/key`), which RGW and MinIO answer without DNS for
    /// bucket names; false: virtual-hosted (`bucket.host`).
    public var pathStyle: Bool
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Prefixed to every bucket name clients see: bucket `photos` is the backend's
    /// `BucketPrefix + "photos"`. Buckets without the prefix are not the gateway's.
    public var bucketPrefix: String
    /// The backend bucket where the gateway keeps what its instances share besides objects:
    /// revocations, buckets' CORS rules. Clients never see it.
    public var systemBucket: String
    /// PEM file of the CA (or CAs) that signs the backend's certificate, for `https` endpoints
    /// under a private CA; nil: the system's trust store.
    public var caFile: String?
    /// How long a request may wait for the backend's answer head before it fails.
    public var requestTimeoutSeconds: Int
    /// How long a connection to the backend may take to open.
    public var connectTimeoutSeconds: Int
    /// The smallest part (but the last) the backend accepts in a multipart upload: 5 MiB for AWS
    /// S3 and RGW's default; the gateway applies each dialect's own minimum too (S3 5 MiB, OSS
    /// 100 KiB), so OSS clients' small parts need a backend that accepts them (RGW:
    /// `rgw_multipart_min_part_size`).
    public var backendMinimumPartSize: Int64
    /// The backend has appendable objects (Ceph RGW); without them AppendObject is NotImplemented.
    public var appendableObjects: Bool
    /// Sign every chunk of uploads (the backend verifies each byte); false: `UNSIGNED-PAYLOAD`.
    public var signsPayload: Bool

    public init(endpoint: String, region: String = "us-east-1", pathStyle: Bool = true, accessKeyID: String, secretAccessKey: String,
                bucketPrefix: String = "", systemBucket: String? = nil, caFile: String? = nil,
                requestTimeoutSeconds: Int = 30, connectTimeoutSeconds: Int = 5, backendMinimumPartSize: Int64 = 5 * 1024 * 1024,
                appendableObjects: Bool = true, signsPayload: Bool = true) {
        self.endpoint = endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.bucketPrefix = bucketPrefix
        self.systemBucket = systemBucket ?? bucketPrefix + "tollgate-system"
        self.caFile = caFile
        self.requestTimeoutSeconds = requestTimeoutSeconds
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.backendMinimumPartSize = backendMinimumPartSize
        self.appendableObjects = appendableObjects
        self.signsPayload = signsPayload
    }

    /// For logs: everything but the keys.
    public var description: String {
        "S3Settings(endpoint: \(endpoint), region: \(region), pathStyle: \(pathStyle), bucketPrefix: \"\(bucketPrefix)\", systemBucket: \(systemBucket), keys: redacted)"
    }
}

/// The one place that constructs a concrete `ObjectStore`: the server asks here, with the
/// `Storage` settings, and gets a store that is open (`ObjectStore.open`) and ready.
public enum StoreFactory {
    /// `pool`: where the local store's blocking work runs (the server's one blocking pool).
    public static func open(_ settings: StorageSettings, dataDirectory: String, maxUploadsPerBucket: Int, pool: NIOThreadPool,
                            logger: Logger) async throws -> any ObjectStore {
        switch settings.backend {
        case .local:
            let store = try LocalObjectStore(configuration: .init(
                directory: (dataDirectory as NSString).appendingPathComponent("store"),
                maxUploadsPerBucket: maxUploadsPerBucket,
                io: .shared(pool),
                storageFullChanged: { full, detail in
                    if full {
                        logger.error("storage full: writes refused with 507 XMinioStorageFull until space is freed", metadata: ["store.error": "\(detail)"])
                    } else {
                        logger.notice("storage writable again")
                    }
                }
            ))
            try await store.open()
            if let unguarded = store.unguarded {
                logger.warning("the store's directory cannot be locked: nothing stops a second server from opening it too, and two servers on one store lose objects",
                               metadata: ["store.directory": "\(dataDirectory)/store", "store.error": "\(unguarded)"])
            }
            logger.info("object store opened", metadata: ["store.backend": "local", "store.directory": "\(dataDirectory)/store",
                                                          "store.recovery": "\(store.recovery)"])
            return store
        case .s3(let s3):
            let store = try S3ObjectStore(configuration: S3StoreConfiguration(
                endpoint: s3.endpoint, region: s3.region, pathStyle: s3.pathStyle, accessKeyID: s3.accessKeyID,
                secretAccessKey: s3.secretAccessKey, bucketPrefix: s3.bucketPrefix, systemBucket: s3.systemBucket, caFile: s3.caFile,
                requestTimeout: .seconds(s3.requestTimeoutSeconds), connectTimeout: .seconds(s3.connectTimeoutSeconds),
                backendMinimumPartSize: s3.backendMinimumPartSize, appendableObjects: s3.appendableObjects,
                maxUploadsPerBucket: maxUploadsPerBucket, signsPayload: s3.signsPayload
            ), logger: logger)
            do {
                try await store.open()
            } catch StoreError.backendUnavailable(let reason), StoreError.backendTimeout(let reason) {
                // A stateless instance may start before its backend: it answers 503 until the
                // backend answers (and /healthz says so).
                logger.warning("storage backend unreachable at start-up; requests are answered 503 until it answers",
                               metadata: ["store.backend": "s3", "store.endpoint": "\(s3.endpoint)", "store.error": "\(reason)"])
            } catch {
                try? await store.close()
                throw error
            }
            logger.info("object store opened", metadata: ["store.backend": "s3", "store.endpoint": "\(s3.endpoint)",
                                                          "store.bucket_prefix": "\(s3.bucketPrefix)", "store.system_bucket": "\(s3.systemBucket)"])
            return store
        }
    }
}
