import Foundation

/// What a revocation names: every token of a subject, one access key, or every token of a role.
public enum RevocationKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// Every token issued to the subject (app user) up to the revocation time.
    case subject = "Subject"
    /// The one token whose temporary access key id this is, whenever it was issued.
    case accessKeyId = "AccessKeyId"
    /// Every token of the role issued up to the revocation time.
    case role = "Role"
}

/// One recorded revocation. Times are whole seconds since 1970, as in `TokenClaims`.
public struct Revocation: Sendable, Hashable, Codable {
    public var kind: RevocationKind
    public var value: String
    /// Tokens of a subject or role issued at or before this second are revoked (a token's
    /// `issuedAt` has whole seconds, so one minted in the same second is revoked too).
    public var revokedAt: Int64

    public init(kind: RevocationKind, value: String, revokedAt: Int64) {
        self.kind = kind
        self.value = value
        self.revokedAt = revokedAt
    }

    enum CodingKeys: String, CodingKey {
        case kind = "Type", value = "Value", revokedAt = "RevokedAt"
    }

    /// Whether this revocation refuses the token with these claims.
    public func matches(_ claims: TokenClaims) -> Bool {
        switch kind {
        case .accessKeyId: claims.accessKeyId == value
        case .subject: claims.subject == value && claims.issuedAt <= revokedAt
        case .role: claims.role == value && claims.issuedAt <= revokedAt
        }
    }

    /// The first second at which no token this entry could match is still valid, so the entry
    /// can be dropped: a matching token was issued by `revokedAt` (plus the clock skew another
    /// issuer may have) and lives at most `maxTokenLifetime` seconds.
    public func prunableAt(maxTokenLifetime: Int64) -> Int64 {
        revokedAt + TokenService.allowedClockSkew + maxTokenLifetime
    }

    /// A value the revocation list accepts: 1 to 1024 bytes, no control characters.
    public static func validate(kind: RevocationKind, value: String) throws(RevocationError) {
        guard !value.isEmpty else { throw .invalidValue(kind, "must not be empty") }
        guard value.utf8.count <= 1024 else { throw .invalidValue(kind, "must be at most 1024 bytes") }
        guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidValue(kind, "must not contain control characters")
        }
        if kind == .accessKeyId, !value.hasPrefix("STS.") {
            throw .invalidValue(kind, "must be a temporary access key id (STS.…); the root credentials are rotated, not revoked")
        }
    }
}

public enum RevocationError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidValue(RevocationKind, String)
    /// The revocation file is not what this code writes.
    case malformedFile(String)

    public var description: String {
        switch self {
        case .invalidValue(let kind, let why): "\(kind.rawValue) \(why)"
        case .malformedFile(let why): "malformed revocation list: \(why)"
        }
    }
}

/// The set of revocations in force, indexed for the gateway's per-request check (three
/// dictionary lookups, none when the list is empty). A value type: pure, no files, no clock.
public struct RevocationList: Sendable, Equatable {
    /// Revocation time by value, one table per kind. Revoking again keeps the later time.
    private var tables: [RevocationKind: [String: Int64]] = [:]

    public init() {}

    public init(_ entries: [Revocation]) {
        for entry in entries { add(entry) }
    }

    public var isEmpty: Bool { tables.values.allSatisfy(\.isEmpty) }

    public var count: Int { tables.values.reduce(0) { $0 + $1.count } }

    /// Every entry, in a stable order (kind, then value).
    public var entries: [Revocation] {
        RevocationKind.allCases.flatMap { kind in
            (tables[kind] ?? [:]).sorted { $0.key < $1.key }.map { Revocation(kind: kind, value: $0.key, revokedAt: $0.value) }
        }
    }

    /// Records `entry`; a value revoked before keeps the later of the two times. Returns the
    /// entry now in force.
    @discardableResult
    public mutating func add(_ entry: Revocation) -> Revocation {
        let time = max(entry.revokedAt, tables[entry.kind]?[entry.value] ?? .min)
        tables[entry.kind, default: [:]][entry.value] = time
        return Revocation(kind: entry.kind, value: entry.value, revokedAt: time)
    }

    /// The entry that refuses these claims, or nil. Checked in the order access key, subject, role.
    public func match(_ claims: TokenClaims) -> Revocation? {
        if tables.isEmpty { return nil }
        if let time = tables[.accessKeyId]?[claims.accessKeyId] {
            return Revocation(kind: .accessKeyId, value: claims.accessKeyId, revokedAt: time)
        }
        if let subject = claims.subject, let time = tables[.subject]?[subject], claims.issuedAt <= time {
            return Revocation(kind: .subject, value: subject, revokedAt: time)
        }
        if let time = tables[.role]?[claims.role], claims.issuedAt <= time {
            return Revocation(kind: .role, value: claims.role, revokedAt: time)
        }
        return nil
    }

    /// Without the entries every token of which has expired by `now` (seconds since 1970).
    public func pruned(now: Int64, maxTokenLifetime: Int64) -> RevocationList {
        RevocationList(entries.filter { now < $0.prunableAt(maxTokenLifetime: maxTokenLifetime) })
    }

    // MARK: File format

    /// `{"Version":1,"Revocations":[{"RevokedAt":…,"Type":"Subject","Value":"alice"},…]}`.
    private struct File: Codable {
        var Version: Int
        var Revocations: [Revocation]
    }

    public static let fileVersion = 1

    /// The JSON text the revocation file holds (sorted keys, one entry per line).
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding strings and integers cannot fail.
        return (try? encoder.encode(File(Version: Self.fileVersion, Revocations: entries))) ?? Data()
    }

    /// Reads the revocation file; anything unexpected is an error (never an empty list, which
    /// would silently lift every revocation).
    public static func decode(_ data: Data) throws(RevocationError) -> RevocationList {
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw .malformedFile("\(error)")
        }
        guard file.Version == fileVersion else { throw .malformedFile("unsupported Version \(file.Version)") }
        for entry in file.Revocations {
            do { try Revocation.validate(kind: entry.kind, value: entry.value) } catch {
                throw .malformedFile("\(error)")
            }
        }
        return RevocationList(file.Revocations)
    }
}
