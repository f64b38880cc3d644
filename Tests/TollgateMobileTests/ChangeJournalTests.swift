import Foundation
import Testing
import TollgateMobile

@Suite struct ChangeJournalTests {
    static func entry(_ id: String, at time: Int64, _ op: ChangeOp = .put, space: String? = nil) -> ChangeEntry {
        ChangeEntry(time: time, id: id, space: space, op: op, etag: op == .put ? "e-\(id)" : nil, size: op == .put ? 1 : nil, by: "ben")
    }

    @Test func numbersAreGivenAtCommitInCommitOrder() throws {
        var head = JournalHead(epoch: "ab12")
        let a = PendingChange(write: "w1", time: 10, id: "a", space: nil, op: .put, by: "ben")
        let b = PendingChange(write: "w2", time: 11, id: "b", space: nil, op: .put, by: "ben")
        try head.begin([a])
        try head.begin([b])
        #expect(head.pending.count == 2 && head.entries.isEmpty)
        // b commits first: it is change 1.
        #expect(head.commit([Self.entry("b", at: 20)], finished: ["w2"]) == nil)
        #expect(head.commit([Self.entry("a", at: 21)], finished: ["w1"]) == nil)
        #expect(head.entries.map(\.id) == ["b", "a"] && head.entries.map(\.seq) == [1, 2])
        #expect(head.pending.isEmpty && head.next == 3)
        // A write that did not happen ends pending, publishes nothing.
        try head.begin([PendingChange(write: "w3", time: 30, id: "c", space: nil, op: .delete, by: "ben")])
        _ = head.commit([], finished: ["w3"])
        #expect(head.pending.isEmpty && head.next == 3 && head.cursor == ChangeCursor(epoch: "ab12", seq: 2))
    }

    @Test func theHeadSealsItsOldestChangesIntoSegments() throws {
        var head = JournalHead(epoch: "ab12")
        var sealed: [(SegmentReference, [ChangeEntry])] = []
        for index in 0..<(JournalHead.capacity * 2) {
            if let segment = head.commit([Self.entry("k\(index)", at: Int64(index))], finished: []) { sealed.append(segment) }
        }
        #expect(sealed.count >= 2)
        #expect(head.segments == sealed.map(\.0))
        #expect(head.entries.count < JournalHead.capacity)
        // Every number once, in order, across segments and head.
        let all = sealed.flatMap(\.1) + head.entries
        #expect(all.map(\.seq) == Array(1...Int64(JournalHead.capacity * 2)))
        #expect(sealed[0].0 == SegmentReference(first: 1, last: Int64(JournalHead.sealCount), time: Int64(JournalHead.sealCount - 1)))
        // A cursor inside the first segment reads from it; one in the head reads no segment.
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 5)) == .after(seq: 5, segments: head.segments))
        #expect(head.position(of: head.cursor) == .after(seq: head.next - 1, segments: []))
    }

    @Test func pruningDropsWhatIsPastTheRetentionAndOldCursorsAreGone() throws {
        var head = JournalHead(epoch: "ab12")
        for index in 0..<10 { _ = head.commit([Self.entry("k\(index)", at: Int64(index * 1000))], finished: []) }
        // Retention 5 s at t = 12 s: changes before 7 s are dropped (k0…k6), so numbers 1…7.
        let dropped = head.prune(now: 12_000, retention: 5_000)
        #expect(dropped)
        #expect(head.entries.map(\.id) == ["k7", "k8", "k9"] && head.oldest == 8)
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 7)) == .after(seq: 7, segments: []))
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 6)) == .gone)
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 0)) == .gone)
        // Another journal's cursor, or one from the future, is gone too.
        #expect(head.position(of: ChangeCursor(epoch: "cd34", seq: 9)) == .gone)
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 11)) == .gone)
        // Quiet for longer than the retention: everything dropped, yet the latest cursor stays good.
        let droppedAll = head.prune(now: 100_000, retention: 5_000)
        #expect(droppedAll)
        #expect(head.entries.isEmpty && head.oldest == 11)
        #expect(head.position(of: ChangeCursor(epoch: "ab12", seq: 10)) == .after(seq: 10, segments: []))
        let droppedAgain = head.prune(now: 100_000, retention: 5_000)
        #expect(!droppedAgain)
    }

    @Test func abandonedWritesAreFoundByAge() throws {
        var head = JournalHead(epoch: "ab12")
        try head.begin([PendingChange(write: "old", time: 1_000, id: "a", space: nil, op: .put, by: "ben"),
                        PendingChange(write: "new", time: 59_000, id: "b", space: nil, op: .put, by: "ben")])
        #expect(head.stale(now: 61_000, age: 60_000).map(\.write) == ["old"])
        // Pending records are bounded: a flood is refused, the head stays small.
        #expect(throws: JournalHead.Refusal.tooManyPending) {
            try head.begin((0..<JournalHead.maxPending).map { PendingChange(write: "w\($0)", time: 0, id: "x", space: nil, op: .put, by: "b") })
        }
    }

    @Test func headsAndSegmentsRoundTrip() throws {
        var head = JournalHead(epoch: "ab12")
        try head.begin([PendingChange(write: "w", time: 5, id: "dogs", space: "Art", op: .delete, by: "eva")])
        _ = head.commit([Self.entry("dogs", at: 6, .delete, space: "Art")], finished: [])
        #expect(try JournalHead.decode(head.encoded()) == head)
        #expect(head.encoded() == head.encoded())
        let segment = JournalSegment(entries: head.entries)
        #expect(try JournalSegment.decode(segment.encoded()) == segment)
        #expect(throws: (any Error).self) { try JournalHead.decode(Array("{\"epoch\": 1}".utf8)) }
    }

    @Test func cursorsAreWhatTheServerGave() {
        #expect(ChangeCursor("ab12.7") == ChangeCursor(epoch: "ab12", seq: 7))
        #expect(ChangeCursor(epoch: "ab12", seq: 7).description == "ab12.7")
        for bad in ["", "ab12", "ab12.", ".7", "AB12.7", "ab12.-1", "ab12.7.1", "zz.1", "ab12.99999999999999999999", "ab12. 7"] {
            #expect(ChangeCursor(bad) == nil, "\(bad)")
        }
    }
}
