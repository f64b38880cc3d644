import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
@testable import TollgateGateway
import TollgateStore
import TollgateToken
@testable import TollgateServer
@testable import TollgateTokenService

private func scratch() throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-revocations-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory
}

private let t0 = Date(timeIntervalSince1970: 1_795_000_000)

private func claims(subject: String?, iat: Date = t0, role: String = "default") -> TokenClaims {
    let seconds = Int64(iat.timeIntervalSince1970)
    return TokenClaims(keyId: "k", accessKeyId: "STS.AAAAAAAAAAAAAAAAAAAAAAAA", issuedAt: seconds, expiresAt: seconds + 900,
                       subject: subject, role: role, sessionName: "s")
}

@Test func revokeWritesA0600FileThatAnotherStoreReadsAndTheServerReloads() throws {
    let directory = try scratch()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try RevocationStore(dataDirectory: directory, pool: .singleton)
    #expect(server.list.isEmpty)
    #expect(try server.reloadIfChanged() == false, "no file, no change")

    // The CLI is another process with its own store on the same directory.
    let cli = try RevocationStore(dataDirectory: directory, pool: .singleton)
    let entry = try cli.revoke(.subject, "alice", now: t0)
    #expect(entry == Revocation(kind: .subject, value: "alice", revokedAt: 1_795_000_000))
    let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/revocations.json")
    #expect((attributes[.posixPermissions] as? Int) == 0o600)
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp-") }.isEmpty)

    #expect(server.match(claims(subject: "alice")) == nil, "not yet reloaded")
    #expect(try server.reloadIfChanged() == true)
    #expect(server.match(claims(subject: "alice"))?.kind == .subject)
    #expect(server.match(claims(subject: "bob")) == nil)
    #expect(try server.reloadIfChanged() == false, "unchanged file")

    // A revocation through the server's store keeps the CLI's entry (each writer re-reads the file).
    try server.revoke(.role, "readwrite", now: t0)
    #expect(try RevocationStore(dataDirectory: directory, pool: .singleton).list.entries.map(\.value) == ["alice", "readwrite"])

    // A restart reads the file.
    let restarted = try RevocationStore(dataDirectory: directory, pool: .singleton)
    #expect(restarted.match(claims(subject: "alice"))?.kind == .subject)
}

@Test func aBrokenFileKeepsTheRevocationsInForceAndStopsAStart() throws {
    let directory = try scratch()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try RevocationStore(dataDirectory: directory, pool: .singleton)
    try store.revoke(.subject, "alice", now: t0)
    try "{not json".write(toFile: directory + "/revocations.json", atomically: true, encoding: .utf8)
    #expect(throws: RevocationStoreError.self) { try store.reloadIfChanged() }
    #expect(store.match(claims(subject: "alice")) != nil, "the last good list stays")
    #expect(throws: RevocationStoreError.self) { try RevocationStore(dataDirectory: directory, pool: .singleton) }
}

@Test func writingPrunesEntriesWhoseTokensHaveAllExpired() throws {
    let directory = try scratch()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try RevocationStore(dataDirectory: directory, maxTokenLifetime: 900, pool: .singleton)
    try store.revoke(.subject, "old", now: t0)
    try store.revoke(.subject, "new", now: t0.addingTimeInterval(900 + 60))
    #expect(store.list.entries.map(\.value) == ["new"])
    try store.revoke(.subject, "newer", now: t0.addingTimeInterval(900 + 60 + 10))
    #expect(store.list.entries.map(\.value) == ["new", "newer"])
}

@Test func theRootKeyAndEmptyValuesCannotBeRevoked() throws {
    let directory = try scratch()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try RevocationStore(dataDirectory: directory, pool: .singleton)
    #expect(throws: RevocationStoreError.self) { try store.revoke(.accessKeyId, "TGABCDEF", now: t0) }
    #expect(throws: RevocationStoreError.self) { try store.revoke(.subject, "", now: t0) }
    #expect(!FileManager.default.fileExists(atPath: directory + "/revocations.json"))
}

