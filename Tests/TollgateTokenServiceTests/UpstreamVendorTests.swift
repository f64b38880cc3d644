import Foundation
import NIOCore
import Synchronization
import Testing
@testable import TollgateConfig
@testable import TollgateTokenService
import TollgateUpstream

/// An upstream that answers from a script and counts its calls.
private final class ScriptedUpstream: Sendable {
    let calls = Mutex(0)
    let answers: [(status: Int, body: String, delay: Duration)]

    init(_ answers: [(status: Int, body: String, delay: Duration)]) {
        self.answers = answers
    }

    var transport: UpstreamTransport {
        { _, _ in
            let index = self.calls.withLock { calls -> Int in
                defer { calls += 1 }
                return calls
            }
            let answer = self.answers[min(index, self.answers.count - 1)]
            try await Task.sleep(for: answer.delay)
            return (answer.status, Array(answer.body.utf8))
        }
    }
}

private func credentials(_ id: String) -> String {
    let expiration = WireDateFormat.inAnHour()
    return #"{"RequestId":"r","Credentials":{"AccessKeyId":"\#(id)","AccessKeySecret":"s","SecurityToken":"t","Expiration":"\#(expiration)"}}"#
}

private enum WireDateFormat {
    static func inAnHour() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date().addingTimeInterval(3600))
    }
}

private let throttled = #"{"RequestId":"r","Code":"Throttling.User","Message":"Request was denied due to user flow control."}"#

/// The deadline is generous: the whole suite runs in parallel on two cores, and a starved task
/// must not turn a retry test into a timeout.
private func vendor(_ upstream: ScriptedUpstream, timeout: Int = 60_000, share: Double = 0.5) -> UpstreamVendor {
    let settings = UpstreamSettings(
        name: "aliyun", kind: .aliyunSTS, endpoint: UpstreamEndpoint("http://127.0.0.1:9")!, region: nil,
        keys: UpstreamKeys(accessKeyID: "LTAI", accessKeySecret: "secret"), keySource: "test", timeoutMilliseconds: timeout,
        retry: RetryPolicy(maxAttempts: 3, baseDelay: 10, maxDelay: 20), maxPolicyBytes: 2048,
        cache: CacheRule(share: share, marginSeconds: 300, maxEntries: 100))
    return UpstreamVendor(settings, transport: upstream.transport)
}

private let parameters = AssumeRoleParameters(roleArn: "acs:ram::1:role/r", sessionName: "alice", policy: "{}", durationSeconds: 900)
private let key = CredentialCache.Key(upstream: "aliyun", role: "r", subject: "alice", policy: "{}", durationSeconds: 900)

@Test func aBurstOfIdenticalRequestsCostsOneCall() async throws {
    let upstream = ScriptedUpstream([(200, credentials("STS.one"), .milliseconds(100))])
    let vendor = vendor(upstream)
    let ids = try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<20 { group.addTask { try await vendor.vend(parameters, key: key, now: { Date() }).credentials.accessKeyId } }
        return try await group.reduce(into: [String]()) { $0.append($1) }
    }
    #expect(Set(ids) == ["STS.one"])
    #expect(upstream.calls.withLock { $0 } == 1)
    let again = try await vendor.vend(parameters, key: key, now: { Date() })
    #expect(again.reused && again.credentials.accessKeyId == "STS.one")
    #expect(upstream.calls.withLock { $0 } == 1, "then the cache answers")
}

@Test func withoutReuseEveryRequestCalls() async throws {
    let upstream = ScriptedUpstream([(200, credentials("STS.x"), .zero)])
    let vendor = vendor(upstream, share: 0)
    for _ in 0..<3 { _ = try await vendor.vend(parameters, key: key, now: { Date() }) }
    #expect(upstream.calls.withLock { $0 } == 3)
}

@Test func throttlingIsRetriedThenAnswered() async throws {
    let upstream = ScriptedUpstream([(400, throttled, .zero), (200, credentials("STS.after"), .zero)])
    let vended = try await vendor(upstream).vend(parameters, key: key, now: { Date() })
    #expect(vended.credentials.accessKeyId == "STS.after")
    #expect(upstream.calls.withLock { $0 } == 2)
}

@Test func persistentThrottlingStopsAtMaxAttempts() async throws {
    let upstream = ScriptedUpstream([(400, throttled, .zero)])
    await #expect(throws: UpstreamFailure.self) {
        _ = try await vendor(upstream).vend(parameters, key: key, now: { Date() })
    }
    #expect(upstream.calls.withLock { $0 } == 3)
}

@Test func aRefusalIsNotRetried() async throws {
    let upstream = ScriptedUpstream([(404, #"{"Code":"InvalidAccessKeyId.NotFound","Message":"Specified access key is not found."}"#, .zero)])
    do {
        _ = try await vendor(upstream).vend(parameters, key: key, now: { Date() })
        Issue.record("expected a failure")
    } catch {
        #expect(error.code == "InvalidAccessKeyId.NotFound" && error.httpStatus == 502)
    }
    #expect(upstream.calls.withLock { $0 } == 1)
}

@Test func aSlowUpstreamIsAbandonedAtTheDeadline() async throws {
    // The scripted transport ignores the deadline; the vendor's timeout comes from the error.
    let upstream = ScriptedUpstream([(200, credentials("STS.late"), .seconds(30))])
    let slow: UpstreamTransport = { request, deadline in
        try await withThrowingTaskGroup(of: (status: Int, body: [UInt8]).self) { group in
            group.addTask { try await upstream.transport(request, deadline) }
            group.addTask {
                try await Task.sleep(for: .nanoseconds((deadline - NIODeadline.now()).nanoseconds))
                throw CancellationError()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }
    let settings = vendor(upstream, timeout: 300).settings
    // (No wall-clock bound here: the parallel suite can starve a task for many seconds. Had the
    // deadline not been kept, the upstream's answer would have come, and no failure.)
    do {
        _ = try await UpstreamVendor(settings, transport: slow).vend(parameters, key: key, now: { Date() })
        Issue.record("expected a timeout")
    } catch {
        #expect(error.kind == .timeout && error.httpStatus == 504)
    }
}
