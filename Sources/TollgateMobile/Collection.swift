/// Collections of the mobile Storage API (Oracle Mobile Cloud's, `/mobile/platform/storage`):
/// what config.json's `Collections` declares, where each maps onto the store, and who may do
/// what in it. Pure: no sockets, no files, no clocks.

/// Shared: one space every permitted user reads (and writes); isolated: a space per user.
public enum CollectionKind: String, Sendable, Equatable {
    case shared, isolated
}

/// The seed's four permissions, granted to roles.
public enum CollectionPermission: String, CaseIterable, Sendable, Hashable {
    case readOnly = "ReadOnly"
    case readWrite = "ReadWrite"
    /// Isolated collections only: every user's space.
    case readOnlyAllUsers = "ReadOnlyAllUsers"
    case readWriteAllUsers = "ReadWriteAllUsers"

    public var writes: Bool { self == .readWrite || self == .readWriteAllUsers }
    public var allUsers: Bool { self == .readOnlyAllUsers || self == .readWriteAllUsers }
}

public struct MobileCollection: Sendable, Equatable {
    /// The collection's id in URLs (case-sensitive).
    public var name: String
    public var kind: CollectionKind
    public var description: String
    /// Where its objects live: `prefix + id` (shared) or `prefix + user + "/" + id` (isolated).
    public var bucket: String
    public var prefix: String
    /// Permission → the roles it is granted to.
    public var grants: [CollectionPermission: [String]]
    /// Anonymous callers (and every authenticated one, whatever the role) may read and write:
    /// the seed's `Security_CollectionsAnonymousAccess`. Always false for an isolated collection.
    public var anonymous: Bool
    /// `Oracle-Mobile-Sync-Expires` is this far ahead of the answer.
    public var timeToLiveSeconds: Int
    /// `Oracle-Mobile-Sync-No-Store: true` instead: clients must not cache.
    public var noStore: Bool
    /// The change feed keeps changes (deletions included) at least this long.
    public var changeRetentionSeconds: Int

    public static let defaultTimeToLive = 86_400
    public static let defaultChangeRetention = 7 * 86_400

    public init(name: String, kind: CollectionKind, description: String = "", bucket: String, prefix: String? = nil,
                grants: [CollectionPermission: [String]] = [:], anonymous: Bool = false,
                timeToLiveSeconds: Int = defaultTimeToLive, noStore: Bool = false, changeRetentionSeconds: Int = defaultChangeRetention) {
        self.name = name
        self.kind = kind
        self.description = description
        self.bucket = bucket
        self.prefix = prefix ?? name + "/"
        self.grants = grants
        self.anonymous = kind == .shared && anonymous
        self.timeToLiveSeconds = timeToLiveSeconds
        self.noStore = noStore
        self.changeRetentionSeconds = changeRetentionSeconds
    }

    public var isolated: Bool { kind == .isolated }

    /// The permissions `role` holds here (nil: an anonymous caller).
    public func permissions(of role: String?) -> Set<CollectionPermission> {
        var held = Set<CollectionPermission>()
        if let role {
            for (permission, roles) in grants where roles.contains(role) { held.insert(permission) }
        }
        if anonymous { held.insert(.readWrite) }
        return held
    }

    /// The key prefix of a user's space (isolated), or of the whole collection.
    public func spacePrefix(_ space: String?) -> String {
        guard isolated, let space else { return prefix }
        return prefix + space + "/"
    }

    /// The store key of object `id` (in `space`, for an isolated collection).
    public func key(id: String, space: String?) -> String {
        spacePrefix(space) + id
    }

    /// The object a store key names in this collection: its id and (isolated) its space; nil
    /// for a key outside it, or one no object id can name.
    public func locate(bucket: String, key: String) -> (id: String, space: String?)? {
        guard bucket == self.bucket, key.hasPrefix(prefix) else { return nil }
        let rest = key.dropFirst(prefix.count)
        guard isolated else { return ObjectID.problem(String(rest)) == nil ? (String(rest), nil) : nil }
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let space = String(rest[..<slash]), id = String(rest[rest.index(after: slash)...])
        guard !space.isEmpty, ObjectID.problem(id) == nil else { return nil }
        return (id, space)
    }

    /// Collection names: 1-64 of `A-Z a-z 0-9 _ . -`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name != "." && name != ".."
            && name.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    /// A prefix is a store key prefix with no policy wildcards or variables in it (its
    /// statements are compiled from it), ending with `/` unless empty.
    public static func prefixProblem(_ prefix: String) -> String? {
        if prefix.isEmpty { return nil }
        if !prefix.hasSuffix("/") { return "must end with \"/\"" }
        if prefix.hasPrefix("/") { return "must not start with \"/\"" }
        if prefix.utf8.count > 512 { return "is longer than 512 bytes" }
        for scalar in prefix.unicodeScalars {
            switch scalar {
            case "*", "?", "$", "\\": return "must not contain \"\(scalar)\""
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: return "must not contain control characters"
            default: continue
            }
        }
        if prefix.split(separator: "/", omittingEmptySubsequences: false).dropLast().contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            return "must not have empty, \".\" or \"..\" segments"
        }
        return nil
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}

/// Object ids: what the last path segment names, decoded.
public enum ObjectID {
    public static let maxBytes = 512

    /// Nil when `id` can name an object; otherwise why not. No `/` (an id is one segment of the
    /// key, never a way into another space), no `.`/`..`, no control characters.
    public static func problem(_ id: String) -> String? {
        if id.isEmpty { return "the object id is empty" }
        if id.utf8.count > maxBytes { return "the object id is longer than \(maxBytes) bytes" }
        if id == "." || id == ".." { return "the object id cannot be \"\(id)\"" }
        for scalar in id.unicodeScalars {
            if scalar == "/" || scalar == "\\" { return "the object id contains \"\(scalar)\"" }
            if scalar.value < 0x20 || scalar.value == 0x7F { return "the object id contains a control character" }
        }
        return nil
    }
}
