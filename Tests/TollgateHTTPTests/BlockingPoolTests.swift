import Logging
import NIOPosix
import ServiceLifecycle
import Testing
@testable import TollgateHTTP

/// The server's one blocking pool lives as long as its service group: it runs work until the
/// group stops, and none after.
@Test func theBlockingPoolStopsWithItsServiceGroup() async throws {
    let service = BlockingPoolService(threads: 2)
    #expect(try await service.pool.runIfActive { 7 } == 7)
    let group = ServiceGroup(configuration: .init(services: [service], logger: Logger(label: "test")))
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        #expect(try await service.pool.runIfActive { 8 } == 8, "running while the group runs")
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
    // NIO answers work for a pool that has shut down with CancellationError.
    await #expect(throws: CancellationError.self) { try await service.pool.runIfActive { 9 } }
}
