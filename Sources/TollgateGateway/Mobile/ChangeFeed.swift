import Foundation
import Logging
import NIOPosix
import Synchronization
import TollgateMobile
import TollgateStore

/// The change feeds of the mobile collections: one journal per collection (`JournalHead` and
/// its segments), kept as shared documents of the store, so that with the s3 backend every
/// instance writes to and reads from the same feed. See `JournalHead` for the three steps of a
/// write (`begin`, the store's commit, `commit`) and how a write whose writer died is resolved.
public final class ChangeFeed: Sendable {
    let documents: any SharedDocuments
    let store: any ObjectStore
    /// Whether other instances write to the same documents (the s3 backend): then a pending
    /// write is taken as abandoned only `staleAfter` after it began, and a waiting reader looks
    /// for their changes every `pollInterval`. Alone, pending writes from before this process
    /// started are abandoned at once.
    let shared: Bool
    let staleAfter: Int64
    let pollInterval: Duration
    let startedAt: Int64
    let clock: @Sendable () -> Date
    let logger: Logger

    private let heads = Mutex<[String: (version: String, head: JournalHead)]>([:])
    private let notifiers = Mutex<[String: Notifier]>([:])
    private let segments = Mutex<[String: JournalSegment]>([:])
    static let cachedSegments = 64

    public init(documents: any SharedDocuments, store: any ObjectStore, shared: Bool, staleAfterSeconds: Int = 60,
                clock: @escaping @Sendable () -> Date = { Date() }, logger: Logger) {
        self.documents = documents
        self.store = store
        self.shared = shared
        staleAfter = Int64(staleAfterSeconds) * 1000
        pollInterval = shared ? .seconds(1) : .seconds(5)
        self.clock = clock
        startedAt = Self.milliseconds(clock())
        self.logger = logger
    }

