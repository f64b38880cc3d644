/// One CORS rule, in S3's shape (OSS uses the same one): which origins may send which methods
/// and headers, what the browser may read back, and how long it may cache a preflight answer.
/// The one rule type of the project: config.json's gateway default, a bucket's own rules as
/// the XML reader builds them and the store keeps them, and what the gateway matches.
public struct CORSRule: Sendable, Equatable, Codable {
    /// S3's optional `ID`, kept as given.
    public var id: String?
    public var allowedOrigins: [String]
    public var allowedMethods: [String]
    public var allowedHeaders: [String]
    public var exposeHeaders: [String]
    public var maxAgeSeconds: Int?

    public static let methods: Set<String> = ["GET", "PUT", "POST", "DELETE", "HEAD"]

    public init(id: String? = nil, allowedOrigins: [String], allowedMethods: [String], allowedHeaders: [String] = [],
                exposeHeaders: [String] = [], maxAgeSeconds: Int? = nil) {
        self.id = id
        self.allowedOrigins = allowedOrigins
        self.allowedMethods = allowedMethods
        self.allowedHeaders = allowedHeaders
        self.exposeHeaders = exposeHeaders
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// The names as stored (the store keeps rules as this JSON).
    enum CodingKeys: String, CodingKey {
        case id = "ID", allowedOrigins = "AllowedOrigins", allowedMethods = "AllowedMethods", allowedHeaders = "AllowedHeaders"
        case exposeHeaders = "ExposeHeaders", maxAgeSeconds = "MaxAgeSeconds"
    }

    /// Whether this rule admits a request from `origin` with `method` and, for a preflight, the
    /// `requestHeaders` it announces (compared case-insensitively).
    public func admits(origin: String, method: String, requestHeaders: [String] = []) -> Bool {
        guard allowedOrigins.contains(where: { Self.matches($0, origin) }), allowedMethods.contains(method) else { return false }
        return requestHeaders.allSatisfy { header in allowedHeaders.contains { Self.matches($0.lowercased(), header.lowercased()) } }
    }

    /// `Access-Control-Allow-Origin` for `origin`: `*` when the rule admits every origin.
    public func allowOrigin(for origin: String) -> String {
        allowedOrigins.contains("*") ? "*" : origin
    }

    /// S3's wildcard: `*` alone matches everything; otherwise at most one `*`, matching any run
    /// of characters but `/` (an origin has no path, so `https://*.example.com` cannot match
    /// `https://evil.com/.example.com`).
    public static func matches(_ pattern: String, _ value: String) -> Bool {
        if pattern == "*" { return true }
        guard let star = pattern.firstIndex(of: "*") else { return pattern == value }
        let prefix = pattern[..<star], suffix = pattern[pattern.index(after: star)...]
        guard value.count >= prefix.count + suffix.count, value.hasPrefix(prefix), value.hasSuffix(suffix) else { return false }
        return !value.dropFirst(prefix.count).dropLast(suffix.count).contains("/")
    }
}

extension Sequence<CORSRule> {
    /// The first rule that admits the request, as S3 picks it.
    public func first(admitting origin: String, method: String, requestHeaders: [String] = []) -> CORSRule? {
        first { $0.admits(origin: origin, method: method, requestHeaders: requestHeaders) }
    }
}
