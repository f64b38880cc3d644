import Foundation
import TollgateIdentity
import TollgateUpstream

/// One upstream STS of config.json's `Upstreams` (or the seed config's `AssumeRoleArn`).
public struct UpstreamSettings: Sendable, Equatable {
    public var name: String
    public var kind: UpstreamKind
    public var endpoint: UpstreamEndpoint
    /// Alibaba's `RegionId` (optional), SigV4's region (`us-east-1` when not given).
    public var region: String?
    public var keys: UpstreamKeys
    /// Where the keys came from, for log lines: file names or variable names, never values.
    public var keySource: String
    /// One vend's whole budget, every attempt included.
    public var timeoutMilliseconds: Int
    public var retry: RetryPolicy
    public var maxPolicyBytes: Int
    public var cache: CacheRule

    public var signingRegion: String { region.flatMap { $0.isEmpty ? nil : $0 } ?? "us-east-1" }
}

/// A role vended by an upstream: which one, and the role it assumes there.
public struct UpstreamRole: Sendable, Equatable {
    public var upstream: String
    public var roleArn: String
}

/// Everything config.json says about upstream STSs.
public struct UpstreamConfig: Sendable, Equatable {
    public var upstreams: [String: UpstreamSettings] = [:]
    /// Role name → its upstream; roles not listed are vended by Tollgate itself.
    public var roles: [String: UpstreamRole] = [:]
    /// Key files read, so a reload notices when one changes.
    public var keyFiles: [String] = []
    /// `AssumeRoleArn`: the seed app server's own meaning of `RoleArn`, `AccessKeyID`,
    /// `AccessKeySecret`, `TokenExpireTime` and `PolicyFile`.
    public var assumeRoleArn = false

    public var isEmpty: Bool { roles.isEmpty }
}

extension TollgateConfig {
    /// The seed's opt-in key and the name of the upstream it defines.
    public static let assumeRoleArnKey = "AssumeRoleArn"
    public static let seedUpstreamName = "default"
    static let upstreamKeys = ["Type", "Endpoint", "Region", "AccessKeyIDFile", "AccessKeySecretFile", "AccessKeyIDEnv",
                               "AccessKeySecretEnv", "TimeoutMs", "MaxAttempts", "MaxPolicyBytes", "CacheShare",
                               "CacheMarginSeconds", "CacheMaxEntries"]
    static let roleKeys = ["PolicyFile", "MaxSessionSeconds", "Upstream", "RoleArn"]
    /// Alibaba's public STS endpoint and the seed sample's region: where `"AssumeRoleArn": true` calls.
    static let seedEndpoint = "https://sts.aliyuncs.com"
    static let seedRegion = "cn-hangzhou"

    /// Reads `Upstreams`, the `Upstream`/`RoleArn` of `Roles` entries, and `AssumeRoleArn`.
    /// `resolve` makes a file name absolute against config.json's directory. Returns the
    /// settings and the unknown keys of role entries (reported as warnings).
    static func parseUpstreams(_ object: [String: JSONValue], path: String, roles: Set<String>, resolve: (String) -> String,
                               environment: [String: String]) throws(ConfigError) -> (UpstreamConfig, unknown: [String]) {
        func fail(_ message: String) -> ConfigError { ConfigError(file: path, message) }
        var config = UpstreamConfig()
        var unknown: [String] = []

        switch object["Upstreams"] {
        case nil, .null?: break
        case .object(let members)?:
            for (name, value) in members.sorted(by: { $0.key < $1.key }) {
                guard name.range(of: "^[A-Za-z0-9_.-]{1,64}$", options: .regularExpression) != nil else {
                    throw fail("Upstreams: the name \"\(name)\" must be 1-64 of A-Z a-z 0-9 _ . -")
                }
                guard case .object(let fields) = value else { throw fail("Upstreams.\(name) must be an object") }
                let (settings, files) = try parseUpstream(name, fields, path: path, resolve: resolve, environment: environment)
                config.upstreams[name] = settings
                config.keyFiles += files
            }
        default:
            throw fail("Upstreams must be an object of upstream names")
        }

        if case .object(let entries)? = object["Roles"] {
            for (role, value) in entries.sorted(by: { $0.key < $1.key }) {
                guard case .object(let fields) = value else { continue }
                unknown += fields.keys.filter { !roleKeys.contains($0) }.sorted().map { "Roles.\(role).\($0)" }
                let upstream: String?
                switch fields["Upstream"] {
                case nil, .null?: upstream = nil
                case .string(let name)?: upstream = name
                default: throw fail("Roles.\(role).Upstream must be the name of an entry of Upstreams")
                }
                let roleArn: String?
                switch fields["RoleArn"] {
                case nil, .null?: roleArn = nil
                case .string(let arn)?: roleArn = arn
                default: throw fail("Roles.\(role).RoleArn must be a string")
                }
                switch (upstream, roleArn) {
                case (nil, nil):
                    continue
                case (nil, _?):
                    throw fail("Roles.\(role).RoleArn needs Upstream: the upstream STS that vends the role")
                case (let name?, nil):
                    throw fail("Roles.\(role).Upstream \"\(name)\" needs RoleArn: the role to assume there")
                case (let name?, let arn?):
                    guard let settings = config.upstreams[name] else {
                        let known = config.upstreams.keys.sorted()
                        throw fail("Roles.\(role).Upstream names the unknown upstream \"\(name)\" (\(known.isEmpty ? "Upstreams is empty" : "configured: " + known.joined(separator: ", ")))")
                    }
                    try checkRoleArn(arn, kind: settings.kind, key: "Roles.\(role).RoleArn", path: path)
                    config.roles[role] = UpstreamRole(upstream: name, roleArn: arn)
                }
            }
        }

        switch object[assumeRoleArnKey] {
        case nil, .null?, .bool(false)?:
            break
        case .bool(true)?:
            try addSeedUpstream(&config, [:], object: object, path: path, environment: environment)
        case .object(let fields)?:
            try addSeedUpstream(&config, fields, object: object, path: path, environment: environment)
        default:
            throw fail("\(assumeRoleArnKey) must be true (call Alibaba Cloud STS as the reference app server does), false, or an object such as {\"Endpoint\": \"https://sts.example.com\"}")
        }
        return (config, unknown)
    }

