import TollgateIdentity
import TollgateMobile
import TollgatePolicy
import TollgateStore

/// config.json's `Collections`: the mobile Storage API's collections, by name.
///
/// ```json
/// "Collections": {"articles": {"Type": "isolated", "Description": "…", "Bucket": "tollgate", "Prefix": "articles/",
///                              "ReadOnly": ["reader"], "ReadWrite": ["author"], "ReadOnlyAllUsers": [], "ReadWriteAllUsers": ["editor"],
///                              "Anonymous": false, "TimeToLiveSeconds": 86400, "NoStore": false, "ChangeRetentionSeconds": 604800}}
/// ```
package enum CollectionsConfig {
    static let keys = ["Type", "Description", "Bucket", "Prefix", "Anonymous", "TimeToLiveSeconds", "NoStore", "ChangeRetentionSeconds"]
        + CollectionPermission.allCases.map(\.rawValue)

    static func parse(_ value: JSONValue?, file: String, roles: Set<String>, defaultBucket: String?) throws(ConfigError) -> [MobileCollection] {
        guard let value, value != .null else { return [] }
        guard case .object(let members) = value else { throw ConfigError(file: file, "Collections must be an object of collection names") }
        var collections: [MobileCollection] = []
        var places: [(bucket: String, prefix: String, name: String)] = []
        for (name, item) in members.sorted(by: { $0.key < $1.key }) {
            let at = "Collections.\(name)"
            guard MobileCollection.isValidName(name) else {
                throw ConfigError(file: file, "Collections: collection name \"\(name)\" must be 1-64 of A-Z a-z 0-9 _ . -")
            }
            guard case .object(let fields) = item else { throw ConfigError(file: file, "\(at) must be an object") }
            if let unknown = fields.keys.filter({ !keys.contains($0) }).sorted().first {
                throw ConfigError(file: file, "\(at): unknown key \"\(unknown)\" (known: \(keys.joined(separator: ", ")))")
            }
            func string(_ key: String) throws(ConfigError) -> String? {
                switch fields[key] {
                case nil, .null?: return nil
                case .string(let text)?: return text
                default: throw ConfigError(file: file, "\(at).\(key) must be a string")
                }
            }
            func bool(_ key: String) throws(ConfigError) -> Bool {
                switch fields[key] {
                case nil, .null?: return false
                case .bool(let flag)?: return flag
                default: throw ConfigError(file: file, "\(at).\(key) must be true or false")
                }
            }
            func seconds(_ key: String, _ fallback: Int) throws(ConfigError) -> Int {
                switch fields[key] {
                case nil, .null?: return fallback
                case let given?:
                    guard let number = given.integer(in: 1...31_536_000) else {
                        throw ConfigError(file: file, "\(at).\(key) must be a whole number of seconds from 1 to 31536000")
                    }
                    return number
                }
            }
            guard let kindName = try string("Type") else {
                throw ConfigError(file: file, "\(at).Type is required: \"shared\" or \"isolated\"")
            }
            guard let kind = CollectionKind(rawValue: kindName) else {
                throw ConfigError(file: file, "\(at).Type must be \"shared\" or \"isolated\" (got \"\(kindName)\")")
            }
            guard let bucket = try string("Bucket") ?? defaultBucket else {
                throw ConfigError(file: file, "\(at).Bucket is required when config.json names no bucket (Buckets or Variables.BUCKET_NAME)")
            }
            guard StoreNames.isValidBucketName(bucket) else {
                throw ConfigError(file: file, "\(at).Bucket: \"\(bucket)\" is not a valid bucket name")
            }
            let prefix = try string("Prefix") ?? name + "/"
            if let problem = MobileCollection.prefixProblem(prefix) {
                throw ConfigError(file: file, "\(at).Prefix \(problem)")
            }
            var grants: [CollectionPermission: [String]] = [:]
            for permission in CollectionPermission.allCases {
                guard let given = fields[permission.rawValue], given != .null else { continue }
                guard case .array(let items) = given else { throw ConfigError(file: file, "\(at).\(permission.rawValue) must be an array of role names") }
                var names: [String] = []
                for item in items {
                    guard case .string(let role) = item else { throw ConfigError(file: file, "\(at).\(permission.rawValue) must be an array of role names") }
                    guard roles.contains(role) else {
                        throw ConfigError(file: file, "\(at).\(permission.rawValue): unknown role \"\(role)\" (roles: \(roles.sorted().joined(separator: ", ")))")
                    }
                    names.append(role)
                }
                if permission.allUsers, kind == .shared, !names.isEmpty {
                    throw ConfigError(file: file, "\(at).\(permission.rawValue) applies to isolated collections only (in a shared collection every user reads every object: use \(permission.writes ? "ReadWrite" : "ReadOnly"))")
                }
                grants[permission] = names
            }
            // Two collections over one place would show one object under two names, and the
            // feed of one would miss the other's changes.
            for other in places where other.bucket == bucket && (other.prefix.hasPrefix(prefix) || prefix.hasPrefix(other.prefix)) {
                throw ConfigError(file: file, "\(at): bucket \(bucket) prefix \"\(prefix)\" overlaps collection \(other.name)'s prefix \"\(other.prefix)\"")
            }
            places.append((bucket, prefix, name))
            collections.append(MobileCollection(
                name: name, kind: kind, description: try string("Description") ?? "", bucket: bucket, prefix: prefix, grants: grants,
                anonymous: try bool("Anonymous"), timeToLiveSeconds: try seconds("TimeToLiveSeconds", MobileCollection.defaultTimeToLive),
                noStore: try bool("NoStore"), changeRetentionSeconds: try seconds("ChangeRetentionSeconds", MobileCollection.defaultChangeRetention)
            ))
        }
        return collections
    }
}
