import Foundation
import Testing
import TollgateMobile
import TollgatePolicy

/// The seed's articles scenarios (Oracle Mobile Cloud's Storage chapter) as a table: Ben and Art
/// are Authors (Read-Write), Dee an InactiveAuthor (Read-Only), Eva the Editor (Read-Write (All
/// Users)), Raj the Publisher (Read-Only (All Users)); a shared and an isolated "Articles"
/// collection. Every cell is the policy engine's decision over the compiled statements.
@Suite struct CollectionTests {
    static let roles = ["Ben": "Author", "Art": "Author", "Dee": "InactiveAuthor", "Eva": "Editor", "Raj": "Publisher"]

    static let shared = MobileCollection(
        name: "articles", kind: .shared, bucket: "magazine", prefix: "shared/",
        grants: [.readWrite: ["Author"], .readOnly: ["InactiveAuthor", "Publisher"], .readWriteAllUsers: [], .readOnlyAllUsers: []]
    )
    static let isolated = MobileCollection(
        name: "drafts", kind: .isolated, bucket: "magazine", prefix: "drafts/",
        grants: [.readWrite: ["Author"], .readOnly: ["InactiveAuthor"], .readWriteAllUsers: ["Editor"], .readOnlyAllUsers: ["Publisher"]],
        anonymous: true  // ignored: isolated collections never admit anonymous callers
    )
    static let open = MobileCollection(name: "news", kind: .shared, bucket: "magazine", prefix: "news/", anonymous: true)

    enum Act: String, Sendable { case read, write, delete, list }

    /// (caller, collection, whose object or space (isolated), act, allowed)
    static let table: [(String?, String, String?, Act, Bool)] = [
        // Shared: Ben and Art read and change any article; Dee and Raj only read.
        ("Ben", "articles", nil, .read, true), ("Ben", "articles", nil, .write, true), ("Ben", "articles", nil, .delete, true),
        ("Art", "articles", nil, .write, true), ("Art", "articles", nil, .list, true),
        ("Dee", "articles", nil, .read, true), ("Dee", "articles", nil, .list, true),
        ("Dee", "articles", nil, .write, false), ("Dee", "articles", nil, .delete, false),
        ("Raj", "articles", nil, .read, true), ("Raj", "articles", nil, .write, false),
        ("Eva", "articles", nil, .read, false), ("Eva", "articles", nil, .list, false),  // Editor is granted nothing in the shared one
        (nil, "articles", nil, .read, false), (nil, "articles", nil, .list, false),
        // Isolated: Ben and Art in their own spaces only.
        ("Ben", "drafts", "Ben", .read, true), ("Ben", "drafts", "Ben", .write, true), ("Ben", "drafts", "Ben", .delete, true),
        ("Ben", "drafts", "Ben", .list, true),
        ("Ben", "drafts", "Art", .read, false), ("Ben", "drafts", "Art", .write, false), ("Ben", "drafts", "Art", .list, false),
        ("Art", "drafts", "Art", .write, true), ("Art", "drafts", "Ben", .read, false),
        // Dee reads her own article about dogs, not Art's; cannot upload.
        ("Dee", "drafts", "Dee", .read, true), ("Dee", "drafts", "Dee", .list, true), ("Dee", "drafts", "Dee", .write, false),
        ("Dee", "drafts", "Art", .read, false),
        // Eva edits anyone's; Raj reads anyone's, changes nothing.
        ("Eva", "drafts", "Art", .read, true), ("Eva", "drafts", "Art", .write, true), ("Eva", "drafts", "Dee", .delete, true),
        ("Eva", "drafts", "Ben", .list, true), ("Eva", "drafts", "*", .list, true),
        ("Raj", "drafts", "Ben", .read, true), ("Raj", "drafts", "Ben", .list, true), ("Raj", "drafts", "*", .list, true),
        ("Raj", "drafts", "Ben", .write, false), ("Raj", "drafts", "Art", .delete, false),
        ("Ben", "drafts", "*", .list, false),
        // Anonymous: never in an isolated collection, whatever it says.
        (nil, "drafts", "Ben", .read, false), (nil, "drafts", "*", .list, false),
        // A shared collection open to anonymous callers: them, and every signed-in user, read and write.
        (nil, "news", nil, .read, true), (nil, "news", nil, .write, true), (nil, "news", nil, .list, true),
        ("Dee", "news", nil, .write, true), ("Raj", "news", nil, .delete, true),
    ]

    @Test(arguments: table.indices)
    func theSeedsArticlesScenarios(_ row: Int) throws {
        let (caller, name, owner, act, expected) = Self.table[row]
        let collections = [Self.shared, Self.isolated, Self.open]
        let collection = try #require(collections.first { $0.name == name })
        let role = caller.map { Self.roles[$0]! }
        let document = CollectionPolicy.document(role: role, collections: collections)
        let allowed: Bool
        if let document {
            let policy = try Policy.load(text: document, file: "collections")
            let context = PolicyContext(username: caller)
            let space = owner == "*" ? nil : owner
            switch act {
            case .list:
                var listing = context
                listing.setListing(prefix: collection.spacePrefix(space), delimiter: nil, maxKeys: nil)
                allowed = policy.evaluate(.listObjectsV2, bucket: collection.bucket, key: nil, context: listing).isAllowed
            case .read, .write, .delete:
                let operation: GatewayOperation = act == .read ? .getObject : act == .write ? .putObject : .deleteObject
                allowed = policy.evaluate(operation, bucket: collection.bucket, key: collection.key(id: "dogs", space: space), context: context).isAllowed
            }
        } else {
            allowed = false
        }
        #expect(allowed == expected, "\(caller ?? "anonymous") \(act) in \(name) (\(owner ?? "-"))")
    }

