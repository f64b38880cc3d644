import Foundation
import Logging
import ServiceLifecycle
import TollgateStore

/// Aborts incomplete multipart uploads older than `MultipartUploadExpirySeconds` (counted from
/// initiation, as S3's AbortIncompleteMultipartUpload rule counts), deleting their parts: once
/// at start-up, then every `interval` until shutdown.
public struct UploadExpiry: Service {
    let store: LocalObjectStore
    let expirySeconds: Int
    let interval: Duration
    let logger: Logger
    let clock: @Sendable () -> Date

    public init(store: LocalObjectStore, config: TollgateConfig, logger: Logger, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.expirySeconds = config.multipartUploadExpirySeconds
        // Often enough that an upload outlives its expiry by at most an hour (or its expiry).
        self.interval = .seconds(min(config.multipartUploadExpirySeconds, 3600))
        self.logger = logger
        self.clock = clock
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sweep()
                do { try await Task.sleep(for: interval) } catch { return }
            }
        }
    }

    /// One pass: aborts what has expired by now.
    func sweep() async {
        let cutoff = clock().addingTimeInterval(-Double(expirySeconds))
        do {
            let aborted = try await store.abortUploads(initiatedBefore: cutoff)
            if aborted > 0 {
                logger.info("expired multipart uploads aborted", metadata: ["upload.count": "\(aborted)", "upload.expiry_seconds": "\(expirySeconds)"])
            }
        } catch {
            logger.error("expiring multipart uploads failed", metadata: ["error": "\(error)"])
        }
    }
}
