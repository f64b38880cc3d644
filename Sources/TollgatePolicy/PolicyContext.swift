import Foundation

/// The type of a condition key, which decides the operators it accepts.
enum ConditionKeyType: Sendable {
    case string, ip, bool, date, numeric
    /// Keys Tollgate does not know (`jwt:*`, other `aws:`/`acs:`/`oss:`/`s3:` keys): any
    /// operator except IpAddress.
    case any
}

/// Condition key spellings: RAM and IAM aliases are folded to one lowercase canonical key
/// when a policy is loaded and when a request context is built.
public enum ConditionKeys {
    static let aliases: [String: String] = [
        "acs:sourceip": "aws:sourceip",
        "acs:securetransport": "aws:securetransport",
        "acs:currenttime": "aws:currenttime",
        "acs:useragent": "aws:useragent",
        "acs:referer": "aws:referer",
        "oss:prefix": "s3:prefix",
        "oss:delimiter": "s3:delimiter",
        "oss:maxkeys": "s3:max-keys",
        "oss:max-keys": "s3:max-keys",
        "user": "aws:username",
        "acs:username": "aws:username",
        "acs:userid": "aws:userid",
    ]

    static let types: [String: ConditionKeyType] = [
        "aws:sourceip": .ip,
        "aws:securetransport": .bool,
        "aws:currenttime": .date,
        "aws:epochtime": .date,
        "aws:useragent": .string,
        "aws:referer": .string,
        "s3:prefix": .string,
        "s3:delimiter": .string,
        "s3:max-keys": .numeric,
        "aws:username": .string,
        "aws:userid": .string,
    ]

    static let namespaces: Set<String> = ["aws", "acs", "oss", "s3", "jwt"]

    /// The canonical (lowercase) form of a key: `acs:SourceIp` → `aws:sourceip`,
    /// `oss:Prefix` → `s3:prefix`, `${user}` → `aws:username`.
    public static func canonical(_ key: String) -> String {
        let lowered = key.lowercased()
        return aliases[lowered] ?? lowered
    }

    static func type(ofCanonical key: String) -> ConditionKeyType {
        types[key] ?? .any
    }

    /// Whether a key may appear in a condition: a known key, or `ns:name` in a known namespace.
    static func isAcceptable(canonical key: String) -> Bool {
        if types[key] != nil { return true }
        guard let colon = key.firstIndex(of: ":") else { return false }
        let ns = key[..<colon]
        let name = key[key.index(after: colon)...]
        return namespaces.contains(String(ns)) && !name.isEmpty
    }

    /// Whether requests carry the key: one the gateway fills (the table above), a `jwt:` claim
    /// carried from the login token, or an `aws:PrincipalTag/` session tag.
    static func isSupplied(canonical key: String) -> Bool {
        types[key] != nil || key.hasPrefix("jwt:") || key.hasPrefix("aws:principaltag/")
    }

    /// The supplied key (in any spelling) nearest to an unsupplied one, in lowercase.
    static func suggestion(for canonical: String) -> String? {
        Spelling.closest(to: canonical, among: (Array(types.keys) + Array(aliases.keys)).filter { $0.contains(":") }.sorted())
    }

    /// The canonical key for a `${name}` policy variable, nil when not a usable key.
    static func variableKey(_ name: String) -> String? {
        let key = canonical(name)
        return isAcceptable(canonical: key) ? key : nil
    }
}

/// What is known about a request when it is authorised: condition key → values.
///
/// Keys are case-insensitive and take either spelling (`acs:SourceIp` = `aws:SourceIp`). Pure
/// value: the caller supplies the time (`now`), the client address and the token's identity.
public struct PolicyContext: Sendable, Hashable {
    private(set) var values: [String: [String]] = [:]

    public init() {}

    /// A context from `key: value` pairs (any spelling of the keys).
    public init(_ pairs: [String: String]) {
        for (k, v) in pairs { set(k, v) }
    }

    /// The common gateway fields in one call; nil leaves a key absent.
    public init(
        now: Date? = nil,
        sourceIp: String? = nil,
        secureTransport: Bool? = nil,
        username: String? = nil,
        userid: String? = nil,
        userAgent: String? = nil,
        referer: String? = nil,
        jwtClaims: [String: String] = [:]
    ) {
        if let now { setTime(now) }
        if let sourceIp { set("aws:SourceIp", sourceIp) }
        if let secureTransport { set("aws:SecureTransport", secureTransport ? "true" : "false") }
        if let username { set("aws:username", username) }
        if let userid { set("aws:userid", userid) }
        if let userAgent { set("aws:UserAgent", userAgent) }
        if let referer { set("aws:Referer", referer) }
        // Claims carried from app authentication: `NAME` is `jwt:NAME`; session tags arrive
        // already named `aws:PrincipalTag/KEY`.
        for (claim, value) in jwtClaims { set(claim.contains(":") ? claim : "jwt:" + claim, value) }
    }

    /// Sets one value for a key (replacing any earlier values).
    public mutating func set(_ key: String, _ value: String) {
        values[ConditionKeys.canonical(key)] = [value]
    }

    /// Sets several values for a multi-valued key (used with `ForAnyValue:`/`ForAllValues:`).
    public mutating func set(_ key: String, values newValues: [String]) {
        values[ConditionKeys.canonical(key)] = newValues
    }

    /// Appends a value to a key.
    public mutating func add(_ key: String, _ value: String) {
        values[ConditionKeys.canonical(key), default: []].append(value)
    }

    /// Sets `aws:CurrentTime` and `aws:EpochTime` from `now`.
    public mutating func setTime(_ now: Date) {
        let epoch = String(Int64(now.timeIntervalSince1970.rounded(.down)))
        values["aws:currenttime"] = [epoch]
        values["aws:epochtime"] = [epoch]
    }

    /// Sets the listing parameters (`s3:prefix`, `s3:delimiter`, `s3:max-keys`) of a list request.
    public mutating func setListing(prefix: String?, delimiter: String?, maxKeys: Int?) {
        if let prefix { set("s3:prefix", prefix) }
        if let delimiter { set("s3:delimiter", delimiter) }
        if let maxKeys { set("s3:max-keys", String(maxKeys)) }
    }

    /// The values of a key (any spelling), nil when absent.
    public func values(for key: String) -> [String]? {
        values[ConditionKeys.canonical(key)]
    }

    func values(canonical key: String) -> [String]? {
        values[key]
    }

    /// The value used for `${key}`: only a key with exactly one value substitutes.
    func singleValue(canonical key: String) -> String? {
        guard let v = values[key], v.count == 1 else { return nil }
        return v[0]
    }
}
