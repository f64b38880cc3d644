import Foundation

/// A collection's change feed, as documents the store keeps where every instance sees them
/// (`SharedDocuments`): one head, rewritten at each change with a compare-and-swap, and sealed
/// segments of older changes, written once. Pure: the server reads, changes and writes them.
///
/// A write through any dialect goes in three steps: `begin` records it as pending (before the
/// object is touched), the store commits it, then `commit` gives it the next sequence number and
/// removes the pending record. A writer that dies between the two leaves a pending record that
/// the next writer or reader resolves once it is `staleAfter` old: it looks at the object, and
/// publishes the change only if the object shows it happened. So the feed never shows a change
/// that did not commit, nor loses one that did; numbers are given at commit, so the feed is in
/// commit order and has no gaps a reader could skip.
public enum ChangeOp: String, Codable, Sendable, Equatable {
    case put, delete
}

public struct ChangeEntry: Codable, Sendable, Equatable {
    /// Its place in the feed (1, 2, …).
    public var seq: Int64
    /// When it committed, in milliseconds since 1970.
    public var time: Int64
    public var id: String
    /// The user's space (isolated collections).
    public var space: String?
    public var op: ChangeOp
    public var etag: String?
    public var size: Int64?
    /// Who made it: the user, or `anonymous`.
    public var by: String

    public init(seq: Int64 = 0, time: Int64, id: String, space: String?, op: ChangeOp, etag: String? = nil, size: Int64? = nil, by: String) {
        self.seq = seq
        self.time = time
        self.id = id
        self.space = space
        self.op = op
        self.etag = etag
        self.size = size
        self.by = by
    }

    enum CodingKeys: String, CodingKey {
        case seq = "s", time = "t", id = "k", space = "u", op = "o", etag = "e", size = "n", by = "b"
    }
}

/// A write under way (or whose writer died before it could say how it ended).
public struct PendingChange: Codable, Sendable, Equatable {
    /// Random: names this write in `commit`.
    public var write: String
    public var time: Int64
    public var id: String
    public var space: String?
    public var op: ChangeOp
    public var by: String

    public init(write: String, time: Int64, id: String, space: String?, op: ChangeOp, by: String) {
        self.write = write
        self.time = time
        self.id = id
        self.space = space
        self.op = op
        self.by = by
    }

    enum CodingKeys: String, CodingKey {
        case write = "w", time = "t", id = "k", space = "u", op = "o", by = "b"
    }
}

public struct SegmentReference: Codable, Sendable, Equatable {
    public var first: Int64
    public var last: Int64
    /// The newest change's time in it.
    public var time: Int64

    public init(first: Int64, last: Int64, time: Int64) {
        self.first = first
        self.last = last
        self.time = time
    }
}

public struct JournalHead: Codable, Sendable, Equatable {
    /// Random, made with the journal: a cursor of another journal (one made again after its
    /// documents were lost) is refused rather than misread.
    public var epoch: String
    /// The number the next change gets.
    public var next: Int64 = 1
    /// The first number still kept; changes before it were dropped after the retention.
    public var oldest: Int64 = 1
    public var entries: [ChangeEntry] = []
    public var pending: [PendingChange] = []
    /// Sealed segments, oldest first.
    public var segments: [SegmentReference] = []

    /// The head holds at most this many changes; then the oldest `sealCount` go to a segment.
    public static let capacity = 512
    public static let sealCount = 384
    /// Pending writes beyond this many are refused (`tooManyPending`): the head stays small.
    public static let maxPending = 1024

    public init(epoch: String) {
        self.epoch = epoch
    }

    public static func decode(_ bytes: [UInt8]) throws -> JournalHead {
        try JSONDecoder().decode(JournalHead.self, from: Data(bytes))
    }

    public func encoded() -> [UInt8] {
        // Sorted keys: the same head always gives the same bytes.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    /// The cursor that stands after every change so far.
    public var cursor: ChangeCursor { ChangeCursor(epoch: epoch, seq: next - 1) }

    public enum Refusal: Error, Equatable {
        case tooManyPending
    }

    /// Records writes about to happen.
    public mutating func begin(_ writes: [PendingChange]) throws(Refusal) {
        guard pending.count + writes.count <= Self.maxPending else { throw .tooManyPending }
        pending += writes
    }

    /// Publishes committed writes in the order given (numbering them), and forgets pending ones
    /// (`finished`: committed or not). Returns the segment to write when the head overflowed:
    /// its reference is already in `segments`, so the segment must be written before the head.
    public mutating func commit(_ committed: [ChangeEntry], finished: Set<String>) -> (SegmentReference, [ChangeEntry])? {
        pending.removeAll { finished.contains($0.write) }
        for var entry in committed {
            entry.seq = next
            next += 1
            entries.append(entry)
        }
        guard entries.count >= Self.capacity else { return nil }
        let sealed = Array(entries.prefix(Self.sealCount))
        entries.removeFirst(sealed.count)
        let reference = SegmentReference(first: sealed.first!.seq, last: sealed.last!.seq, time: sealed.map(\.time).max()!)
        segments.append(reference)
        return (reference, sealed)
    }

    /// Drops what is older than `retention` (milliseconds): whole segments, then head entries.
    /// Returns whether anything was dropped.
    @discardableResult
    public mutating func prune(now: Int64, retention: Int64) -> Bool {
        let cutoff = now - retention
        let before = (segments.count, entries.count)
        while let first = segments.first, first.time < cutoff { segments.removeFirst() }
        if segments.isEmpty { entries.removeAll { $0.time < cutoff } }
        oldest = segments.first?.first ?? entries.first?.seq ?? next
        return before != (segments.count, entries.count)
    }

    /// Pending writes older than `age` milliseconds: their writers are taken to have died.
    public func stale(now: Int64, age: Int64) -> [PendingChange] {
        pending.filter { now - $0.time >= age }
    }

    /// Where the changes after `cursor` are: `gone` when some were dropped (or the cursor is of
    /// another journal, or from the future), else the segments to read and whether the head has any.
    public enum Position: Equatable {
        case gone
        case after(seq: Int64, segments: [SegmentReference])
    }

    public func position(of cursor: ChangeCursor) -> Position {
        guard cursor.epoch == epoch, cursor.seq >= oldest - 1, cursor.seq < next else { return .gone }
        return .after(seq: cursor.seq, segments: segments.filter { $0.last > cursor.seq })
    }
}

/// Where a reader stands in a feed: after change `seq` of journal `epoch`. Opaque to clients.
public struct ChangeCursor: Sendable, Equatable, CustomStringConvertible {
    public var epoch: String
    public var seq: Int64

    public init(epoch: String, seq: Int64) {
        self.epoch = epoch
        self.seq = seq
    }

    public var description: String { "\(epoch).\(seq)" }

    /// Nil for anything this server did not hand out.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...64).contains(parts[0].count),
              parts[0].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }),
              parts[1].count <= 18, let seq = Int64(parts[1]), seq >= 0 else { return nil }
        self.init(epoch: String(parts[0]), seq: seq)
    }
}

/// A sealed segment's document.
public struct JournalSegment: Codable, Sendable, Equatable {
    public var entries: [ChangeEntry]

    public init(entries: [ChangeEntry]) {
        self.entries = entries
    }

    public static func decode(_ bytes: [UInt8]) throws -> JournalSegment {
        try JSONDecoder().decode(JournalSegment.self, from: Data(bytes))
    }

    public func encoded() -> [UInt8] {
        Array((try? JSONEncoder().encode(self)) ?? Data())
    }
}
