import Foundation
import GRDB
import Testing
@testable import TollgateStore
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

/// `GroupCommit`: writes that wait for a busy writer share one transaction (one WAL sync),
/// and each caller still sees only its own write's outcome.
@Suite struct GroupCommitTests {
    struct Refused: Error, Equatable {}

    /// An index with a scratch table `t`, and a way to hold its writer busy.
    struct Fixture {
        let box: Sandbox
        let store: LocalObjectStore
        var index: MetadataIndex { store.index }

        init() async throws {
            box = try Sandbox()
            store = try box.open()
            try await store.index.pool.write { db in
                try db.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)")
            }
        }

        /// Holds the writer until the returned semaphore is signalled.
        func holdWriter() -> DispatchSemaphore {
            let gate = DispatchSemaphore(value: 0)
            index.pool.asyncWriteWithoutTransaction { _ in gate.wait() }
            return gate
        }

        /// Waits (5 s at most) until `count` writes wait for the writer.
        func waitForWaiting(_ count: Int) async throws {
            for _ in 0..<500 where index.commits.waiting < count {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(index.commits.waiting == count)
        }

        func keys() async throws -> [String] {
            try await index.pool.read { db in try String.fetchAll(db, sql: "SELECT k FROM t ORDER BY k") }
        }
    }

    @Test func waitingWritesShareOneTransactionAndKeepTheirResults() async throws {
        let fixture = try await Fixture()
        let index = fixture.index
        let gate = fixture.holdWriter()
        let before = index.commits.transactions.load(ordering: .relaxed)
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for i in 0..<20 {
                group.addTask {
                    let value = try await index.write(.nothing) { db in
                        try db.execute(sql: "INSERT INTO t (k, v) VALUES (?, ?)", arguments: [String(format: "k%02d", i), i])
                        return i * 10
                    }
                    return (i, value)
                }
            }
            try await fixture.waitForWaiting(20)
            gate.signal()
            for try await (i, value) in group { #expect(value == i * 10) }
        }
        #expect(index.commits.transactions.load(ordering: .relaxed) - before == 1)
        #expect(try await fixture.keys() == (0..<20).map { String(format: "k%02d", $0) })
        // An idle writer: a lone write commits at once, in a transaction of its own.
        _ = try await index.write(.nothing) { db in try db.execute(sql: "INSERT INTO t (k) VALUES ('lone')") }
        #expect(index.commits.transactions.load(ordering: .relaxed) - before == 2)
    }

    /// In one group: a write that throws rolls back only itself; one that meets a database
    /// error (a missing table, a full database) fails alone, and the rest commit after all.
    @Test func aFailingWriteFailsAloneInItsGroup() async throws {
        let fixture = try await Fixture()
        let index = fixture.index
        // Room for small rows, not for a 256 KiB one: SQLITE_FULL for that write only.
        try await index.pool.write { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(pages + 4)")
        }
        let gate = fixture.holdWriter()
        var outcomes: [Int: String] = [:]
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for i in 0..<10 {
                group.addTask {
                    let key = "k\(i)"
                    do {
                        try await index.write(.nothing) { db in
                            switch i {
                            case 3:
                                try db.execute(sql: "INSERT INTO t (k) VALUES (?)", arguments: [key])
                                throw Refused()
                            case 5: try db.execute(sql: "INSERT INTO missing (k) VALUES (?)", arguments: [key])
                            case 7: try db.execute(sql: "INSERT INTO t (k, v) VALUES (?, ?)", arguments: [key, Data(count: 256 * 1024)])
                            default: try db.execute(sql: "INSERT INTO t (k) VALUES (?)", arguments: [key])
                            }
                        }
                        return (i, "ok")
                    } catch is Refused {
                        return (i, "refused")
                    } catch let error as StoreError {
                        if case .storageFull = error { return (i, "full") }
                        if case .database = error { return (i, "database") }
                        return (i, "\(error)")
                    }
                }
            }
            try await fixture.waitForWaiting(10)
            gate.signal()
            for try await (i, outcome) in group { outcomes[i] = outcome }
        }
        var expected = Dictionary(uniqueKeysWithValues: (0..<10).map { ($0, "ok") })
        expected[3] = "refused"; expected[5] = "database"; expected[7] = "full"
        #expect(outcomes == expected)
        #expect(try await fixture.keys() == ["k0", "k1", "k2", "k4", "k6", "k8", "k9"])
    }

    /// Refuses the first commit it sees (GRDB rolls the transaction back and COMMIT fails).
    final class RefusingCommit: TransactionObserver, @unchecked Sendable {
        // @unchecked: used on the writer only.
        private var refused = false
        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
        func databaseDidChange(with event: DatabaseEvent) {}
        func databaseWillCommit() throws {
            guard !refused else { return }
            refused = true
            throw Refused()
        }
        func databaseDidCommit(_ db: Database) {}
        func databaseDidRollback(_ db: Database) {}
    }

    /// A commit that fails fails every write of its group: none is stored, each caller hears
    /// of it, and the next write commits.
    @Test func aFailedCommitFailsTheWholeGroup() async throws {
        let fixture = try await Fixture()
        let index = fixture.index
        let observer = RefusingCommit()
        index.pool.add(transactionObserver: observer, extent: .databaseLifetime)
        let gate = fixture.holdWriter()
        var failures = 0
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<6 {
                group.addTask {
                    do {
                        try await index.write(.nothing) { db in try db.execute(sql: "INSERT INTO t (k) VALUES (?)", arguments: ["k\(i)"]) }
                        return false
                    } catch {
                        return true
                    }
                }
            }
            try await fixture.waitForWaiting(6)
            gate.signal()
            for try await failed in group where failed { failures += 1 }
        }
        #expect(failures == 6)
        #expect(try await fixture.keys() == [])
        try await index.write(.nothing) { db in try db.execute(sql: "INSERT INTO t (k) VALUES ('after')") }
        #expect(try await fixture.keys() == ["after"])
    }

    /// Through the store: concurrent puts all commit, readable, with fewer transactions than
    /// puts when they waited together.
    @Test func concurrentPutsCommitTogether() async throws {
        let fixture = try await Fixture()
        let store = fixture.store
        try await store.createBucket("group")
        let before = fixture.index.commits.transactions.load(ordering: .relaxed)
        let gate = fixture.holdWriter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<12 {
                group.addTask { try await store.put("group", "k\(i)", "body \(i)") }
            }
            try await fixture.waitForWaiting(12)
            gate.signal()
            try await group.waitForAll()
        }
        #expect(fixture.index.commits.transactions.load(ordering: .relaxed) - before == 1)
        for i in 0..<12 { #expect(try await store.content("group", "k\(i)") == "body \(i)") }
    }
}
