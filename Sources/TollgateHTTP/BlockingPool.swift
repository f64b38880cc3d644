import NIOPosix
import ServiceLifecycle

/// The server's one pool for blocking work: the local store's file system calls, the token
/// audit file, revocations, change-feed documents in the data directory, config and
/// certificate reads, the MD5 lanes' stop. `tollgate serve` makes it, hands it to each of
/// those, and puts this service first in its `ServiceGroup`, so it is told last to stop: the
/// pool shuts down once every service that submits to it has ended. Nothing in the server uses
/// `NIOThreadPool.singleton` (`interop/test_blocking_pool.py` counts the process's threads).
package struct BlockingPoolService: Service {
    package let pool: NIOThreadPool

    /// A started pool of `threads` threads.
    package init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
        pool.start()
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try await pool.shutdownGracefully()
    }
}