@Test func theAdminEndpointRefusesUnsignedAndNonRootCallers() async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    var state = fixture.state
    state.revocations = try RevocationStore(dataDirectory: fixture.directory + "/data", pool: .singleton)
    let log = CapturedLog()
    let app = Application(router: buildTokenRouter(state: state), logger: log.logger())
    try await app.test(.router) { client in
        try await client.execute(uri: "/admin/revoke", method: .post, body: ByteBuffer(string: #"{"Subject":"alice"}"#)) { response in
            #expect(response.status == .forbidden)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8)) as? [String: Any])
            #expect(json["StatusCode"] as? Int == 403)
            #expect(json["ErrorCode"] as? String == "AccessDenied")
        }
        // Signed by a key that is not the root's (the signature itself is not reached).
        let headers: HTTPFields = [
            .authorization: "AWS4-HMAC-SHA256 Credential=STS.AAAAAAAAAAAAAAAAAAAAAAAA/20260101/us-east-1/tollgate/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00",
            HTTPField.Name("x-amz-date")!: "20260101T000000Z",
            HTTPField.Name("x-amz-content-sha256")!: String(repeating: "0", count: 64),
        ]
        try await client.execute(uri: "/admin/revoke", method: .post, headers: headers, body: ByteBuffer(string: "{}")) { response in
            #expect(response.status == .forbidden)
            #expect(String(buffer: response.body).hasPrefix(#"{"StatusCode":403,"ErrorCode":""#))
        }
    }
    #expect(state.revocations?.list.isEmpty == true)
    #expect(log.all.filter { $0.contains("admin request refused") }.count == 2)
    #expect(!log.text.contains("Signature=00"))
}

/// The backend's documents, in memory, with versions and conditional writes as the S3 store
/// keeps them; `interfere` runs before each write (another instance writing first).
final class SharedDocumentsTwin: SharedDocuments, @unchecked Sendable {
    private let lock = NSLock()
    private var documents: [String: (bytes: [UInt8], version: String)] = [:]
    private var versions = 0
    var interfere: (() -> Void)?
    private(set) var reads = 0

    func read(_ name: String, ifChangedFrom version: String?) async throws -> SharedDocumentRead {
        lock.withLock {
            reads += 1
            guard let document = documents[name] else { return .absent }
            return document.version == version ? .unchanged : .document(bytes: document.bytes, version: document.version)
        }
    }

    /// Another instance's write, as it lands.
    func put(_ name: String, _ bytes: [UInt8]) {
        lock.withLock {
            versions += 1
            documents[name] = (bytes, "\"v\(versions)\"")
        }
    }

    func delete(_ name: String) async throws {
        lock.withLock { documents[name] = nil }
    }

    func write(_ name: String, _ bytes: [UInt8], replacing version: String?) async throws -> String {
        let interference = lock.withLock { () -> (() -> Void)? in
            defer { interfere = nil }
            return interfere
        }
        interference?()
        return try lock.withLock {
            guard documents[name]?.version == version else { throw StoreError.preconditionFailed }
            versions += 1
            documents[name] = (bytes, "\"v\(versions)\"")
            return "\"v\(versions)\""
        }
    }
}

/// Revocations in the storage backend: one instance records, the others see it at their next
/// refresh (a conditional read that costs nothing while nothing changed), and two instances
/// recording at once both land.
@Test func sharedRevocationsReachEveryInstanceAndNoWriteIsLost() async throws {
    let backend = SharedDocumentsTwin()
    let a = RevocationStore(shared: backend)
    let b = RevocationStore(shared: backend)
    #expect(try await b.refresh() == false)
    _ = try await a.record(.subject, "alice", now: t0)
    #expect(a.match(claims(subject: "alice"))?.kind == .subject)
    #expect(b.match(claims(subject: "alice")) == nil)
    #expect(try await b.refresh() == true)
    #expect(b.match(claims(subject: "alice"))?.kind == .subject)
    #expect(try await b.refresh() == false, "unchanged")

    // B records while another instance's write lands first: B reads again and adds to it.
    var other = a.list
    other.add(Revocation(kind: .role, value: "read", revokedAt: Int64(t0.timeIntervalSince1970)))
    let written = Array(try other.encoded())
    backend.interfere = { backend.put(RevocationStore.fileName, written) }
    _ = try await b.record(.subject, "bob", now: t0)
    #expect(try await a.refresh() == true)
    for store in [a, b] {
        #expect(store.match(claims(subject: "alice")) != nil && store.match(claims(subject: "bob")) != nil)
        #expect(store.match(claims(subject: "carol", role: "read")) != nil)
    }
}
