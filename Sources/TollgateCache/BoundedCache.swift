import Synchronization

/// The one cache type: at most `capacity` entries, each looked up in O(1), and when a new key
/// arrives at a full cache one entry makes room: the first, going round the slots, that was not
/// used since the round last passed it (CLOCK, an approximation of least-recently-used that
/// costs one flag per lookup). So a hot set smaller than the capacity stays cached under any
/// churn of cold keys, where the caches it replaced emptied themselves whole when full.
///
/// Memoisation only: every user computes the same value without the cache.
///
/// Inlinable, so that each module that uses one gets a copy specialised to its key and value
/// types instead of generic code that looks up type metadata on every call.
public final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline struct Slot: Sendable {
        @usableFromInline let key: Key
        @usableFromInline var value: Value
        @usableFromInline var used: Bool

        @usableFromInline init(key: Key, value: Value, used: Bool) {
            self.key = key
            self.value = value
            self.used = used
        }
    }

    @usableFromInline struct State: Sendable {
        @usableFromInline var slots: [Slot] = []
        @usableFromInline var index: [Key: Int] = [:]
        @usableFromInline var hand = 0

        @usableFromInline init() {}
    }

    public let capacity: Int
    @usableFromInline let state = Mutex(State())

    public init(capacity: Int) {
        precondition(capacity > 0, "a cache holds at least one entry")
        self.capacity = capacity
    }

    /// The value cached for `key`, marked as used.
    @inlinable public func value(for key: Key) -> Value? {
        state.withLock { state in
            guard let slot = state.index[key] else { return nil }
            state.slots[slot].used = true
            return state.slots[slot].value
        }
    }

    /// Caches `value` for `key`, in place of another entry when the cache is full.
    @inlinable public func insert(_ value: Value, for key: Key) {
        state.withLock { state in
            if let slot = state.index[key] {
                state.slots[slot].value = value
                state.slots[slot].used = true
                return
            }
            guard state.slots.count >= capacity else {
                state.index[key] = state.slots.count
                state.slots.append(Slot(key: key, value: value, used: false))
                return
            }
            // At most one round clears every flag; the next slot then has none.
            while state.slots[state.hand].used {
                state.slots[state.hand].used = false
                state.hand = (state.hand + 1) % state.slots.count
            }
            state.index[state.slots[state.hand].key] = nil
            state.slots[state.hand] = Slot(key: key, value: value, used: false)
            state.index[key] = state.hand
            state.hand = (state.hand + 1) % state.slots.count
        }
    }

    /// The cached value for `key`, or `make`'s, cached (`make` runs outside the lock: two callers
    /// may both make it, and the second's is kept).
    @inlinable public func value<Failure: Error>(for key: Key, orMake make: () throws(Failure) -> Value) throws(Failure) -> Value {
        if let value = value(for: key) { return value }
        let value = try make()
        insert(value, for: key)
        return value
    }

    /// Forgets `key`.
    public func remove(_ key: Key) {
        state.withLock { state in
            guard let slot = state.index.removeValue(forKey: key) else { return }
            let last = state.slots.count - 1
            if slot != last {
                state.slots[slot] = state.slots[last]
                state.index[state.slots[slot].key] = slot
            }
            state.slots.removeLast()
            if state.hand >= state.slots.count { state.hand = 0 }
        }
    }

    /// Forgets every entry whose key and value `shouldRemove` selects.
    public func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        state.withLock { state in
            let kept = state.slots.filter { !shouldRemove($0.key, $0.value) }
            guard kept.count != state.slots.count else { return }
            state.slots = kept
            state.index = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1.key, $0) })
            state.hand = 0
        }
    }

    /// How many entries are cached.
    public var count: Int { state.withLock { $0.slots.count } }
}
