import HTTPTypes
import TollgateCORS
import TollgateIdentity

/// CORS for browser apps, from config.json's `CORS` section:
///
///     "CORS": {
///       "Gateway": [{"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT"],
///                    "AllowedHeaders": ["*"], "ExposeHeaders": [], "MaxAgeSeconds": 3600}],
///       "TokenEndpoint": ["https://app.example.com"]
///     }
///
/// Absent or empty: no CORS headers, as before. Reloads with the rest of the configuration.
public struct CORSSettings: Sendable, Equatable {
    package var gateway: [CORSRule] = []
    var tokenOrigins: [String] = []

    /// Headers every gateway answer lets a browser read, besides a rule's own.
    package static let exposedByDefault = ["ETag", "x-amz-request-id", "x-oss-request-id", "x-oss-hash-crc64ecma", "x-oss-next-append-position"]

    static let keys = ["Gateway", "TokenEndpoint"]
    static let ruleKeys = ["AllowedOrigins", "AllowedMethods", "AllowedHeaders", "ExposeHeaders", "MaxAgeSeconds"]

    static func parse(_ value: JSONValue?, file: String) throws(ConfigError) -> CORSSettings {
        var settings = CORSSettings()
        guard let value, value != .null else { return settings }
        guard case .object(let members) = value else { throw ConfigError(file: file, "CORS must be an object") }
        if let unknown = members.keys.filter({ !keys.contains($0) }).sorted().first {
            throw ConfigError(file: file, "CORS: unknown key \"\(unknown)\" (known: \(keys.joined(separator: ", ")))")
        }
        settings.tokenOrigins = try strings(members["TokenEndpoint"], "CORS.TokenEndpoint", file: file)
        for origin in settings.tokenOrigins { try checkOrigin(origin, "CORS.TokenEndpoint", file: file) }
        switch members["Gateway"] {
        case nil, .null?: break
        case .array(let rules)?:
            guard rules.count <= 100 else { throw ConfigError(file: file, "CORS.Gateway: at most 100 rules") }
            for (index, rule) in rules.enumerated() {
                settings.gateway.append(try parseRule(rule, "CORS.Gateway[\(index)]", file: file))
            }
        default: throw ConfigError(file: file, "CORS.Gateway must be an array of rules")
        }
        return settings
    }

    static func parseRule(_ value: JSONValue, _ path: String, file: String) throws(ConfigError) -> CORSRule {
        guard case .object(let members) = value else { throw ConfigError(file: file, "\(path) must be an object") }
        if let unknown = members.keys.filter({ !ruleKeys.contains($0) }).sorted().first {
            throw ConfigError(file: file, "\(path): unknown key \"\(unknown)\" (known: \(ruleKeys.joined(separator: ", ")))")
        }
        var rule = CORSRule(allowedOrigins: try strings(members["AllowedOrigins"], "\(path).AllowedOrigins", file: file),
                            allowedMethods: try strings(members["AllowedMethods"], "\(path).AllowedMethods", file: file))
        guard !rule.allowedOrigins.isEmpty, !rule.allowedMethods.isEmpty else {
            throw ConfigError(file: file, "\(path) needs AllowedOrigins and AllowedMethods")
        }
        for origin in rule.allowedOrigins { try checkOrigin(origin, "\(path).AllowedOrigins", file: file) }
        for method in rule.allowedMethods where !CORSRule.methods.contains(method) {
            throw ConfigError(file: file, "\(path).AllowedMethods: \"\(method)\" is not one of GET, PUT, POST, DELETE, HEAD")
        }
        rule.allowedHeaders = try strings(members["AllowedHeaders"], "\(path).AllowedHeaders", file: file)
        for header in rule.allowedHeaders where header.filter({ $0 == "*" }).count > 1 {
            throw ConfigError(file: file, "\(path).AllowedHeaders: \"\(header)\" has more than one *")
        }
        rule.exposeHeaders = try strings(members["ExposeHeaders"], "\(path).ExposeHeaders", file: file)
        for header in rule.exposeHeaders where header.contains("*") || HTTPField.Name(header) == nil {
            throw ConfigError(file: file, "\(path).ExposeHeaders: \"\(header)\" is not a header name")
        }
        switch members["MaxAgeSeconds"] {
        case nil, .null?: break
        case let given?:
            guard let seconds = given.integer(in: 0...86_400) else {
                throw ConfigError(file: file, "\(path).MaxAgeSeconds must be a whole number of seconds from 0 to 86400")
            }
            rule.maxAgeSeconds = seconds
        }
        return rule
    }

    static func strings(_ value: JSONValue?, _ path: String, file: String) throws(ConfigError) -> [String] {
        switch value {
        case nil, .null?: return []
        case .array(let items)?:
            var out: [String] = []
            for item in items {
                guard case .string(let text) = item, !text.isEmpty, text.utf8.count <= 1024 else {
                    throw ConfigError(file: file, "\(path) must be an array of non-empty strings")
                }
                out.append(text)
            }
            guard out.count <= 100 else { throw ConfigError(file: file, "\(path): at most 100 entries") }
            return out
        default: throw ConfigError(file: file, "\(path) must be an array of strings")
        }
    }

    /// `*`, or `scheme://host[:port]` with at most one `*` (`https://*.example.com`).
    static func checkOrigin(_ origin: String, _ path: String, file: String) throws(ConfigError) {
        if origin == "*" { return }
        let stars = origin.filter { $0 == "*" }.count
        guard stars <= 1, origin.hasPrefix("http://") || origin.hasPrefix("https://"), !origin.hasSuffix("/") else {
            throw ConfigError(file: file, "\(path): \"\(origin)\" is not an origin like \"https://app.example.com\" (at most one *)")
        }
    }

    /// Whether the token endpoint answers `origin`.
    package func tokenEndpointAdmits(_ origin: String) -> Bool {
        tokenOrigins.contains { CORSRule.matches($0, origin) }
    }

    /// The comma-separated header names of an `Access-Control-Request-Headers` value.
    package static func requestedHeaders(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.prefix(100).map { $0 }
    }
}
