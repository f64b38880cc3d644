import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@testable import TollgateServer
@testable import TollgateTokenService

/// Both listeners run each connection's responder on the connection's own event loop, so a
/// request crosses no threads between its bytes arriving and its answer leaving.
@Test func respondersRunOnTheConnectionsEventLoop() async throws {
    let router = Router(context: TollgateRequestContext.self)
    router.get("/where") { _, context in
        // Also after a suspension point: the task resumes on the same loop.
        let before = context.channel.eventLoop.inEventLoop
        try await Task.sleep(for: .milliseconds(1))
        let after = context.channel.eventLoop.inEventLoop
        return "\(before) \(after)"
    }
    let app = Application(router: router, server: try pinnedHTTPServer(.init(), certificates: nil))
    try await app.test(.live) { client in
        for _ in 0..<3 {
            try await client.execute(uri: "/where", method: .get) { response in
                #expect(String(buffer: response.body) == "true true")
            }
        }
    }
}

/// The gateway's connections read up to the store's `uploadReadSize` at once (larger body parts
/// for uploads to the local store); a listener without `largestRead` keeps NIO's default of 64 KiB.
@Test(arguments: [(Int?.none, 64 * 1024), (256 * 1024, 256 * 1024)])
func connectionsReadUpToTheirLargestRead(largestRead: Int?, expected: Int) async throws {
    let router = Router(context: TollgateRequestContext.self)
    router.get("/largest-read") { _, context in
        let allocator = try await context.channel.getOption(ChannelOptions.recvAllocator).get()
        return "\((allocator as? AdaptiveRecvByteBufferAllocator)?.maximum ?? -1)"
    }
    let app = Application(router: router, server: try pinnedHTTPServer(.init(), certificates: nil, largestRead: largestRead))
    try await app.test(.live) { client in
        try await client.execute(uri: "/largest-read", method: .get) { response in
            #expect(String(buffer: response.body) == "\(expected)")
        }
    }
}
