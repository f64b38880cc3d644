import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing
@testable import TollgateConfig
import TollgateCrypto
@testable import TollgateGateway
import TollgateMemoryStore
import TollgateMobile
import TollgateStore
@testable import TollgateServer
@testable import TollgateTokenService

/// The mobile Storage API through the token router, over the in-memory store, with HS256 login
/// tokens (the interop tests use real JWKS keys and real clients).
struct MobileFixture {
    static let secret = "mobile-test-hmac-secret-0123456789abcdef"
    let directory: String
    let state: TollgateState
    let store: MemoryObjectStore

    init(clock: @escaping @Sendable () -> Date = { Date() }) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-mobile-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/policy", withIntermediateDirectories: true)
        try Fixture.allPolicy.write(toFile: directory + "/policy/all.json", atomically: true, encoding: .utf8)
        let json = """
            {"AccessKeySecret": "mobile-root-secret-0123456789abcdefghijkl", "PolicyFile": "policy/all.json", "Buckets": ["magazine"],
             "Roles": {"Author": "policy/all.json", "Editor": "policy/all.json", "Reader": "policy/all.json"},
             "Authentication": {"AllowAnonymous": true,
               "Providers": [{"Issuer": "https://login.test", "Audiences": ["app"], "Algorithms": ["HS256"], "HMACSecretEnv": "LOGIN_SECRET"}],
               "RoleRules": [{"Claim": "role", "Match": "Equals", "Value": "author", "Role": "Author"},
                             {"Claim": "role", "Match": "Equals", "Value": "editor", "Role": "Editor"}],
               "DefaultRole": "Reader"},
             "Collections": {
               "articles": {"Type": "shared", "Description": "Articles", "ReadWrite": ["Author"], "ReadOnly": ["Reader"], "TimeToLiveSeconds": 600},
               "drafts": {"Type": "isolated", "ReadWrite": ["Author"], "ReadWriteAllUsers": ["Editor"], "NoStore": true},
               "news": {"Type": "shared", "Anonymous": true}}}
            """
        try json.write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        let environment = ["LOGIN_SECRET": Self.secret]
        let config = try TollgateConfig.load(path: directory + "/config.json", environment: environment)
        let snapshot = try ConfigSnapshot(path: directory + "/config.json", root: try RootCredentials.resolve(config), environment: environment, clock: clock)
        store = MemoryObjectStore()
        _ = try await store.ensureBuckets(["magazine"])
        var state = TollgateState(snapshot, clock: clock)
        state.store = store
        state.changes = ChangeFeed(directory: directory + "/shared", store: store, logger: Logger(label: "test"), pool: .singleton)
        self.state = state
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// An HS256 login token for `subject` with `role` as its claim.
    static func token(_ subject: String, role: String?) throws -> String {
        let header = Base64.encodeURL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let now = Int(Date().timeIntervalSince1970)
        let roleClaim = role.map { #","role":"\#($0)""# } ?? ""
        let payload = Base64.encodeURL(Array(#"{"iss":"https://login.test","aud":"app","sub":"\#(subject)","iat":\#(now),"exp":\#(now + 600)\#(roleClaim)}"#.utf8))
        let signature = Base64.encodeURL(try Crypto.hmacSHA256(key: Array(secret.utf8), "\(header).\(payload)"))
        return "\(header).\(payload).\(signature)"
    }

    func test(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try await Application(router: buildTokenRouter(state: state)).test(.router, body)
    }
}

private func headers(_ token: String?, _ more: [HTTPField.Name: String] = [:]) -> HTTPFields {
    var fields = HTTPFields()
    if let token { fields[.authorization] = "Bearer " + token }
    for (name, value) in more { fields[name] = value }
    return fields
}

private func json(_ buffer: ByteBuffer) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(buffer: buffer))) as? [String: Any] ?? [:]
}

private let root = "/mobile/platform/storage/collections"

