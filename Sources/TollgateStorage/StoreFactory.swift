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
        /// An S3-compatible cluster. Its keys are read from files or the environment, never from
        /// config.json itself, and its description never shows them.
        case s3(S3StoreConfiguration)
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
            var configuration = s3
            configuration.maxUploadsPerBucket = maxUploadsPerBucket
            let store = try S3ObjectStore(configuration: configuration, logger: logger)
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
