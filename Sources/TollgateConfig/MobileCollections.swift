import TollgateIdentity
import TollgateMobile
import TollgatePolicy
import TollgateStore

/// The collections of a configuration, with each role's permissions compiled to a policy.
public struct MobileCollections: Sendable {
    public let all: [MobileCollection]
    private let byName: [String: MobileCollection]
    /// Role name (`""`: anonymous callers) → its statements over the collections.
    private let policies: [String: Policy]

    public static let anonymousKey = ""

    package init(_ collections: [MobileCollection], roles: [String], file: String) throws(ConfigError) {
        all = collections
        byName = Dictionary(uniqueKeysWithValues: collections.map { ($0.name, $0) })
        var policies: [String: Policy] = [:]
        for role in roles + [Self.anonymousKey] {
            guard let text = CollectionPolicy.document(role: role.isEmpty ? nil : role, collections: collections) else { continue }
            do {
                policies[role] = try Policy.load(text: text, file: "\(file) (Collections, role \(role.isEmpty ? "anonymous" : role))")
            } catch {
                throw ConfigError(file: file, "Collections: the statements of role \(role) do not compile: \(error)")
            }
        }
        self.policies = policies
    }

    public static let none = try! MobileCollections([], roles: [], file: "")

    public var isEmpty: Bool { all.isEmpty }

    public subscript(name: String) -> MobileCollection? { byName[name] }

    /// The statements `role` (nil: anonymous) holds over the collections.
    public func policy(role: String?) -> Policy? { policies[role ?? Self.anonymousKey] }

    /// The collection holding `key` of `bucket`, with the object's id and space.
    public func locate(bucket: String, key: String) -> (collection: MobileCollection, id: String, space: String?)? {
        for collection in all {
            if let (id, space) = collection.locate(bucket: bucket, key: key) { return (collection, id, space) }
        }
        return nil
    }
}