@Test func theStorageAPIsObjectLifecycle() async throws {
    let fixture = try await MobileFixture()
    defer { fixture.remove() }
    let ben = try MobileFixture.token("ben", role: "author")
    try await fixture.test { client in
        // Create with If-None-Match: * (once), then replace, with the display name and type kept.
        var etag = ""
        try await client.execute(uri: root + "/articles/objects/part1524", method: .put,
                                 headers: headers(ben, [.contentType: "text/plain", .ifNoneMatch: "*", HTTPField.Name("Oracle-Mobile-Name")!: "Bugs.txt"]),
                                 body: ByteBuffer(string: "bugs v1")) { response in
            #expect(response.status == .created)
            #expect(response.headers[.location] == root + "/articles/objects/part1524")
            etag = response.headers[.eTag] ?? ""
            let body = json(response.body)
            #expect(body["id"] as? String == "part1524" && body["name"] as? String == "Bugs.txt" && body["createdBy"] as? String == "ben")
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .put, headers: headers(ben, [.ifNoneMatch: "*"]),
                                 body: ByteBuffer(string: "again")) { response in
            #expect(response.status == .preconditionFailed)
        }
        // Optimistic locking: the first replace with the ETag wins, the second gets 412.
        try await client.execute(uri: root + "/articles/objects/part1524", method: .put, headers: headers(ben, [.ifMatch: etag, .contentType: "text/plain"]),
                                 body: ByteBuffer(string: "bugs v2")) { response in
            #expect(response.status == .ok)
            #expect(json(response.body)["name"] as? String == "Bugs.txt", "the display name stays")
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .put, headers: headers(ben, [.ifMatch: etag]),
                                 body: ByteBuffer(string: "lost")) { response in
            #expect(response.status == .preconditionFailed)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben)) { response in
            #expect(response.status == .ok && String(buffer: response.body) == "bugs v2")
            #expect(response.headers[.contentType] == "text/plain")
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Created-By")!] == "ben")
            etag = response.headers[.eTag] ?? ""
        }
        // Get if newer, Accept, ranges.
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.ifNoneMatch: etag])) { response in
            #expect(response.status == .notModified)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.accept: "image/*"])) { response in
            #expect(response.status == .notAcceptable)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.accept: "text/*;q=0.5, image/png"])) { response in
            #expect(response.status == .ok)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.range: "bytes=0-3"])) { response in
            #expect(response.status == .partialContent && String(buffer: response.body) == "bugs")
            #expect(response.headers[.contentRange] == "bytes 0-3/7")
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.range: "bytes=0-1,5-6"])) { response in
            #expect(response.status == .partialContent)
            let type = response.headers[.contentType] ?? ""
            #expect(type.hasPrefix("multipart/byteranges; boundary="))
            let text = String(buffer: response.body)
            #expect(text.contains("Content-Range: bytes 0-1/7\r\n\r\nbu\r\n") && text.contains("Content-Range: bytes 5-6/7\r\n\r\nv2\r\n"))
            #expect(Int(response.headers[.contentLength] ?? "") == response.body.readableBytes)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben, [.range: "bytes=50-60"])) { response in
            #expect(response.status == .rangeNotSatisfiable)
        }
        // Generated ids: 201, Location, the id in the body.
        try await client.execute(uri: root + "/articles/objects", method: .post, headers: headers(ben, [.contentType: "application/json"]),
                                 body: ByteBuffer(string: "{}")) { response in
            #expect(response.status == .created)
            let id = json(response.body)["id"] as? String ?? ""
            #expect(UUID(uuidString: id) != nil)
            #expect(response.headers[.location] == root + "/articles/objects/" + id)
        }
        // Delete with a stale ETag: 412; with the current one: 204; then 404.
        try await client.execute(uri: root + "/articles/objects/part1524", method: .delete, headers: headers(ben, [.ifMatch: "\"0000\""])) { response in
            #expect(response.status == .preconditionFailed)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .delete, headers: headers(ben, [.ifMatch: etag])) { response in
            #expect(response.status == .noContent)
        }
        try await client.execute(uri: root + "/articles/objects/part1524", method: .get, headers: headers(ben)) { response in
            #expect(response.status == .notFound)
            #expect(json(response.body)["status"] as? Int == 404)
        }
        // Ids that could reach another key are refused.
        try await client.execute(uri: root + "/articles/objects/a%2Fb", method: .put, headers: headers(ben), body: ByteBuffer(string: "x")) { response in
            #expect(response.status == .badRequest)
        }
    }
}

