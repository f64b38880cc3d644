/// An async mutual-exclusion lock per string key (FIFO). Used to serialise appends to one
/// object, which write into the object's file in place. Callers pair `acquire` with `release`
/// on every path (the body runs in the caller's context, so it may hold non-Sendable values).
actor KeyedLock {
    private var held: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

    func acquire(_ key: String) async {
        if held.insert(key).inserted { return }
        await withCheckedContinuation { waiters[key, default: []].append($0) }
        // Ownership was handed over by `release`; `key` stays in `held`.
    }

    func release(_ key: String) {
        if var queue = waiters[key], !queue.isEmpty {
            let next = queue.removeFirst()
            waiters[key] = queue.isEmpty ? nil : queue
            next.resume()
        } else {
            held.remove(key)
        }
    }
}
