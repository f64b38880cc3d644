import Foundation
import Logging
import TollgateLocalStore
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

    public init(endpoint: String, region: String = "us-east-1", pathStyle: Bool = true, accessKeyID: String, secretAccessKey: String,
                bucketPrefix: String = "", systemBucket: String? = nil, caFile: String? = nil,
                requestTimeoutSeconds: Int = 30, connectTimeoutSeconds: Int = 5) {
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
    }

    /// For logs: everything but the keys.
    public var description: String {
        "S3Settings(endpoint: \(endpoint), region: \(region), pathStyle: \(pathStyle), bucketPrefix: \"\(bucketPrefix)\", systemBucket: \(systemBucket))"
    }
}

/// The one place that constructs a concrete `ObjectStore`: the server asks here, with the
/// `Storage` settings, and gets a store that is open (`ObjectStore.open`) and ready.
public enum StoreFactory {
    public static func open(_ settings: StorageSettings, dataDirectory: String, maxUploadsPerBucket: Int, logger: Logger) async throws -> any ObjectStore {
        switch settings.backend {
        case .local:
            let store = try LocalObjectStore(configuration: .init(
                directory: (dataDirectory as NSString).appendingPathComponent("store"),
                maxUploadsPerBucket: maxUploadsPerBucket,
                storageFullChanged: { full, detail in
                    if full {
                        logger.error("storage full: writes refused with 507 XMinioStorageFull until space is freed", metadata: ["store.error": "\(detail)"])
                    } else {
                        logger.notice("storage writable again")
                    }
                }
            ))
            try await store.open()
            logger.info("object store opened", metadata: ["store.backend": "local", "store.directory": "\(dataDirectory)/store",
                                                          "store.recovery": "\(store.recovery)"])
            return store
        case .s3:
            throw StoreError.notSupported("the s3 backend is not built in")
        }
    }
}