@Test func permissionsAnonymousAccessAndIsolation() async throws {
    let fixture = try await MobileFixture()
    defer { fixture.remove() }
    let ben = try MobileFixture.token("ben", role: "author"), art = try MobileFixture.token("art", role: "author")
    let eva = try MobileFixture.token("eva", role: "editor"), dee = try MobileFixture.token("dee", role: nil)
    try await fixture.test { client in
        func status(_ method: HTTPRequest.Method, _ path: String, _ token: String?, body: String? = nil) async throws -> HTTPResponse.Status {
            try await client.execute(uri: root + path, method: method, headers: headers(token), body: body.map { ByteBuffer(string: $0) }) { $0.status }
        }
        // Shared: authors write, readers read, anonymous callers are asked to sign in.
        #expect(try await status(.put, "/articles/objects/cows", ben, body: "moo") == .created)
        #expect(try await status(.get, "/articles/objects/cows", dee) == .ok)
        #expect(try await status(.put, "/articles/objects/cows", dee, body: "x") == .forbidden)
        #expect(try await status(.get, "/articles/objects/cows", nil) == .unauthorized)
        #expect(try await status(.get, "/articles/objects/cows", "not-a-jwt") == .unauthorized)
        // Anonymous shared collection: everyone reads and writes.
        #expect(try await status(.put, "/news/objects/today", nil, body: "sunny") == .created)
        #expect(try await status(.put, "/news/objects/today", dee, body: "rain") == .ok)
        // Isolated: each author in their own space; the same id in two spaces.
        #expect(try await status(.put, "/drafts/objects/dogs", ben, body: "ben's dogs") == .created)
        #expect(try await status(.put, "/drafts/objects/dogs", art, body: "art's dogs") == .created)
        try await client.execute(uri: root + "/drafts/objects/dogs", method: .get, headers: headers(art)) { response in
            #expect(String(buffer: response.body) == "art's dogs")
        }
        #expect(try await status(.get, "/drafts/objects/dogs?user=ben", art) == .forbidden)
        #expect(try await status(.get, "/drafts/objects/dogs?user=ben", eva) == .ok)
        #expect(try await status(.put, "/drafts/objects/dogs?user=art", eva, body: "edited") == .ok)
        #expect(try await status(.get, "/drafts/objects/dogs", nil) == .unauthorized)
        #expect(try await status(.get, "/drafts/objects?user=*", ben) == .forbidden)
        try await client.execute(uri: root + "/drafts/objects?user=*&orderBy=name", method: .get, headers: headers(eva)) { response in
            #expect(response.status == .ok)
            let items = json(response.body)["items"] as? [[String: Any]] ?? []
            #expect(Set(items.compactMap { $0["user"] as? String }) == ["ben", "art"])
        }
        try await client.execute(uri: root + "/drafts/objects/dogs?user=art", method: .get, headers: headers(eva)) { response in
            #expect(String(buffer: response.body) == "edited")
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Modified-By")!] == "eva")
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Created-By")!] == "art")
        }
        // Collections: what each caller may see.
        try await client.execute(uri: root, method: .get, headers: headers(nil)) { response in
            #expect((json(response.body)["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["news"])
        }
        try await client.execute(uri: root + "/drafts", method: .get, headers: headers(ben)) { response in
            #expect(json(response.body)["userIsolated"] as? Bool == true)
        }
        #expect(try await status(.get, "/nothing", ben) == .notFound)
        // Offline caching headers.
        try await client.execute(uri: root + "/articles/objects/cows", method: .get,
                                 headers: headers(ben, [HTTPField.Name("Oracle-Mobile-Sync-Agent")!: "true"])) { response in
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Sync-Expires")!] != nil)
        }
        try await client.execute(uri: root + "/drafts/objects/dogs", method: .get,
                                 headers: headers(ben, [HTTPField.Name("Oracle-Mobile-Sync-Agent")!: "true"])) { response in
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Sync-No-Store")!] == "true")
            #expect(response.headers[HTTPField.Name("Oracle-Mobile-Sync-Expires")!] == nil)
        }
    }
}

