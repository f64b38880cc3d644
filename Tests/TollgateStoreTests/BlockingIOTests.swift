import Foundation
import NIOCore
import Synchronization
import Testing
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

/// The one blocking-I/O policy: object data is written on the store's own thread pool (never
/// on the Swift concurrency pool), and no more calls wait on the disk at once than it has threads.
@Suite struct BlockingIOTests {
    /// Records, from inside each data write, the thread's name and how many writes are in progress.
    final class Probe: Sendable {
        private struct State {
            var names: Set<String> = []
            var inside = 0
            var most = 0
        }
        private let state = Mutex(State())

        func enter() -> Int32? {
            // The kernel's name of the calling thread (NIO names its pool threads TP-#n).
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? Thread.current.name ?? ""
            let thread = comm.trimmingCharacters(in: .whitespacesAndNewlines)
            state.withLock {
                $0.names.insert(thread)
                $0.inside += 1
                $0.most = Swift.max($0.most, $0.inside)
            }
            usleep(20_000)
            state.withLock { $0.inside -= 1 }
            return nil
        }

        var names: Set<String> { state.withLock { $0.names } }
        var most: Int { state.withLock { $0.most } }
    }

    @Test(arguments: [1, 2])
    func dataWritesRunOnTheStoresBoundedPool(threads: Int) async throws {
        let box = try Sandbox()
        let probe = Probe()
        let store = try LocalObjectStore(configuration: .init(directory: box.data, io: .own(threads: threads), writeFault: { probe.enter() }))
        try await store.createBucket("blocking")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<6 {
                group.addTask { try await store.put("blocking", "k\(n)", String(repeating: "x", count: 1000)) }
            }
            try await group.waitForAll()
        }
        #expect(!probe.names.isEmpty)
        #expect(probe.names.allSatisfy { $0.hasPrefix("TP-#") }, "NIOThreadPool threads only: \(probe.names)")
        #expect(probe.most <= threads)
        for n in 0..<6 { #expect(try await store.content("blocking", "k\(n)").count == 1000) }
    }
}
