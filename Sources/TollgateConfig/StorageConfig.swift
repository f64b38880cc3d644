import Foundation
import TollgateIdentity
import TollgateS3Store
import TollgateStorage

/// config.json's `Storage` section (restart-only): `{"Backend": "local"}` (the default) or an
/// S3-compatible cluster. The backend's keys come from files or environment variables named
/// here, never from config.json itself, and never reach a log line (`S3StoreConfiguration` describes
/// itself without them).
extension StorageSettings {
    static let keys = [
        "Backend", "Endpoint", "Region", "PathStyle", "AccessKeyIDFile", "AccessKeyIDEnv", "AccessKeySecretFile", "AccessKeySecretEnv",
        "BucketPrefix", "SystemBucket", "TLS", "BackendMinimumPartSize", "AppendableObjects", "RequestTimeoutSeconds",
        "ConnectTimeoutSeconds", "SignPayload",
    ]

    static func parse(_ value: JSONValue?, file: String, resolve: (String) -> String,
                      environment: [String: String]) throws(ConfigError) -> StorageSettings {
        guard let value, value != .null else { return .local }
        guard case .object(let members) = value else { throw ConfigError(file: file, "Storage must be an object") }
        if let unknown = members.keys.filter({ !keys.contains($0) }).sorted().first {
            throw ConfigError(file: file, "Storage: unknown key \"\(unknown)\" (known: \(keys.joined(separator: ", ")))")
        }
        func string(_ key: String) throws(ConfigError) -> String? {
            switch members[key] {
            case nil, .null?: return nil
            case .string(let text)?: return text
            default: throw ConfigError(file: file, "Storage.\(key) must be a string")
            }
        }
        func bool(_ key: String, _ fallback: Bool) throws(ConfigError) -> Bool {
            switch members[key] {
            case nil, .null?: return fallback
            case .bool(let flag)?: return flag
            default: throw ConfigError(file: file, "Storage.\(key) must be true or false")
            }
        }
        func number(_ key: String, _ fallback: Int, _ range: ClosedRange<Int>) throws(ConfigError) -> Int {
            switch members[key] {
            case nil, .null?: return fallback
            case .number(let n)? where n == n.rounded() && range.contains(Int(exactly: n) ?? -1): return Int(n)
            default: throw ConfigError(file: file, "Storage.\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
        }
        let backend = try string("Backend") ?? "local"
        switch backend {
        case "local":
            if let other = members.keys.filter({ $0 != "Backend" }).sorted().first {
                throw ConfigError(file: file, "Storage.\(other) applies to the s3 backend only")
            }
            return .local
        case "s3":
            break
        default:
            throw ConfigError(file: file, "Storage.Backend must be \"local\" or \"s3\" (got \"\(backend)\")")
        }
        guard let endpoint = try string("Endpoint"), let scheme = endpoint.range(of: "://"),
              ["http", "https"].contains(endpoint[..<scheme.lowerBound].lowercased()), !endpoint[scheme.upperBound...].isEmpty,
              !endpoint[scheme.upperBound...].dropLast(endpoint.hasSuffix("/") ? 1 : 0).contains("/")
        else {
            throw ConfigError(file: file, "Storage.Endpoint must be the backend's http(s)://HOST[:PORT] (for example \"http://rgw.internal:7480\")")
        }
        func secret(_ name: String) throws(ConfigError) -> String {
            let fileKey = name + "File", envKey = name + "Env"
            switch (try string(fileKey), try string(envKey)) {
            case (nil, nil):
                throw ConfigError(file: file, "Storage: set \(fileKey) (a file holding it) or \(envKey) (an environment variable holding it)")
            case (_?, _?):
                throw ConfigError(file: file, "Storage: set \(fileKey) or \(envKey), not both")
            case (let path?, nil):
                let resolved = resolve(path)
                let text: String
                do { text = try String(contentsOf: URL(fileURLWithPath: resolved), encoding: .utf8) } catch {
                    throw ConfigError(file: resolved, "Storage.\(fileKey): cannot read the file")
                }
                let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                guard !trimmed.isEmpty else { throw ConfigError(file: resolved, "Storage.\(fileKey): the file is empty") }
                return trimmed
            case (nil, let variable?):
                guard let value = environment[variable], !value.isEmpty else {
                    throw ConfigError(file: file, "Storage.\(envKey): the environment variable \(variable) is not set")
                }
                return value
            }
        }
        var caFile: String?
        switch members["TLS"] {
        case nil, .null?: break
        case .object(let tls)?:
            if let other = tls.keys.filter({ $0 != "CAFile" }).sorted().first {
                throw ConfigError(file: file, "Storage.TLS: unknown key \"\(other)\" (known: CAFile)")
            }
            guard case .string(let path)? = tls["CAFile"], !path.isEmpty else {
                throw ConfigError(file: file, "Storage.TLS.CAFile must be a file name (the PEM CA certificates the backend's certificate chains to)")
            }
            caFile = resolve(path)
        default:
            throw ConfigError(file: file, #"Storage.TLS must be an object {"CAFile": "ca.pem"}"#)
        }
        let prefix = try string("BucketPrefix") ?? ""
        guard prefix.utf8.allSatisfy({ ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }),
              prefix.utf8.count <= 40 else {
            throw ConfigError(file: file, "Storage.BucketPrefix must be up to 40 lowercase letters, digits, '-' and '.'")
        }
        let settings = S3StoreConfiguration(
            endpoint: endpoint, region: try string("Region") ?? "us-east-1", pathStyle: try bool("PathStyle", true),
            accessKeyID: try secret("AccessKeyID"), secretAccessKey: try secret("AccessKeySecret"), bucketPrefix: prefix,
            systemBucket: try string("SystemBucket"), caFile: caFile,
            requestTimeout: .seconds(try number("RequestTimeoutSeconds", 30, 1...3600)),
            connectTimeout: .seconds(try number("ConnectTimeoutSeconds", 5, 1...600)),
            backendMinimumPartSize: Int64(try number("BackendMinimumPartSize", 5 * 1024 * 1024, 1...(5 * 1024 * 1024 * 1024))),
            appendableObjects: try bool("AppendableObjects", true), signsPayload: try bool("SignPayload", true)
        )
        return StorageSettings(backend: .s3(settings))
    }
}
