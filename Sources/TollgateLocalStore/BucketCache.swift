import TollgateStore
import Synchronization
import TollgateCORS

/// A bucket as `BucketCache` keeps it: its row and its CORS rules, if it has any. Rules that
/// cannot be read are kept as their error, so that they fail that bucket's CORS lookups only,
/// not every bucket's writes.
struct CachedBucket: Sendable, Equatable {
    let info: BucketInfo
    let cors: Result<CORSConfiguration, StoreError>?
}

/// Every bucket, with its CORS rules, in memory, so that the bucket check each write starts
/// with, a browser's preflight (unauthenticated, and sent before many requests) and the CORS
/// headers of each answer cost no SQLite read.
///
/// It holds all of them or nothing: a name missing from a full map is no bucket, so any name,
/// existing or not, is answered from memory. `LocalObjectStore` invalidates it after every
/// change of buckets or of their rules, once the write has ended (object writes leave it as it
/// is). As in `ObjectInfoCache`, a read that missed may fill the map only if no change ended
/// since it started, so buckets read before a change are never kept after it. The server is the
/// only writer of its database (the CLI goes through the gateway), so nothing changes behind it.
final class BucketCache: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var all: [String: CachedBucket]?
        var misses = 0
    }

    private let state = Mutex(State())

    /// Every bucket, or nil and the generation a read of them starts in (for `fill`).
    func get() -> (all: [String: CachedBucket]?, generation: UInt64) {
        state.withLock { state in
            if state.all == nil { state.misses += 1 }
            return (state.all, state.generation)
        }
    }

    /// Keeps the buckets read in `generation`, unless a change ended since.
    func fill(_ all: [String: CachedBucket], generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.all = all
        }
    }

    func invalidate() {
        state.withLock { state in
            state.generation &+= 1
            state.all = nil
        }
    }

    /// How often `get` found nothing (tests: reads of SQLite).
    var misses: Int { state.withLock { $0.misses } }
}
