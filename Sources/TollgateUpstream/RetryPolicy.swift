/// A bounded retry with "full jitter": after failed attempt n (1-based) of `maxAttempts`,
/// wait a random time in `0 … min(maxDelay, baseDelay × 2^(n−1))`, and only for failures worth
/// retrying (`UpstreamFailure.isRetryable`). Every attempt shares one deadline (the upstream's
/// timeout), so a slow upstream is never waited for more than once and a throttling one is
/// not hammered: many waiting callers spread their retries over the window.
public struct RetryPolicy: Sendable, Equatable {
    public var maxAttempts: Int
    /// Milliseconds.
    public var baseDelay: Int
    public var maxDelay: Int

    public init(maxAttempts: Int = 3, baseDelay: Int = 100, maxDelay: Int = 1000) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The longest pause after failed attempt `attempt`.
    public func ceiling(after attempt: Int) -> Int {
        let exponent = min(max(0, attempt - 1), 20)
        return min(maxDelay, baseDelay << exponent)
    }

    /// What to do after attempt `attempt` failed with `failure`, `remaining` milliseconds before
    /// the deadline; `random` gives a value in `0...1`. Nil: give up and answer the failure.
    public func pause(after attempt: Int, failure: UpstreamFailure, remaining: Int, random: Double) -> Int? {
        guard failure.isRetryable, attempt < maxAttempts else { return nil }
        let pause = Int((Double(ceiling(after: attempt)) * min(1, max(0, random))).rounded(.down))
        // A retry needs the pause and some time to be answered in.
        guard pause + 50 < remaining else { return nil }
        return pause
    }
}
