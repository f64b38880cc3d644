import Foundation
import Synchronization
import TollgateConfig

/// What a limiter says about one request.
public enum RateLimitDecision: Sendable, Equatable {
    case allowed
    /// Refused; a request is allowed again after this many whole seconds (at least 1), the
    /// value of `Retry-After`.
    case limited(retryAfter: Int)

    public var isAllowed: Bool { self == .allowed }
}

/// The buckets of one limiter, by key (a client address, a subject). Pure: `now` is passed in,
/// in seconds. Memory is bounded: entries live in two generations of at most
/// `generationCapacity` keys each. When the current generation is full it becomes the previous
/// one and the old previous generation is dropped, so a flood of distinct keys evicts the keys
/// that stayed idle for a whole generation, while a key seen again is carried into the current
/// one. A dropped key starts again with a full bucket, exactly as a key idle long enough would.
public struct RateLimitTable: Sendable {
    struct Bucket: Sendable {
        var tokens: Double
        var updated: Double
    }

    public let limit: RateLimit
    public let generationCapacity: Int
    private var current: [String: Bucket] = [:]
    private var previous: [String: Bucket] = [:]

    public init(limit: RateLimit, generationCapacity: Int) {
        self.limit = limit
        self.generationCapacity = max(1, generationCapacity)
    }

    /// Keys tracked now; never more than twice `generationCapacity`.
    public var count: Int { current.count + previous.count }

    /// Takes one token from `key`'s bucket if it has one.
    public mutating func check(key: String, now: Double) -> RateLimitDecision {
        let burst = Double(max(1, limit.burst))
        let rate = limit.perSecond
        var bucket: Bucket
        if let existing = current[key] {
            bucket = existing
        } else {
            bucket = previous.removeValue(forKey: key) ?? Bucket(tokens: burst, updated: now)
            if current.count >= generationCapacity {
                previous = current
                current = [:]
                current.reserveCapacity(generationCapacity)
            }
        }
        // Refill for the time since the last request (a clock that went back adds nothing).
        if now > bucket.updated {
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
        }
        let decision: RateLimitDecision
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            decision = .allowed
        } else if rate <= 0 {
            decision = .limited(retryAfter: 60)
        } else {
            decision = .limited(retryAfter: max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))))
        }
        current[key] = bucket
        return decision
    }
}

/// A thread-safe limiter: the table split in shards by the key's hash, each behind its own lock,
/// so concurrent requests for different keys rarely wait for each other.
public final class RateLimiter: Sendable {
    private final class Shard: Sendable {
        let table: Mutex<RateLimitTable>
        init(_ table: RateLimitTable) { self.table = Mutex(table) }
    }

    public let limit: RateLimit
    /// At most this many keys are tracked in all (see `RateLimitTable`).
    public let capacity: Int
    private let shards: [Shard]

    public init(limit: RateLimit, capacity: Int = 65_536, shardCount: Int = 16) {
        self.limit = limit
        self.capacity = capacity
        let shardCount = max(1, min(shardCount, capacity / 2))
        let perGeneration = max(1, capacity / shardCount / 2)
        shards = (0..<shardCount).map { _ in Shard(RateLimitTable(limit: limit, generationCapacity: perGeneration)) }
    }

    /// Takes one request from `key`'s allowance.
    public func check(key: String, now: Date) -> RateLimitDecision {
        let shard = shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
        return shard.table.withLock { $0.check(key: key, now: now.timeIntervalSince1970) }
    }

    /// Keys tracked now, across all shards.
    public var trackedKeys: Int { shards.reduce(0) { total, shard in total + shard.table.withLock { $0.count } } }
}