    /// `AssumeRoleArn`: the default role is vended by the STS `RoleArn` names, with the file's
    /// `AccessKeyID`/`AccessKeySecret` as the caller's keys, exactly as the reference app server.
    private static func addSeedUpstream(_ config: inout UpstreamConfig, _ fields: [String: JSONValue], object: [String: JSONValue],
                                        path: String, environment: [String: String]) throws(ConfigError) {
        let key = assumeRoleArnKey
        guard config.upstreams[seedUpstreamName] == nil else {
            throw ConfigError(file: path, "Upstreams: the name \"\(seedUpstreamName)\" is taken by \(key)")
        }
        for field in fields.keys.sorted() where field == "AccessKeyIDFile" || field == "AccessKeySecretFile" || field == "AccessKeyIDEnv" || field == "AccessKeySecretEnv" {
            throw ConfigError(file: path, "\(key).\(field): with \(key), the keys are AccessKeyID and AccessKeySecret, as in the reference config.json")
        }
        var seedFields = fields
        if seedFields["Type"] == nil { seedFields["Type"] = .string(UpstreamKind.aliyunSTS.rawValue) }
        if seedFields["Endpoint"] == nil { seedFields["Endpoint"] = .string(seedEndpoint) }
        if seedFields["Region"] == nil, seedFields["Type"] == .string(UpstreamKind.aliyunSTS.rawValue) { seedFields["Region"] = .string(seedRegion) }
        func text(_ name: String) -> String {
            if case .string(let value)? = object[name] { return value }
            return ""
        }
        // The reference file holds the keys; empty there, the kind's usual variables may.
        var id = text("AccessKeyID"), secret = text("AccessKeySecret")
        let kind = UpstreamKind(rawValue: { if case .string(let t)? = seedFields["Type"] { return t } else { return "" } }())
        let variables = kind == .awsSTS ? ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") : ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET")
        var source = "AccessKeyID, AccessKeySecret (\(path))"
        if id.isEmpty, secret.isEmpty, let envID = environment[variables.0], let envSecret = environment[variables.1], !envID.isEmpty, !envSecret.isEmpty {
            (id, secret) = (envID, envSecret)
            source = "environment \(variables.0), \(variables.1)"
        }
        guard !id.isEmpty, !secret.isEmpty else {
            throw ConfigError(file: path, "\(key): AccessKeyID and AccessKeySecret must hold the keys Tollgate calls the STS with (or set \(variables.0) and \(variables.1))")
        }
        let (settings, _) = try parseUpstream(seedUpstreamName, seedFields, path: path, resolve: { $0 }, environment: environment,
                                              keys: (UpstreamKeys(accessKeyID: id, accessKeySecret: secret), source), prefix: key)
        let roleArn = text("RoleArn")
        guard !roleArn.isEmpty else { throw ConfigError(file: path, "\(key): RoleArn must name the role to assume (acs:ram::ACCOUNT:role/NAME)") }
        try checkRoleArn(roleArn, kind: settings.kind, key: "RoleArn", path: path)
        config.upstreams[seedUpstreamName] = settings
        config.roles[defaultRole] = UpstreamRole(upstream: seedUpstreamName, roleArn: roleArn)
        config.assumeRoleArn = true
    }

    /// `acs:ram::ACCOUNT:role/NAME` for Alibaba, `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME` otherwise.
    static func checkRoleArn(_ arn: String, kind: UpstreamKind, key: String, path: String) throws(ConfigError) {
        let pattern = switch kind {
        case .aliyunSTS: "^acs:ram::[0-9]+:role/[A-Za-z0-9._-]+$"
        case .awsSTS: "^arn:[a-z-]+:iam::[A-Za-z0-9_-]*:role/[A-Za-z0-9+=,.@_/-]+$"
        }
        guard arn.range(of: pattern, options: .regularExpression) != nil else {
            let example = kind == .aliyunSTS ? "acs:ram::1234567890123456:role/app-upload" : "arn:aws:iam::123456789012:role/app-upload"
            throw ConfigError(file: path, "\(key) \"\(arn)\" is not a role ARN for \(kind.rawValue) (like \(example))")
        }
    }

    private static func parseUpstream(_ name: String, _ fields: [String: JSONValue], path: String, resolve: (String) -> String,
                                      environment: [String: String], keys given: (UpstreamKeys, String)? = nil,
                                      prefix: String? = nil) throws(ConfigError) -> (UpstreamSettings, files: [String]) {
        let at = prefix ?? "Upstreams.\(name)"
        func fail(_ message: String) -> ConfigError { ConfigError(file: path, "\(at).\(message)") }
        if let other = fields.keys.sorted().first(where: { !upstreamKeys.contains($0) }) {
            throw fail("\(other) is not a known key (known: \(upstreamKeys.joined(separator: ", ")))")
        }
        func string(_ key: String) throws(ConfigError) -> String? {
            switch fields[key] {
            case nil, .null?: return nil
            case .string(let text)? where !text.isEmpty: return text
            default: throw fail("\(key) must be a non-empty string")
            }
        }
        func number(_ key: String, _ range: ClosedRange<Double>, default value: Double, whole: Bool = true) throws(ConfigError) -> Double {
            switch fields[key] {
            case nil, .null?: return value
            case .number(let n)? where range.contains(n) && (!whole || n == n.rounded()): return n
            default:
                let bounds = whole ? "\(Int(range.lowerBound)) to \(Int(range.upperBound))" : "\(range.lowerBound) to \(range.upperBound)"
                throw fail("\(key) must be \(whole ? "a whole number" : "a number") from \(bounds)")
            }
        }
        guard let typeName = try string("Type"), let kind = UpstreamKind(rawValue: typeName) else {
            throw fail("Type must be one of \(UpstreamKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let endpointText = try string("Endpoint"), let endpoint = UpstreamEndpoint(endpointText) else {
            throw fail("Endpoint must be an http:// or https:// URL of the STS (scheme, host, optional port), like https://sts.example.com")
        }
        var files: [String] = []
        let keys: UpstreamKeys, source: String
        if let given {
            (keys, source) = given
        } else {
            func secret(_ what: String) throws(ConfigError) -> (value: String, source: String) {
                let file = try string(what + "File"), variable = try string(what + "Env")
                switch (file, variable) {
                case (nil, nil):
                    throw fail("\(what)File or \(what)Env is required: upstream keys come from a file or the environment, never from config.json")
                case (_?, _?):
                    throw fail("set \(what)File or \(what)Env, not both")
                case (let file?, nil):
                    let resolved = resolve(file)
                    let text: String
                    do { text = try String(contentsOf: URL(fileURLWithPath: resolved), encoding: .utf8) } catch {
                        throw ConfigError(file: resolved, "\(at).\(what)File: cannot read the key file (\((error as NSError).localizedDescription))")
                    }
                    var trimmed = Substring(text)
                    while trimmed.last?.isNewline == true || trimmed.last == " " { trimmed.removeLast() }
                    guard !trimmed.isEmpty else { throw ConfigError(file: resolved, "\(at).\(what)File: the key file is empty") }
                    files.append(resolved)
                    return (String(trimmed), resolved)
                case (nil, let variable?):
                    guard let value = environment[variable], !value.isEmpty else {
                        throw fail("\(what)Env: the environment variable \(variable) is not set")
                    }
                    return (value, "$" + variable)
                }
            }
            let id = try secret("AccessKeyID"), key = try secret("AccessKeySecret")
            keys = UpstreamKeys(accessKeyID: id.value, accessKeySecret: key.value)
            source = "\(id.source), \(key.source)"
        }
        let timeout = Int(try number("TimeoutMs", 100...60_000, default: 5000))
        let attempts = Int(try number("MaxAttempts", 1...5, default: 3))
        let maxPolicy = Int(try number("MaxPolicyBytes", 64...65_536, default: Double(kind.defaultMaxPolicyBytes)))
        let share = try number("CacheShare", 0...0.9, default: 0.5, whole: false)
        let margin = Int(try number("CacheMarginSeconds", 0...3600, default: 300))
        let entries = Int(try number("CacheMaxEntries", 0...1_000_000, default: 10_000))
        let settings = UpstreamSettings(
            name: name, kind: kind, endpoint: endpoint, region: try string("Region"), keys: keys, keySource: source,
            timeoutMilliseconds: timeout, retry: RetryPolicy(maxAttempts: attempts), maxPolicyBytes: maxPolicy,
            cache: CacheRule(share: share, marginSeconds: margin, maxEntries: entries))
        return (settings, files)
    }
}