@Test func listingsPageByCursorAndOrderByAnyField() async throws {
    let fixture = try await MobileFixture()
    defer { fixture.remove() }
    let ben = try MobileFixture.token("ben", role: "author")
    try await fixture.test { client in
        for index in 0..<25 {
            let id = String(format: "obj%02d", index)
            try await client.execute(uri: root + "/articles/objects/" + id, method: .put,
                                     headers: headers(ben, [HTTPField.Name("Oracle-Mobile-Name")!: "name\(24 - index)"]),
                                     body: ByteBuffer(string: String(repeating: "x", count: index))) { #expect($0.status == .created) }
        }
        var seen: [String] = []
        var next: String? = root + "/articles/objects?limit=10&totalResults=true"
        while let uri = next {
            next = nil
            try await client.execute(uri: uri, method: .get, headers: headers(ben)) { response in
                let body = json(response.body)
                seen += (body["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                #expect(body["totalResults"] as? Int == 25 || !uri.contains("totalResults"))
                let links = body["links"] as? [[String: String]] ?? []
                next = links.first { $0["rel"] == "next" }?["href"]
                if let next { #expect(next.contains("cursor=")) }
            }
        }
        #expect(seen == (0..<25).map { String(format: "obj%02d", $0) })
        // offset without a cursor lands on the same page.
        try await client.execute(uri: root + "/articles/objects?limit=5&offset=20", method: .get, headers: headers(ben)) { response in
            let body = json(response.body)
            #expect((body["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == (20..<25).map { String(format: "obj%02d", $0) })
            #expect(body["hasMore"] as? Bool == false)
            #expect((body["links"] as? [[String: String]])?.contains { $0["rel"] == "prev" } == true)
        }
        try await client.execute(uri: root + "/articles/objects?orderBy=contentLength:desc&limit=3", method: .get, headers: headers(ben)) { response in
            #expect((json(response.body)["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["obj24", "obj23", "obj22"])
        }
        try await client.execute(uri: root + "/articles/objects?orderBy=name&q=name1", method: .get, headers: headers(ben)) { response in
            let names = (json(response.body)["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
            #expect(names == ["name1", "name10", "name11", "name12", "name13", "name14", "name15", "name16", "name17", "name18", "name19"])
        }
        for bad in ["limit=0", "limit=1001", "offset=-1", "orderBy=size", "cursor=bm90LWhlcmU"] {
            try await client.execute(uri: root + "/articles/objects?" + bad, method: .get, headers: headers(ben)) { response in
                #expect(response.status == .badRequest, "\(bad)")
            }
        }
    }
}

@Test func theChangeFeedSeesEveryCommittedChangeOnceInOrder() async throws {
    let fixture = try await MobileFixture()
    defer { fixture.remove() }
    let ben = try MobileFixture.token("ben", role: "author"), art = try MobileFixture.token("art", role: "author")
    try await fixture.test { client in
        var cursor = ""
        try await client.execute(uri: root + "/drafts/changes", method: .get, headers: headers(ben)) { response in
            cursor = json(response.body)["cursor"] as? String ?? ""
        }
        #expect(ChangeCursor(cursor) != nil)
        try await client.execute(uri: root + "/drafts/objects/a", method: .put, headers: headers(ben), body: ByteBuffer(string: "1")) { _ in }
        try await client.execute(uri: root + "/drafts/objects/secret", method: .put, headers: headers(art), body: ByteBuffer(string: "2")) { _ in }
        try await client.execute(uri: root + "/drafts/objects/b", method: .put, headers: headers(ben), body: ByteBuffer(string: "3")) { _ in }
        try await client.execute(uri: root + "/drafts/objects/a", method: .delete, headers: headers(ben)) { _ in }
        try await client.execute(uri: root + "/drafts/changes?since=\(cursor)", method: .get, headers: headers(ben)) { response in
            let body = json(response.body)
            let items = body["items"] as? [[String: Any]] ?? []
            // Art's change is not Ben's to see.
            #expect(items.map { "\($0["op"]!) \($0["id"]!)" } == ["put a", "put b", "delete a"])
            #expect(items.first?["eTag"] as? String == "\"c4ca4238a0b923820dcc509a6f75849b\"")
            cursor = body["cursor"] as? String ?? ""
        }
        // Nothing newer: a waiting reader is answered when a change commits.
        let started = ContinuousClock.now
        async let waited: [String] = client.execute(uri: root + "/drafts/changes?since=\(cursor)&wait=20", method: .get, headers: headers(ben)) { response in
            (json(response.body)["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        }
        try await Task.sleep(for: .milliseconds(300))
        try await client.execute(uri: root + "/drafts/objects/c", method: .put, headers: headers(ben), body: ByteBuffer(string: "4")) { _ in }
        #expect(try await waited == ["c"])
        #expect(ContinuousClock.now - started < .seconds(10))
        // Bad cursors.
        try await client.execute(uri: root + "/drafts/changes?since=nonsense", method: .get, headers: headers(ben)) { #expect($0.status == .badRequest) }
        try await client.execute(uri: root + "/drafts/changes?since=0123.1", method: .get, headers: headers(ben)) { #expect($0.status == .gone) }
        try await client.execute(uri: root + "/drafts/changes?wait=61", method: .get, headers: headers(ben)) { #expect($0.status == .badRequest) }
    }
}

@Test func aWriterThatDiedIsPublishedOnlyIfTheObjectShowsIt() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-feed-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = MemoryObjectStore()
    _ = try await store.ensureBuckets(["magazine"])
    let collection = MobileCollection(name: "notes", kind: .shared, bucket: "magazine")
    let before = ChangeFeed(directory: directory, store: store, logger: Logger(label: "test"), pool: .singleton)
    let start = try await before.cursor(collection)
    // Two writers begin; one's object is written, then both die before publishing.
    _ = try await before.begin(collection, [("written", nil)], op: .put, by: "ben")
    _ = try await before.begin(collection, [("never", nil)], op: .put, by: "ben")
    try await put(store, "magazine", "notes/written", Array("x".utf8))
    try await Task.sleep(for: .milliseconds(20))
    // The process restarts: the same documents, a feed of its own.
    let after = ChangeFeed(directory: directory, store: store, logger: Logger(label: "test"), pool: .singleton)
    guard case .changes(let entries, let cursor, false) = try await after.changes(collection, after: start, limit: 100, visible: { _ in true }) else {
        Issue.record("the start cursor survives a restart")
        return
    }
    #expect(entries.map(\.id) == ["written"])
    #expect(cursor.epoch == start.epoch)
    // Once: a second read from the same cursor publishes nothing again.
    guard case .changes(let again, _, _) = try await after.changes(collection, after: start, limit: 100, visible: { _ in true }) else { return }
    #expect(again.map(\.id) == ["written"])
}

@Test func fileDocumentsCompareAndSwapAndSurviveARestart() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-docs-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let documents = FileDocuments(directory: directory, pool: .singleton)
    #expect(try await documents.read("a/b.json", ifChangedFrom: nil) == .absent)
    let first = try await documents.write("a/b.json", Array("one".utf8), replacing: nil)
    await #expect(throws: StoreError.preconditionFailed) { try await documents.write("a/b.json", Array("two".utf8), replacing: nil) }
    #expect(try await documents.read("a/b.json", ifChangedFrom: first) == .unchanged)
    let second = try await documents.write("a/b.json", Array("two".utf8), replacing: first)
    await #expect(throws: StoreError.preconditionFailed) { try await documents.write("a/b.json", Array("three".utf8), replacing: first) }
    #expect(second != first)
    let reopened = FileDocuments(directory: directory, pool: .singleton)
    guard case .document(let bytes, _) = try await reopened.read("a/b.json", ifChangedFrom: nil) else {
        Issue.record("the document is on disk")
        return
    }
    #expect(bytes == Array("two".utf8))
}

@Test func sealedSegmentsPastTheRetentionAreDeleted() async throws {
    final class Clock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_000_000))
    }
    let clock = Clock()
    let documents = SharedDocumentsTwin()
    let feed = ChangeFeed(documents: documents, store: MemoryObjectStore(), shared: true, clock: { clock.now.withLock { $0 } },
                          logger: Logger(label: "test"))
    let collection = MobileCollection(name: "notes", kind: .shared, bucket: "magazine", changeRetentionSeconds: 60)
    let start = try await feed.cursor(collection)
    func change(_ id: String) async throws {
        let ticket = try await feed.begin(collection, [(id, nil)], op: .put, by: "ben")
        await feed.commit(ticket, [ChangeFeed.Outcome(etag: "e", size: 1)])
    }
    for index in 0..<JournalHead.capacity { try await change("k\(index)") }
    #expect(try await documents.read("changes/notes/1.json", ifChangedFrom: nil) != .absent)
    // Every change once, in order, across the sealed segment and the head.
    guard case .changes(let all, _, false) = try await feed.changes(collection, after: start, limit: 1000, visible: { _ in true }) else {
        Issue.record("all changes are kept")
        return
    }
    #expect(all.map(\.id) == (0..<JournalHead.capacity).map { "k\($0)" })
    clock.now.withLock { $0 += 120 }
    try await change("late")
    #expect(try await documents.read("changes/notes/1.json", ifChangedFrom: nil) == .absent)
    guard case .gone = try await feed.changes(collection, after: start, limit: 10, visible: { _ in true }) else {
        Issue.record("a cursor from before the retention is gone")
        return
    }
}

/// Shared documents whose writes take a while (a backend's round trip), counting them.
final class SlowDocuments: SharedDocuments {
    let base = SharedDocumentsTwin()
    let writes = Mutex(0)
    func read(_ name: String, ifChangedFrom version: String?) async throws -> SharedDocumentRead {
        try await base.read(name, ifChangedFrom: version)
    }
    func write(_ name: String, _ bytes: [UInt8], replacing version: String?) async throws -> String {
        writes.withLock { $0 += 1 }
        try await Task.sleep(for: .milliseconds(5))
        return try await base.write(name, bytes, replacing: version)
    }
    func delete(_ name: String) async throws { try await base.delete(name) }
}

@Test func concurrentWritersShareHeadWritesAndEachChangeAppearsOnce() async throws {
    let documents = SlowDocuments()
    let feed = ChangeFeed(documents: documents, store: MemoryObjectStore(), shared: true, logger: Logger(label: "test"))
    let collection = MobileCollection(name: "notes", kind: .shared, bucket: "magazine")
    let start = try await feed.cursor(collection)
    let before = documents.writes.withLock { $0 }
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<64 {
            group.addTask {
                let ticket = try await feed.begin(collection, [("k\(index)", nil)], op: .put, by: "ben")
                await feed.commit(ticket, [ChangeFeed.Outcome(etag: "e\(index)", size: 1)])
            }
        }
        try await group.waitForAll()
    }
    guard case .changes(let all, _, false) = try await feed.changes(collection, after: start, limit: 1000, visible: { _ in true }) else {
        Issue.record("every change is kept")
        return
    }
    #expect(Set(all.map(\.id)) == Set((0..<64).map { "k\($0)" }) && all.count == 64)
    #expect(all.map(\.seq) == Array(1...64))
    // 128 steps (begin and commit of each) in far fewer compare-and-swaps of the head.
    let writes = documents.writes.withLock { $0 } - before
    #expect(writes < 32, "\(writes) head writes")
}