    @Test func keysMapBothWays() {
        #expect(Self.isolated.key(id: "dogs", space: "Art") == "drafts/Art/dogs")
        #expect(Self.shared.key(id: "dogs", space: "Art") == "shared/dogs")
        #expect(Self.isolated.locate(bucket: "magazine", key: "drafts/Art/dogs")! == ("dogs", "Art"))
        #expect(Self.shared.locate(bucket: "magazine", key: "shared/dogs")! == ("dogs", nil))
        // Outside, in another bucket, or deeper than an id can name: not the collection's.
        #expect(Self.shared.locate(bucket: "other", key: "shared/dogs") == nil)
        #expect(Self.shared.locate(bucket: "magazine", key: "news/dogs") == nil)
        #expect(Self.shared.locate(bucket: "magazine", key: "shared/a/b") == nil)
        #expect(Self.isolated.locate(bucket: "magazine", key: "drafts/Art") == nil)
        #expect(Self.isolated.locate(bucket: "magazine", key: "drafts/Art/x/y") == nil)
        #expect(!Self.isolated.anonymous && Self.open.anonymous)
    }

    @Test func namesPrefixesAndIDs() {
        #expect(MobileCollection.isValidName("FiF_UploadedImages"))
        for bad in ["", "a/b", "..", "a b", String(repeating: "x", count: 65)] { #expect(!MobileCollection.isValidName(bad)) }
        #expect(MobileCollection.prefixProblem("") == nil)
        #expect(MobileCollection.prefixProblem("a/b/") == nil)
        for bad in ["a", "/a/", "a//", "a/../", "a*/", "${user}/", "a\u{1}/"] { #expect(MobileCollection.prefixProblem(bad) != nil, "\(bad)") }
        #expect(ObjectID.problem("part1524") == nil)
        #expect(ObjectID.problem("résumé (1).pdf") == nil)
        for bad in ["", ".", "..", "a/b", "a\\b", "a\u{0}", String(repeating: "x", count: 513)] { #expect(ObjectID.problem(bad) != nil) }
    }

    @Test func recordsKeepTheirFieldsInUserMetadata() {
        let created = Date(timeIntervalSince1970: 1_700_000_000.123)
        let metadata = ObjectRecord.userMetadata(name: "Résumé 100%.pdf", createdBy: "ben@example.com", createdOn: created, modifiedBy: "eva")
        #expect(metadata.values.allSatisfy { $0.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F } })
        let modified = Date(timeIntervalSince1970: 1_700_000_100)
        let record = ObjectRecord(id: "r1", space: "ben", size: 12, etag: "abc", lastModified: modified, contentType: "application/pdf",
                                  userMetadata: metadata)
        #expect(record.name == "Résumé 100%.pdf")
        #expect(record.createdBy == "ben@example.com" && record.modifiedBy == "eva")
        #expect(abs(record.createdOn.timeIntervalSince(created)) < 0.002)
        #expect(record.modifiedOn == modified)
        // Written through S3 without them: the id is the name, the modifier the creator, the time both.
        let bare = ObjectRecord(id: "x", space: nil, size: 1, etag: "e", lastModified: modified, contentType: nil, userMetadata: [:])
        #expect(bare.name == "x" && bare.contentType == "application/octet-stream" && bare.createdOn == modified)
    }

    @Test func ordersAndQueries() throws {
        func record(_ id: String, _ name: String, _ size: Int64, by: String, at: Double) -> ObjectRecord {
            ObjectRecord(id: id, space: nil, name: name, contentLength: size, contentType: "text/plain", etag: id, createdBy: by,
                         createdOn: Date(timeIntervalSince1970: at), modifiedBy: by, modifiedOn: Date(timeIntervalSince1970: at))
        }
        let records = [record("b", "Bats", 30, by: "art", at: 3), record("a", "Cows", 10, by: "ben", at: 1), record("c", "Bugs", 10, by: "art", at: 2)]
        func ids(_ order: String) throws -> [String] { records.sorted(by: try #require(ListOrder(order)).precedes).map(\.id) }
        #expect(try ids("id") == ["a", "b", "c"])
        #expect(try ids("id:desc") == ["c", "b", "a"])
        #expect(try ids("name") == ["b", "c", "a"])
        #expect(try ids("name:desc") == ["a", "c", "b"])
        #expect(try ids("contentLength") == ["a", "c", "b"])  // ties by id
        #expect(try ids("contentLength:desc") == ["b", "a", "c"])
        #expect(try ids("modifiedOn:desc") == ["b", "c", "a"])
        #expect(try ids("createdBy") == ["b", "c", "a"])
        for bad in ["size", "name:up", "name:asc:desc", ""] { #expect(ListOrder(bad) == nil) }
        #expect(records.filter { objectMatches($0, query: "B") }.map(\.id) == ["b", "c"])
        #expect(records.filter { objectMatches($0, query: "art") }.map(\.id) == ["b", "c"])
        #expect(records.filter { objectMatches($0, query: "ART") }.isEmpty)
    }
}