    /// The feed of the local store: documents in `directory` (the data directory's `shared/`).
    public convenience init(directory: String, store: any ObjectStore, logger: Logger, pool: NIOThreadPool) {
        self.init(documents: FileDocuments(directory: directory, pool: pool), store: store, shared: false, logger: logger)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    var now: Int64 { Self.milliseconds(clock()) }

    static func headName(_ collection: String) -> String { "changes/\(collection).json" }
    static func segmentName(_ collection: String, _ first: Int64) -> String { "changes/\(collection)/\(first).json" }

    // MARK: Writing

    /// A write about to happen, for `commit` to finish.
    public struct Ticket: Sendable {
        let collection: MobileCollection
        let writes: [PendingChange]
    }

    /// Step 1: records the writes as pending before the store is touched. Throws when the
    /// journal cannot be written: the write must then not happen.
    public func begin(_ collection: MobileCollection, _ objects: [(id: String, space: String?)], op: ChangeOp, by user: String) async throws -> Ticket {
        let time = now
        let writes = objects.map { PendingChange(write: Self.randomHex(12), time: time, id: $0.id, space: $0.space, op: op, by: user) }
        try await resolveAbandoned(collection)
        try await modify(collection) { head in
            try head.begin(writes)
            return nil
        }
        return Ticket(collection: collection, writes: writes)
    }

    /// Step 3: publishes what committed (`outcomes`: for each pending write, the object it left:
    /// its ETag and size for a put; nil for a write that did not happen), in this order. A
    /// failure is logged, not thrown: the object is written, and the pending record lets any
    /// later writer or reader publish it.
    public func commit(_ ticket: Ticket, _ outcomes: [Outcome?]) async {
        let time = now
        var entries: [ChangeEntry] = []
        for (write, outcome) in zip(ticket.writes, outcomes) {
            guard let outcome else { continue }
            entries.append(ChangeEntry(time: time, id: write.id, space: write.space, op: write.op, etag: outcome.etag, size: outcome.size, by: write.by))
        }
        let finished = Set(ticket.writes.map(\.write))
        let published = entries
        do {
            try await modify(ticket.collection) { head in head.commit(published, finished: finished) }
        } catch {
            logger.error("change feed: a committed change is not published yet; it will be within a minute", metadata: [
                "collection": "\(ticket.collection.name)", "store.error": "\(error)",
            ])
        }
    }

    public struct Outcome: Sendable {
        public var etag: String?
        public var size: Int64?
        public init(etag: String? = nil, size: Int64? = nil) {
            self.etag = etag
            self.size = size
        }
    }

    /// Runs `write` (the store's commit) between `begin` and `commit`: the ObjectInfo it returns
    /// is the put's outcome; a throw means it did not happen.
    public func recording(_ collection: MobileCollection, id: String, space: String?, by user: String,
                          _ write: () async throws -> ObjectInfo) async throws -> ObjectInfo {
        let ticket = try await begin(collection, [(id, space)], op: .put, by: user)
        do {
            let info = try await write()
            await commit(ticket, [Outcome(etag: info.etag, size: info.size)])
            return info
        } catch {
            await commit(ticket, [nil])
            throw error
        }
    }

    /// A delete between `begin` and `commit`.
    public func recordingDelete(_ collection: MobileCollection, id: String, space: String?, by user: String,
                                _ delete: () async throws -> Void) async throws {
        let ticket = try await begin(collection, [(id, space)], op: .delete, by: user)
        do {
            try await delete()
            await commit(ticket, [Outcome()])
        } catch {
            await commit(ticket, [nil])
            throw error
        }
    }

    /// Publishes the pending writes whose writers are taken to have died, as the object shows
    /// them: a put whose object was written at or after it began, a delete whose object is gone;
    /// anything else did not happen.
    func resolveAbandoned(_ collection: MobileCollection) async throws {
        // The head this instance last read or wrote will do: a pending record it does not show
        // yet is resolved by a later call. Only a head never seen is read for this.
        let head: JournalHead
        if let seen = heads.withLock({ $0[collection.name]?.head }) { head = seen } else { head = try await load(collection.name).head }
        let now = self.now
        let abandoned = head.pending.filter { now - $0.time >= staleAfter || (!shared && $0.time < startedAt) }
        guard !abandoned.isEmpty else { return }
        var resolved: [(write: String, entry: ChangeEntry)] = []
        for write in abandoned {
            let key = collection.key(id: write.id, space: write.space)
            var info: ObjectInfo?
            do { info = try await store.headObject(bucket: collection.bucket, key: key) } catch StoreError.noSuchKey {
                info = nil
            }
            let writtenSince = info.map { Self.milliseconds($0.lastModified) >= write.time - 1000 } ?? false
            switch write.op {
            case .put where writtenSince:
                resolved.append((write.write, ChangeEntry(time: Self.milliseconds(info!.lastModified), id: write.id, space: write.space,
                                                          op: .put, etag: info!.etag, size: info!.size, by: write.by)))
            case .delete where info == nil:
                resolved.append((write.write, ChangeEntry(time: now, id: write.id, space: write.space, op: .delete, by: write.by)))
            default:
                break
            }
        }
        let names = Set(abandoned.map(\.write))
        let found = resolved
        try await modify(collection) { head in
            // Only those still pending: their writer may have finished meanwhile.
            let still = Set(head.pending.map(\.write)).intersection(names)
            return head.commit(found.filter { still.contains($0.write) }.map(\.entry), finished: still)
        }
        logger.info("change feed: abandoned writes resolved", metadata: [
            "collection": "\(collection.name)", "writes": "\(abandoned.count)", "published": "\(resolved.count)",
        ])
    }

    // MARK: Reading

    public enum Page: Sendable {
        /// The cursor is older than what the feed keeps (or of another journal).
        case gone
        case changes([ChangeEntry], cursor: ChangeCursor, hasMore: Bool)
    }

    /// The current cursor: after every change so far.
    public func cursor(_ collection: MobileCollection) async throws -> ChangeCursor {
        try await resolveAbandoned(collection)
        return try await load(collection.name).head.cursor
    }

    /// Up to `limit` changes after `cursor` that `visible` lets the caller see, in order; the
    /// cursor returned stands after the last change looked at (seen or not).
    public func changes(_ collection: MobileCollection, after cursor: ChangeCursor, limit: Int,
                        visible: (ChangeEntry) -> Bool) async throws -> Page {
        try await resolveAbandoned(collection)
        let (head, _) = try await load(collection.name)
        guard case .after(let seq, let sealed) = head.position(of: cursor) else { return .gone }
        var found: [ChangeEntry] = []
        var last = seq
        func take(_ entries: [ChangeEntry]) -> Bool {
            for entry in entries where entry.seq > last {
                if found.count == limit { return false }
                last = entry.seq
                if visible(entry) { found.append(entry) }
            }
            return true
        }
        for reference in sealed {
            guard take(try await segment(collection.name, reference)) else {
                return .changes(found, cursor: ChangeCursor(epoch: head.epoch, seq: last), hasMore: true)
            }
        }
        let complete = take(head.entries)
        return .changes(found, cursor: ChangeCursor(epoch: head.epoch, seq: last), hasMore: !complete)
    }

    /// Returns once the feed has a change after `seq`, or at `deadline`.
    public func wait(_ collection: MobileCollection, after seq: Int64, until deadline: ContinuousClock.Instant) async throws {
        let notifier = notifiers.withLock { notifiers in
            if let existing = notifiers[collection.name] { return existing }
            let made = Notifier()
            notifiers[collection.name] = made
            return made
        }
        while ContinuousClock.now < deadline, !Task.isCancelled {
            let generation = notifier.generation
            if try await load(collection.name).head.next - 1 > seq { return }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return }
            await notifier.wait(since: generation, timeout: min(remaining, pollInterval))
        }
    }

