import Foundation
import NIOPosix
import Testing
@testable import TollgateLocalStore

/// Where the store's blocking calls may run (`BlockingWork`): on its pool's threads, never on an
/// event loop or in a task unless the store is opening.
@Suite struct BlockingWorkTests {
    @Test func blockingCallsMayRunOnlyWhereNothingWaitsOnThem() async throws {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        #expect(try await pool.runIfActive { BlockingWork.mayBlock })
        try await pool.shutdownGracefully()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        #expect(try await group.next().submit { BlockingWork.mayBlock }.get() == false)
        try await group.shutdownGracefully()
        #expect(!BlockingWork.mayBlock, "in a task")
        #expect(BlockingWork.allowing { BlockingWork.mayBlock }, "in a task, while the store opens")
    }

    #if DEBUG
    /// `swift test` runs a debug build: a blocking call on an event loop stops it, so a test that
    /// drives such a path fails.
    @Test func aDebugBuildStopsABlockingCallOnAnEventLoop() async {
        await #expect(processExitsWith: .failure) {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            try await group.next().submit { Posix.unlinkIfPresent("/nonexistent/tollgate-blocking-work") }.get()
        }
        await #expect(processExitsWith: .failure) {
            Posix.unlinkIfPresent("/nonexistent/tollgate-blocking-work")
        }
    }
    #endif

    /// Without cachestat(2) (Linux before 6.5) the fast path must not map the file (mincore) on
    /// the event loop: it reads the bytes themselves with RWF_NOWAIT when every one is cached,
    /// and leaves the read to the pool when they are not. (The old path ended here in the
    /// debug build's check: mincore called from the test's task.)
    @Test func withoutCachestatTheFastPathReadsOnlyCachedBytes() async throws {
        let box = try Sandbox()
        var configuration = LocalObjectStore.Configuration(directory: box.data)
        configuration.usesCachestat = false
        let store = try LocalObjectStore(configuration: configuration)
        try await store.createBucket("bkt")
        let content = String(repeating: "0123456789", count: 10_000)
        try await store.put("bkt", "k", content)
        #expect(try await store.content("bkt", "k") == content, "read once: the cache keeps its file open")
        let read = try #require(try store.readNow("bkt", "k", range: .closed(10, 99_999)))
        #expect(read.body.isInMemory)
        #expect(try await string(read.body) == String(content.dropFirst(10)))
        // Its pages dropped from the page cache: nothing to read at once. The kernel drops only
        // clean pages, so the file is written back first; and since another process's I/O may
        // bring a page back in between, the drop is tried a bounded number of times.
        let fd = open(try store.layout.objectPath(try await store.fileID("bkt", "k")), O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(fdatasync(fd) == 0)
        var readAtOnce = true
        for _ in 0..<20 where readAtOnce {
            #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            readAtOnce = try store.readNow("bkt", "k", range: nil) != nil
            if readAtOnce { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(!readAtOnce, "a read of uncached pages is left to the pool")
        #expect(try await store.content("bkt", "k") == content, "the pool reads it")
    }
}
