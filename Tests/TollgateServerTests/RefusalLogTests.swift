import Foundation
import Testing
@testable import TollgateTokenService

/// One line per kind and key and interval, carrying how many it stood for; other keys and
/// kinds have their own windows; the number followed is bounded.
@Test func refusalsAreLoggedOncePerIntervalWithACount() {
    let log = RefusalLog(interval: 10, capacity: 3)
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(log.admit(kind: "throttled", key: "10.0.0.1", now: start) == 0)
    for second in 1...9 { #expect(log.admit(kind: "throttled", key: "10.0.0.1", now: start + Double(second)) == nil) }
    #expect(log.admit(kind: "throttled", key: "10.0.0.2", now: start + 1) == 0, "another key")
    #expect(log.admit(kind: "revoked", key: "10.0.0.1", now: start + 1) == 0, "another kind")
    #expect(log.admit(kind: "throttled", key: "10.0.0.1", now: start + 10) == 9, "the next window's line counts the nine left out")
    #expect(log.admit(kind: "throttled", key: "10.0.0.1", now: start + 11) == nil)
    // Windows that ended (10.0.0.2's, the other kind's) make room for a new key.
    #expect(log.admit(kind: "throttled", key: "10.0.0.3", now: start + 12) == 0)
    #expect(log.admit(kind: "throttled", key: "10.0.0.3", now: start + 12) == nil)
    // Full of open windows: a further key is logged every time, unfollowed.
    #expect(log.admit(kind: "throttled", key: "10.0.0.4", now: start + 12) == 0)
    #expect(log.admit(kind: "throttled", key: "10.0.0.5", now: start + 12) == 0)
    #expect(log.admit(kind: "throttled", key: "10.0.0.5", now: start + 12) == 0, "not followed: every line written")
    #expect(log.admit(kind: "throttled", key: "10.0.0.5", now: start + 25) == 0)
    #expect(log.admit(kind: "throttled", key: "10.0.0.5", now: start + 26) == nil, "followed once old windows made room")
}

/// 10,000 refusals of one client write one line; metadata is built only for lines written.
@Test func aFloodOfOneRefusalWritesOneLine() {
    let captured = CapturedLog()
    let logger = captured.logger()
    let log = RefusalLog()
    var built = 0
    let now = Date()
    for _ in 0..<10_000 {
        log.log(logger, .warning, "token request refused", kind: "rate limit per address", key: "192.0.2.7", now: now,
                metadata: { built += 1; return ["client.address": "192.0.2.7"] }())
    }
    #expect(captured.all.filter { $0.contains("token request refused") }.count == 1)
    #expect(built == 1)
}
