import Foundation
import Logging
import Testing
@testable import TollgateTokenService

@Suite("token audit file")
struct TokenAuditTests {
    static func entry(_ n: Int, subject: String? = "alice", role: String = "default") -> TokenAuditEntry {
        TokenAuditEntry(time: "2026-11-23T10:00:0\(n % 10)Z", subject: subject, issuer: subject == nil ? nil : "https://id.example",
                        role: role, accessKeyId: "STS.KEY\(n)", expiration: "2026-11-23T10:15:00Z", via: "json",
                        clientAddress: "10.0.0.\(n)")
    }

    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-audit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func recordsAreWrittenAsJSONLinesWithMode0600AndReadBack() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = TokenAuditLog(dataDirectory: dir, logger: Logger(label: "test"), pool: .singleton)
        log.record(Self.entry(1))
        log.record(Self.entry(2, subject: nil, role: "readwrite"))
        log.flush()
        let text = try String(contentsOfFile: log.path, encoding: .utf8)
        #expect(text == """
            {"time":"2026-11-23T10:00:01Z","subject":"alice","issuer":"https://id.example","role":"default","access_key_id":"STS.KEY1","expiration":"2026-11-23T10:15:00Z","via":"json","client_address":"10.0.0.1"}
            {"time":"2026-11-23T10:00:02Z","subject":null,"issuer":null,"role":"readwrite","access_key_id":"STS.KEY2","expiration":"2026-11-23T10:15:00Z","via":"json","client_address":"10.0.0.2"}

            """)
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let read = TokenAuditLog.read(dataDirectory: dir)
        #expect(read.entries == [Self.entry(1), Self.entry(2, subject: nil, role: "readwrite")])
        #expect(read.skipped == 0)
    }

    @Test func aTornLastLineIsSkipped() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = TokenAuditLog(dataDirectory: dir, logger: Logger(label: "test"), pool: .singleton)
        log.record(Self.entry(1))
        log.flush()
        let handle = try #require(FileHandle(forWritingAtPath: log.path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"time":"2026-11-23T10:00:09Z","subj"#.utf8))
        try handle.close()
        let read = TokenAuditLog.read(dataDirectory: dir)
        #expect(read.entries == [Self.entry(1)])
        #expect(read.skipped == 1)
    }

    /// The running service writes what gathered, not a line per token: tokens issued a
    /// millisecond apart share writes (one per `gatherInterval` at most), and none is lost.
    @Test func theServiceGathersLinesIntoFewWrites() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = TokenAuditLog(dataDirectory: dir, logger: Logger(label: "test"), pool: .singleton)
        let service = Task { try await log.run() }
        defer { service.cancel() }
        let count = 50
        let started = ContinuousClock.now
        for n in 0..<count {
            log.record(Self.entry(n))
            try await Task.sleep(for: .milliseconds(1))
        }
        let elapsed = ContinuousClock.now - started
        for _ in 0..<500 where TokenAuditLog.read(dataDirectory: dir).entries.count < count {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(TokenAuditLog.read(dataDirectory: dir).entries.map(\.accessKeyId) == (0..<count).map { "STS.KEY\($0)" })
        // Without gathering, each token here has a write of its own (50).
        let bound = Int(elapsed / TokenAuditLog.gatherInterval) + 2
        #expect(log.writes <= bound, "\(log.writes) writes for \(count) lines in \(elapsed)")
    }

    @Test func theFileRotatesAtItsLimitKeepingTwoOldFiles() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // One record is about 200 bytes: every flush after the first starts a new file.
        let log = TokenAuditLog(dataDirectory: dir, maxBytes: 100, logger: Logger(label: "test"), pool: .singleton)
        for n in 1...5 {
            log.record(Self.entry(n))
            log.flush()
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(files == ["token-audit.jsonl", "token-audit.jsonl.1", "token-audit.jsonl.2"])
        // The oldest two went with the dropped files; the rest read oldest first.
        #expect(TokenAuditLog.read(dataDirectory: dir).entries.map(\.accessKeyId) == ["STS.KEY3", "STS.KEY4", "STS.KEY5"])
    }
}
