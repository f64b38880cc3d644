import Synchronization
import TollgateCORS

/// Every bucket's CORS rules, in memory, so that a browser's preflight (unauthenticated, and
/// sent before many requests) and the CORS headers of each answer cost no SQLite read.
///
/// It holds all of them or nothing: a bucket missing from a full map has no rules, so a
/// preflight naming any bucket, existing or not, is answered from memory, and the map never
/// holds more than the buckets that have rules. `LocalObjectStore` invalidates it after every
/// change of rules and every bucket deletion, once the write has ended. As in `ObjectInfoCache`,
/// a read that missed may fill the map only if no change ended since it started, so rules read
/// before a change are never kept after it.
final class BucketCORSCache: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var all: [String: CORSConfiguration]?
        var misses = 0
    }

    private let state = Mutex(State())

    /// Every bucket's rules, or nil and the generation a read of them starts in (for `fill`).
    func get() -> (all: [String: CORSConfiguration]?, generation: UInt64) {
        state.withLock { state in
            if state.all == nil { state.misses += 1 }
            return (state.all, state.generation)
        }
    }

    /// Keeps the rules read in `generation`, unless a change ended since.
    func fill(_ all: [String: CORSConfiguration], generation: UInt64) {
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
