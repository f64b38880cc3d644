import Foundation
import Logging
import ServiceLifecycle
import TollgateStore
import TollgateTokenService

/// Aborts incomplete multipart uploads older than `MultipartUploadExpirySeconds` (counted from
/// initiation, as S3's AbortIncompleteMultipartUpload rule counts), deleting their parts: once
/// at start-up, then every `min(expiry, 1 hour)` until shutdown. The expiry is read from the
/// configuration in force, so a reload that shortens it applies within a second.
public struct UploadExpiry: Service {
    let store: any ObjectStore
    let live: LiveConfig
    let logger: Logger
    let clock: @Sendable () -> Date

    public init(store: any ObjectStore, live: LiveConfig, logger: Logger, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.live = live
        self.logger = logger
        self.clock = clock
    }

    var expirySeconds: Int { live.current.config.multipartUploadExpirySeconds }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sweep()
                // Often enough that an upload outlives its expiry by at most an hour (or its expiry).
                let swept = ContinuousClock.now
                repeat {
                    do { try await Task.sleep(for: .seconds(1)) } catch { return }
                } while ContinuousClock.now - swept < .seconds(min(expirySeconds, 3600))
            }
        }
    }

    /// One pass: aborts what has expired by now.
    func sweep() async {
        let expirySeconds = expirySeconds
        let cutoff = clock().addingTimeInterval(-Double(expirySeconds))
        do {
            let aborted = try await store.expireUploads(initiatedBefore: cutoff)
            if aborted > 0 {
                logger.info("expired multipart uploads aborted", metadata: ["upload.count": "\(aborted)", "upload.expiry_seconds": "\(expirySeconds)"])
            }
        } catch {
            logger.error("expiring multipart uploads failed", metadata: ["error": "\(error)"])
        }
    }
}