    // MARK: Documents

    /// The head, conditionally read again (a version still current costs no transfer).
    func load(_ name: String) async throws -> (head: JournalHead, version: String) {
        let cached = heads.withLock { $0[name] }
        switch try await documents.read(Self.headName(name), ifChangedFrom: cached?.version) {
        case .unchanged:
            return (cached!.head, cached!.version)
        case .absent:
            // Made once, so that every cursor handed out names the journal that stays.
            let head = JournalHead(epoch: Self.randomHex(8))
            do {
                let version = try await documents.write(Self.headName(name), head.encoded(), replacing: nil)
                heads.withLock { $0[name] = (version, head) }
                return (head, version)
            } catch StoreError.preconditionFailed {
                return try await load(name)
            }
        case .document(let bytes, let version):
            let head: JournalHead
            do { head = try JournalHead.decode(bytes) } catch {
                throw StoreError.corrupted("the change feed \(Self.headName(name)) cannot be read: \(error)")
            }
            heads.withLock { $0[name] = (version, head) }
            return (head, version)
        }
    }

    /// Changes the head with `change`, compare-and-swap, again from the latest head when
    /// another writer came first; drops what is past the retention; writes a sealed segment
    /// before the head that names it.
    /// A change to a head: applied to whichever version is current when its batch is written
    /// (so it must depend on nothing but the head), returning a segment it sealed.
    typealias HeadChange = @Sendable (inout JournalHead) throws -> (SegmentReference, [ChangeEntry])?

    /// The changes waiting for one collection's head, and whether a writer is draining them.
    private struct Queue {
        var waiting: [(change: HeadChange, done: CheckedContinuation<Void, any Error>)] = []
        var draining = false
    }

    private let queues = Mutex<[String: Queue]>([:])

