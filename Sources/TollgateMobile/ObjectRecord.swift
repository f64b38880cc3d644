import Foundation

/// What the Storage API says about an object: the seed's object metadata. The store keeps the
/// fields S3 has no place for as user metadata on the object itself (`x-amz-meta-created-by`, …,
/// visible to S3 and OSS clients as such), so every instance and every dialect sees them; an
/// object written through S3 or OSS without them shows its modifier as its creator.
public struct ObjectRecord: Sendable, Equatable {
    public var id: String
    public var space: String?
    /// The display name (`Oracle-Mobile-Name`); the id when none was given.
    public var name: String
    public var contentLength: Int64
    public var contentType: String
    public var etag: String
    public var createdBy: String
    public var createdOn: Date
    public var modifiedBy: String
    public var modifiedOn: Date

    public init(id: String, space: String?, name: String, contentLength: Int64, contentType: String, etag: String,
                createdBy: String, createdOn: Date, modifiedBy: String, modifiedOn: Date) {
        self.id = id
        self.space = space
        self.name = name
        self.contentLength = contentLength
        self.contentType = contentType
        self.etag = etag
        self.createdBy = createdBy
        self.createdOn = createdOn
        self.modifiedBy = modifiedBy
        self.modifiedOn = modifiedOn
    }

    /// The user metadata names (lower case, without `x-amz-meta-`).
    public enum Field {
        public static let createdBy = "created-by"
        public static let createdOn = "created-on"
        public static let modifiedBy = "modified-by"
        public static let name = "name"
    }

    /// The user metadata a write stores: values percent-encoded (UTF-8), as header values must be ASCII.
    public static func userMetadata(name: String, createdBy: String, createdOn: Date, modifiedBy: String) -> [String: String] {
        [
            Field.name: encode(name), Field.createdBy: encode(createdBy),
            Field.createdOn: String(Int64(createdOn.timeIntervalSince1970 * 1000)), Field.modifiedBy: encode(modifiedBy),
        ]
    }

    /// The record of a stored object from its store fields and user metadata.
    public init(id: String, space: String?, size: Int64, etag: String, lastModified: Date, contentType: String?,
                userMetadata: [String: String]) {
        let modifiedBy = userMetadata[Field.modifiedBy].flatMap(Self.decode) ?? ""
        let createdOn = userMetadata[Field.createdOn].flatMap(Int64.init).map { Date(timeIntervalSince1970: Double($0) / 1000) }
        self.init(id: id, space: space, name: userMetadata[Field.name].flatMap(Self.decode) ?? id, contentLength: size,
                  contentType: contentType ?? "application/octet-stream", etag: etag,
                  createdBy: userMetadata[Field.createdBy].flatMap(Self.decode) ?? modifiedBy, createdOn: createdOn ?? lastModified,
                  modifiedBy: modifiedBy, modifiedOn: lastModified)
    }

    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .init(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~@ ")) ?? ""
    }

    static func decode(_ text: String) -> String? {
        text.removingPercentEncoding
    }
}

/// `orderBy`: one property, ascending unless `:desc`.
public struct ListOrder: Sendable, Equatable {
    public enum Field: String, CaseIterable, Sendable {
        case id, name, modifiedBy, modifiedOn, createdBy, createdOn, contentLength
    }

    public var field: Field
    public var descending: Bool

    public init(field: Field = .id, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }

    /// `name`, `name:asc`, `contentLength:desc`, …; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let field = Field(rawValue: String(parts[0])) else { return nil }
        if parts.count == 2 {
            switch parts[1] {
            case "asc": descending = false
            case "desc": descending = true
            default: return nil
            }
        } else {
            descending = false
        }
        self.field = field
    }

    /// Whether the order needs each object's metadata (the store's listing gives id, size and time).
    public var needsMetadata: Bool {
        switch field {
        case .id, .modifiedOn, .contentLength: false
        case .name, .modifiedBy, .createdBy, .createdOn: true
        }
    }

    /// `a` before `b`; ties by space, then id, so that pages never overlap.
    public func precedes(_ a: ObjectRecord, _ b: ObjectRecord) -> Bool {
        func compare<T: Comparable>(_ x: T, _ y: T) -> Bool? { x == y ? nil : (descending ? x > y : x < y) }
        let decided: Bool? = switch field {
        case .id: nil
        case .name: compare(a.name, b.name)
        case .modifiedBy: compare(a.modifiedBy, b.modifiedBy)
        case .modifiedOn: compare(a.modifiedOn, b.modifiedOn)
        case .createdBy: compare(a.createdBy, b.createdBy)
        case .createdOn: compare(a.createdOn, b.createdOn)
        case .contentLength: compare(a.contentLength, b.contentLength)
        }
        if let decided { return decided }
        let tie = ((a.space ?? ""), a.id) < ((b.space ?? ""), b.id)
        let same = (a.space ?? "") == (b.space ?? "") && a.id == b.id
        return same ? false : (field == .id && descending ? !tie : tie)
    }
}

/// `q`: a case-sensitive substring of the id, name, creator or modifier.
public func objectMatches(_ record: ObjectRecord, query: String) -> Bool {
    query.isEmpty || record.id.contains(query) || record.name.contains(query) || record.createdBy.contains(query)
        || record.modifiedBy.contains(query)
}