    /// Applies `change` to the collection's head. Changes that arrive while a head is being
    /// written wait and go together in the next write (group commit): one compare-and-swap (and,
    /// on the local store, one fsync) for all of them, however many writers there are. Throws
    /// what `change` throws (then nothing of it is written), or the store's error.
    func modify(_ collection: MobileCollection, _ change: @escaping HeadChange) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let starts = queues.withLock { queues -> Bool in
                queues[collection.name, default: Queue()].waiting.append((change, done))
                guard !queues[collection.name]!.draining else { return false }
                queues[collection.name]!.draining = true
                return true
            }
            if starts { Task { await self.drain(collection) } }
        }
    }

    /// Writes the waiting changes in batches until none are left.
    private func drain(_ collection: MobileCollection) async {
        while true {
            let batch = queues.withLock { queues -> [(change: HeadChange, done: CheckedContinuation<Void, any Error>)] in
                let batch = queues[collection.name]?.waiting ?? []
                queues[collection.name]?.waiting = []
                if batch.isEmpty { queues[collection.name]?.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            do {
                let outcomes = try await write(collection, batch.map(\.change))
                for (item, outcome) in zip(batch, outcomes) { item.done.resume(with: outcome) }
            } catch {
                for item in batch { item.done.resume(throwing: error) }
            }
        }
    }

    /// One batch: each change applied in order to the latest head (one that throws is left out),
    /// the result written with a compare-and-swap, again from the new head when another instance
    /// wrote first; segments sealed are written before the head that names them, segments past
    /// the retention deleted after it.
    private func write(_ collection: MobileCollection, _ changes: [HeadChange]) async throws -> [Result<Void, any Error>] {
        for attempt in 0..<64 {
            let (loaded, version) = try await load(collection.name)
            var head = loaded
            var outcomes: [Result<Void, any Error>] = []
            var sealed: [(SegmentReference, [ChangeEntry])] = []
            for change in changes {
                var attempted = head
                do {
                    if let segment = try change(&attempted) { sealed.append(segment) }
                    head = attempted
                    outcomes.append(.success(()))
                } catch {
                    outcomes.append(.failure(error))
                }
            }
            head.prune(now: now, retention: Int64(collection.changeRetentionSeconds) * 1000)
            let dropped = loaded.segments.filter { !head.segments.contains($0) }
            do {
                for (reference, entries) in sealed where head.segments.contains(reference) {
                    let name = Self.segmentName(collection.name, reference.first)
                    let bytes = JournalSegment(entries: entries).encoded()
                    do { _ = try await documents.write(name, bytes, replacing: nil) } catch StoreError.preconditionFailed {
                        // Written by an attempt that lost the head's race: the same numbers, rewritten.
                        if case .document(_, let existing) = try await documents.read(name, ifChangedFrom: nil) {
                            _ = try await documents.write(name, bytes, replacing: existing)
                        }
                    }
                    segments.withLock { $0[name] = nil }
                }
                let written = try await documents.write(Self.headName(collection.name), head.encoded(), replacing: version)
                heads.withLock { $0[collection.name] = (written, head) }
                if head.next != loaded.next { notifiers.withLock { $0[collection.name] }?.signal() }
                // Segments past the retention: no head names them any more.
                for segment in dropped {
                    let name = Self.segmentName(collection.name, segment.first)
                    segments.withLock { $0[name] = nil }
                    do { try await documents.delete(name) } catch {
                        logger.warning("change feed: an expired segment stays", metadata: ["segment": "\(name)", "store.error": "\(error)"])
                    }
                }
                return outcomes
            } catch StoreError.preconditionFailed {
                heads.withLock { $0[collection.name] = nil }
                try? await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 + attempt * 5))))
            }
        }
        throw StoreError.backendUnavailable("the change feed of \(collection.name) is written by too many writers at once; try again")
    }

    func segment(_ collection: String, _ reference: SegmentReference) async throws -> [ChangeEntry] {
        let name = Self.segmentName(collection, reference.first)
        if let cached = segments.withLock({ $0[name] }) { return cached.entries }
        guard case .document(let bytes, _) = try await documents.read(name, ifChangedFrom: nil) else {
            throw StoreError.corrupted("the change feed's segment \(name) is missing")
        }
        let segment: JournalSegment
        do { segment = try JournalSegment.decode(bytes) } catch {
            throw StoreError.corrupted("the change feed's segment \(name) cannot be read: \(error)")
        }
        segments.withLock { cache in
            if cache.count >= Self.cachedSegments { cache.removeAll() }
            cache[name] = segment
        }
        return segment.entries
    }

    static func randomHex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

/// Wakes the readers waiting on one collection's feed when this instance publishes a change.
final class Notifier: Sendable {
    private enum Slot {
        case waiting(CheckedContinuation<Void, Never>)
        /// Woken by a signal; `release` forgets it.
        case fired
        /// Released before it waited: it does not wait.
        case released
    }

    private struct State {
        var generation: UInt64 = 0
        var slots: [Int: Slot] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    var generation: UInt64 { state.withLock { $0.generation } }

    func signal() {
        let woken = state.withLock { state in
            state.generation &+= 1
            var woken: [CheckedContinuation<Void, Never>] = []
            for (id, slot) in state.slots {
                if case .waiting(let continuation) = slot {
                    woken.append(continuation)
                    state.slots[id] = .fired
                }
            }
            return woken
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns at the first signal after `generation` (at once if there was one), or after `timeout`.
    func wait(since generation: UInt64, timeout: Duration) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let resumeNow = self.state.withLock { state -> Bool in
                        if case .released? = state.slots[id] {
                            state.slots[id] = nil
                            return true
                        }
                        if state.generation != generation {
                            state.slots[id] = .fired
                            return true
                        }
                        state.slots[id] = .waiting(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
            // Exactly one release per wait: when the time is up, or when the wait ended first.
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.release(id)
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func release(_ id: Int) {
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            switch state.slots[id] {
            case .waiting(let continuation)?:
                state.slots[id] = nil
                return continuation
            case .fired?:
                state.slots[id] = nil
            case .released?, nil:
                state.slots[id] = .released
            }
            return nil
        }
        waiting?.resume()
    }
}
