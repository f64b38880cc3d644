import Foundation
import TollgateHTTP
import TollgateMobile
import TollgateIdentity
import TollgatePolicy
import TollgateStorage
import TollgateStore

/// A configuration problem. Start-up prints `description` as one line and exits with code 2.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let message: String
    /// Where in the file, for JSON syntax errors.
    public let position: SourcePosition?

    public init(file: String, _ message: String, at position: SourcePosition? = nil) {
        self.file = file
        self.message = message
        self.position = position
    }

    /// `file: message`, or `file:line:column: message` when the position is known.
    public var description: String {
        guard let position else { return "\(file): \(message)" }
        return "\(file):\(position.line):\(position.column): \(message)"
    }
}

/// `config.json`: the five reference keys of Alibaba Cloud's STS app server, plus Tollgate's
/// own extension keys (documented in README.md). Loading is pure: it reads the file and
/// validates it, nothing else. `RootCredentials.resolve` does the first-start work.
public struct TollgateConfig: Sendable {
    /// Keys every deployment of the reference server already has.
    public static let referenceKeys = ["AccessKeyID", "AccessKeySecret", "RoleArn", "TokenExpireTime", "PolicyFile"]
    /// Tollgate's extension keys.
    public static let extensionKeys = [
        "ListenAddress", "Port", "GatewayAddress", "GatewayPort", "GatewayBaseDomain", "DataDirectory",
        "Variables", "Buckets", "Roles", "PreviousAccessKeySecrets", "DevelopmentMode", "IdleTimeoutSeconds",
        "MultipartUploadExpirySeconds", "MaxMultipartUploadsPerBucket", "Authentication", "RateLimits", "CreatePolicyBuckets",
        "TLS", "GatewayTLS", "TrustedProxies", "CORS", "Upstreams", "AssumeRoleArn", "Storage", "Collections",
        "AnonymousPolicyFile",
    ]
    /// The keys read only at start-up: a reload that changes one logs it as needing a restart,
    /// and the running value stays in force; every other key applies on reload. This is the one
    /// place that says so. (The root identity is resolved once; the listeners are bound once.)
    package static let restartOnlyKeys: [(key: String, keep: @Sendable (inout TollgateConfig, TollgateConfig) -> Void)] = [
        ("AccessKeyID", { $0.accessKeyID = $1.accessKeyID }),
        ("AccessKeySecret", { $0.accessKeySecret = $1.accessKeySecret }),
        ("ListenAddress", { $0.listenAddress = $1.listenAddress }),
        ("Port", { $0.port = $1.port }),
        ("GatewayAddress", { $0.gatewayAddress = $1.gatewayAddress }),
        ("GatewayPort", { $0.gatewayPort = $1.gatewayPort }),
        ("DataDirectory", { $0.dataDirectory = $1.dataDirectory }),
        ("IdleTimeoutSeconds", { $0.idleTimeoutSeconds = $1.idleTimeoutSeconds }),
        // Whether a listener speaks TLS, and which files it reads; the files' contents reload
        // on their own (TLSReloader).
        ("TLS", { $0.tls = $1.tls }),
        ("GatewayTLS", { $0.gatewayTLS = $1.gatewayTLS }),
        // The object store is opened once.
        ("Storage", { $0.storage = $1.storage }),
    ]
    public static let minimumTokenLifetime = 900
    public static let maximumTokenLifetime = 43200
    /// Shorter root secrets are refused outside development mode.
    public static let minimumSecretLength = 32
    /// A connection that sends nothing (or never finishes its request head) for this long is closed.
    public static let defaultIdleTimeout = 60
    /// Incomplete multipart uploads are aborted this long after they were initiated (3 days).
    public static let defaultMultipartUploadExpiry = 3 * 24 * 3600
    public static let defaultMaxMultipartUploadsPerBucket = 1000

    /// The path the config was read from.
    public var path: String
    /// Directory of config.json; `PolicyFile`, `Roles` and `DataDirectory` are relative to it.
    public var directory: String
    public var accessKeyID: String
    public var accessKeySecret: String
    public var roleArn: String
    /// Token lifetime in seconds, 900...43200.
    public var tokenExpireTime: Int
    /// The default role's policy file, resolved against `directory`.
    public var policyFile: String
    public var listenAddress: String
    public var port: Int
    public var gatewayAddress: String
    public var gatewayPort: Int
    public var gatewayBaseDomain: String?
    public var dataDirectory: String
    /// `$NAME` placeholder values for policy files.
    public var variables: [String: String]
    /// Buckets created at start-up and on reload when missing.
    public var buckets: [String]
    /// Whether the buckets role policies name literally are created too (`CreatePolicyBuckets`).
    public var createPolicyBuckets = true
    /// Role name → policy file (resolved). Always contains `default` → `policyFile`.
    public var roles: [String: String]
    /// Role name → the longest session it may be given (`Roles` entries written as objects).
    public var roleMaxSessionSeconds: [String: Int]
    /// Who may get a token (the `Authentication` section); nil: anyone, with the default role.
    public var authentication: AuthenticationSettings?
    public var previousAccessKeySecrets: [String]
    public var developmentMode: Bool
    /// Seconds both listeners let a connection stay idle, or stall in its request head or body.
    public var idleTimeoutSeconds: Int
    /// Seconds after initiation when an incomplete multipart upload is aborted.
    public var multipartUploadExpirySeconds: Int
    /// In-progress multipart uploads a bucket may hold; CreateMultipartUpload beyond it is refused.
    public var maxMultipartUploadsPerBucket: Int
    /// Keys that are neither reference nor extension keys; reported as a warning.
    public var unknownKeys: [String]
    /// `RateLimits`: the token endpoint's limits per client address and per subject.
    public var rateLimits = RateLimitSettings()
    /// `TLS`: the token endpoint's certificate and key; nil: plain HTTP.
    public var tls: TLSFiles?
    /// `GatewayTLS`: the gateway's certificate and key; nil: plain HTTP.
    public var gatewayTLS: TLSFiles?
    /// `TrustedProxies`: peers whose forwarding headers name the client.
    public var trustedProxies = TrustedProxies.none
    /// `CORS`: rules for browser apps on the gateway and the token endpoint (none by default).
    public var cors = CORSSettings()
    /// `Storage`: where objects are stored (the data directory by default).
    public var storage = StorageSettings.local
    /// `Collections`: the mobile Storage API's collections (CollectionsConfig.swift).
    public var collections: [MobileCollection] = []
    /// The top-level members as written, to tell which keys an edit changed.
    public var members: [String: JSONValue] = [:]
    /// `Upstreams`, the roles they vend, and `AssumeRoleArn` (see UpstreamConfig.swift).
    public var upstream = UpstreamConfig()

    public static let defaultRole = "default"
    /// The role of unsigned requests (`AnonymousPolicyFile`); no role name of `Roles` can be it.
    public static let anonymousRole = "*anonymous"

    /// Reads and validates a config file. Environment variables `TOLLGATE_ACCESS_KEY_ID` and
    /// `TOLLGATE_ACCESS_KEY_SECRET` (or files named by `TOLLGATE_ACCESS_KEY_ID_FILE` and
    /// `TOLLGATE_ACCESS_KEY_SECRET_FILE`, for Docker secrets) override the file's root credentials.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> TollgateConfig {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ConfigError(file: path, "cannot read the file (\(Self.reason(error)))")
        }
        return try parse(data, path: path, environment: environment)
    }

    public static func parse(_ data: Data, path: String, environment: [String: String] = [:]) throws(ConfigError) -> TollgateConfig {
        if let syntax = JSONSyntax.firstError(in: Array(data)) {
            throw ConfigError(file: path, "invalid JSON: \(syntax.message)", at: syntax.position)
        }
        let object: [String: JSONValue]
        do {
            guard case .object(let parsed) = try JSONDecoder().decode(JSONValue.self, from: data) else {
                throw ConfigError(file: path, "the top level must be a JSON object")
            }
            object = parsed
        } catch let error as ConfigError {
            throw error
        } catch {
            throw ConfigError(file: path, "invalid JSON (\(Self.reason(error)))")
        }
        let reader = Reader(object: object, path: path)
        let directory = (path as NSString).deletingLastPathComponent
        func resolve(_ file: String) -> String {
            file.hasPrefix("/") || directory.isEmpty ? file : (directory as NSString).appendingPathComponent(file)
        }

        let lifetime = try reader.integer("TokenExpireTime", default: minimumTokenLifetime)
        guard lifetime >= minimumTokenLifetime else {
            throw ConfigError(file: path, "TokenExpireTime must be at least \(minimumTokenLifetime) seconds (got \(lifetime))")
        }
        guard lifetime <= maximumTokenLifetime else {
            throw ConfigError(file: path, "TokenExpireTime must be at most \(maximumTokenLifetime) seconds (got \(lifetime))")
        }
        guard let policyFile = try reader.string("PolicyFile"), !policyFile.isEmpty else {
            throw ConfigError(file: path, "PolicyFile is required (for example \"policy/all_policy.txt\")")
        }
        var roles = [defaultRole: resolve(policyFile)]
        var maxSessions: [String: Int] = [:]
        for (name, role) in try reader.roles() {
            guard name.range(of: "^[A-Za-z0-9_.@-]{1,64}$", options: .regularExpression) != nil else {
                throw ConfigError(file: path, "Roles: role name \"\(name)\" must be 1-64 of A-Z a-z 0-9 _ . @ -")
            }
            if name == defaultRole, resolve(role.file) != roles[defaultRole] {
                throw ConfigError(file: path, "Roles: \"default\" is the PolicyFile role and cannot be redefined")
            }
            roles[name] = resolve(role.file)
            if let seconds = role.maxSessionSeconds {
                guard (minimumTokenLifetime...maximumTokenLifetime).contains(seconds) else {
                    throw ConfigError(file: path, "Roles.\(name).MaxSessionSeconds must be \(minimumTokenLifetime) to \(maximumTokenLifetime)")
                }
                maxSessions[name] = seconds
            }
        }
        // Unsigned requests, in every dialect, are decided by this policy (none: refused).
        if let file = try reader.string("AnonymousPolicyFile"), !file.isEmpty { roles[anonymousRole] = resolve(file) }
        let (authentication, unknownAuthenticationKeys) = try parseAuthentication(
            object["Authentication"], path: path, roles: Set(roles.keys), environment: environment)
        let variables = try reader.stringMap("Variables")
        var buckets = try reader.stringArray("Buckets")
        if buckets.isEmpty, let bucket = variables["BUCKET_NAME"] { buckets = [bucket] }
        for bucket in buckets where !StoreNames.isValidBucketName(bucket) {
            let origin = object["Buckets"] == nil ? "Buckets (from Variables.BUCKET_NAME)" : "Buckets"
            throw ConfigError(file: path, "\(origin): \"\(bucket)\" is not a valid bucket name (3-63 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)")
        }

        var config = TollgateConfig(
            path: path,
            directory: directory,
            accessKeyID: try reader.string("AccessKeyID") ?? "",
            accessKeySecret: try reader.string("AccessKeySecret") ?? "",
            roleArn: try reader.string("RoleArn") ?? "",
            tokenExpireTime: lifetime,
            policyFile: resolve(policyFile),
            listenAddress: try reader.string("ListenAddress") ?? "0.0.0.0",
            port: try reader.port("Port", default: 7080),
            gatewayAddress: try reader.string("GatewayAddress") ?? "0.0.0.0",
            gatewayPort: try reader.port("GatewayPort", default: 9000),
            gatewayBaseDomain: try reader.string("GatewayBaseDomain").flatMap { $0.isEmpty ? nil : $0 },
            dataDirectory: resolve(try reader.string("DataDirectory") ?? "data"),
            variables: variables,
            buckets: buckets,
            roles: roles,
            roleMaxSessionSeconds: maxSessions,
            authentication: authentication,
            previousAccessKeySecrets: try reader.stringArray("PreviousAccessKeySecrets"),
            developmentMode: try reader.bool("DevelopmentMode"),
            idleTimeoutSeconds: try reader.positive("IdleTimeoutSeconds", default: defaultIdleTimeout),
            multipartUploadExpirySeconds: try reader.positive("MultipartUploadExpirySeconds", default: defaultMultipartUploadExpiry),
            maxMultipartUploadsPerBucket: try reader.positive("MaxMultipartUploadsPerBucket", default: defaultMaxMultipartUploadsPerBucket),
            unknownKeys: object.keys.filter { !referenceKeys.contains($0) && !extensionKeys.contains($0) }.sorted() + unknownAuthenticationKeys
        )
        config.rateLimits = try RateLimitSettings.parse(object["RateLimits"], file: path)
        config.tls = try reader.tlsFiles("TLS").map { TLSFiles(certificateFile: resolve($0.certificateFile), keyFile: resolve($0.keyFile)) }
        config.gatewayTLS = try reader.tlsFiles("GatewayTLS").map { TLSFiles(certificateFile: resolve($0.certificateFile), keyFile: resolve($0.keyFile)) }
        let proxies = try reader.stringArray("TrustedProxies")
        do {
            config.trustedProxies = try TrustedProxies(proxies)
        } catch {
            throw ConfigError(file: path, "TrustedProxies: \"\(error.entry)\" is not an IP address or CIDR range (like \"10.0.0.0/8\" or \"fd00::/8\")")
        }
        config.cors = try CORSSettings.parse(object["CORS"], file: path)
        config.storage = try StorageSettings.parse(object["Storage"], file: path, resolve: resolve, environment: environment)
        config.createPolicyBuckets = try reader.bool("CreatePolicyBuckets", default: true)
        config.collections = try CollectionsConfig.parse(object["Collections"], file: path, roles: Set(roles.keys), defaultBucket: buckets.first)
        config.members = object
        let (upstream, unknownRoleKeys) = try parseUpstreams(object, path: path, roles: Set(roles.keys), resolve: resolve,
                                                             environment: environment)
        config.upstream = upstream
        config.unknownKeys += unknownRoleKeys
        // With AssumeRoleArn, AccessKeyID/AccessKeySecret are the upstream caller's keys (the
        // reference app server's meaning), not the gateway's root: that one is generated (or
        // comes from the environment) as for an empty AccessKeySecret.
        if upstream.assumeRoleArn {
            config.accessKeyID = ""
            config.accessKeySecret = ""
        }
        if let id = try environmentValue("TOLLGATE_ACCESS_KEY_ID", environment, path: path) { config.accessKeyID = id.value }
        var secretSource = "AccessKeySecret"
        if let secret = try environmentValue("TOLLGATE_ACCESS_KEY_SECRET", environment, path: path) {
            config.accessKeySecret = secret.value
            secretSource = secret.source
        }
        if let data = environment["TOLLGATE_DATA_DIR"], !data.isEmpty { config.dataDirectory = data }
        if !config.accessKeySecret.isEmpty {
            try config.checkSecret(config.accessKeySecret, name: secretSource, hint: " (leave it empty to generate one, or set DevelopmentMode)")
        } else if case .s3 = config.storage.backend {
            // A secret generated into one instance's data directory would sign tokens no other instance accepts.
            throw ConfigError(file: path, "with Storage.Backend \"s3\", AccessKeySecret (or TOLLGATE_ACCESS_KEY_SECRET) must be set: every instance verifies tokens with the same root secret")
        }
        // Every secret that verifies tokens must be as strong as the one that signs them.
        for (index, secret) in config.previousAccessKeySecrets.enumerated() {
            try config.checkSecret(secret, name: "PreviousAccessKeySecrets[\(index)]", hint: " (or set DevelopmentMode)")
        }
        try config.checkListenersDiffer()
        return config
    }

    /// Puts back the values `running` started with for the keys that need a restart.
    package mutating func keepRestartOnlyValues(of running: TollgateConfig) {
        for entry in Self.restartOnlyKeys { entry.keep(&self, running) }
    }

    /// The top-level keys whose written values differ from `other`'s (added and removed ones
    /// too), sorted.
    public func changedKeys(since other: TollgateConfig) -> [String] {
        Set(members.keys).union(other.members.keys).filter { members[$0] != other.members[$0] }.sorted()
    }

    /// A value from the environment variable `name`, or from the file `name_FILE` names (Docker
    /// secrets, /run/secrets/…) without its trailing newline; nil when neither is set. Returns the
    /// value and where it came from, for error messages.
    static func environmentValue(_ name: String, _ environment: [String: String], path: String) throws(ConfigError) -> (value: String, source: String)? {
        let value = environment[name].flatMap { $0.isEmpty ? nil : $0 }
        let file = environment[name + "_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        switch (value, file) {
        case (nil, nil):
            return nil
        case (let value?, nil):
            return (value, name)
        case (_?, _?):
            throw ConfigError(file: path, "set \(name) or \(name)_FILE, not both")
        case (nil, let file?):
            let text: String
            do { text = try String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8) } catch {
                throw ConfigError(file: file, "\(name)_FILE: cannot read the file (\(Self.reason(error)))")
            }
            var trimmed = Substring(text)
            while trimmed.last?.isNewline == true { trimmed.removeLast() }
            guard !trimmed.isEmpty else { throw ConfigError(file: file, "\(name)_FILE: the file is empty") }
            return (String(trimmed), "\(name)_FILE (\(file))")
        }
    }

    /// The token endpoint's `/healthz` as a client on the same machine reaches it: loopback when
    /// the listener is a wildcard address (`tollgate healthcheck`, the image's HEALTHCHECK).
    public var healthCheckURL: String {
        LocalHTTP.baseURL(address: listenAddress, port: port, tls: tls != nil) + "/healthz"
    }

    private func checkSecret(_ secret: String, name: String, hint: String) throws(ConfigError) {
        if secret.isEmpty { throw ConfigError(file: path, "\(name) must not be empty") }
        if secret.utf8.count < Self.minimumSecretLength, !developmentMode {
            throw ConfigError(file: path, "\(name) must be at least \(Self.minimumSecretLength) bytes\(hint)")
        }
    }

    /// The two listeners cannot share a port on overlapping addresses (a wildcard overlaps every
    /// address); port 0 asks the system for a free port and never clashes.
    private func checkListenersDiffer() throws(ConfigError) {
        let wildcards: Set<String> = ["", "0.0.0.0", "::", "[::]"]
        guard port != 0, port == gatewayPort,
              listenAddress == gatewayAddress || wildcards.contains(listenAddress) || wildcards.contains(gatewayAddress)
        else { return }
        throw ConfigError(
            file: path,
            "Port and GatewayPort must differ: the token endpoint (\(listenAddress):\(port)) and the gateway (\(gatewayAddress):\(gatewayPort)) would listen on the same port"
        )
    }

    private static func reason(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            let underlying = context.underlyingError.map { "\($0)" } ?? ""
            return underlying.isEmpty ? context.debugDescription : underlying
        }
        return (error as NSError).localizedDescription
    }

    /// Typed access to the JSON object, with errors that name the key.
    private struct Reader {
        let object: [String: JSONValue]
        let path: String

        func fail(_ key: String, _ expected: String) -> ConfigError {
            ConfigError(file: path, "\(key) must be \(expected)")
        }

        func value(_ key: String) -> JSONValue? {
            guard let value = object[key], value != .null else { return nil }
            return value
        }

        func string(_ key: String) throws(ConfigError) -> String? {
            guard let value = value(key) else { return nil }
            guard case .string(let string) = value else { throw fail(key, "a string") }
            return string
        }

        func integer(_ key: String, default defaultValue: Int) throws(ConfigError) -> Int {
            switch value(key) {
            case nil:
                return defaultValue
            case .string(let string):
                guard let number = Int(string.trimmingCharacters(in: .whitespaces)) else {
                    throw fail(key, "a whole number of seconds, as a number or a string (got \"\(string)\")")
                }
                return number
            case let given?:
                guard let number = given.integer(in: -999_999_999_999_999...999_999_999_999_999) else {
                    throw fail(key, "a whole number, as a number or a string")
                }
                return number
            }
        }

        func port(_ key: String, default defaultValue: Int) throws(ConfigError) -> Int {
            let port = try integer(key, default: defaultValue)
            guard (0...65535).contains(port) else { throw fail(key, "a port number 0-65535 (got \(port))") }
            return port
        }

        /// A whole number of at least 1 (seconds or a count).
        func positive(_ key: String, default defaultValue: Int) throws(ConfigError) -> Int {
            let value = try integer(key, default: defaultValue)
            guard value >= 1 else { throw fail(key, "at least 1 (got \(value))") }
            return value
        }

        func bool(_ key: String, default defaultValue: Bool = false) throws(ConfigError) -> Bool {
            switch value(key) {
            case nil: return defaultValue
            case .bool(let flag): return flag
            default: throw fail(key, "true or false")
            }
        }

        func stringArray(_ key: String) throws(ConfigError) -> [String] {
            guard let value = value(key) else { return [] }
            guard case .array(let items) = value else { throw fail(key, "an array of strings") }
            var strings: [String] = []
            for item in items {
                guard case .string(let string) = item else { throw fail(key, "an array of strings") }
                strings.append(string)
            }
            return strings
        }

        /// `Roles`: name → policy file, or name → `{"PolicyFile": …, "MaxSessionSeconds": …}`.
        func roles() throws(ConfigError) -> [String: (file: String, maxSessionSeconds: Int?)] {
            guard let value = value("Roles") else { return [:] }
            guard case .object(let members) = value else { throw fail("Roles", "an object of role names") }
            var roles: [String: (file: String, maxSessionSeconds: Int?)] = [:]
            for (name, item) in members {
                switch item {
                case .string(let file):
                    roles[name] = (file, nil)
                case .object(let fields):
                    guard case .string(let file)? = fields["PolicyFile"] else { throw fail("Roles.\(name).PolicyFile", "a string") }
                    var seconds: Int?
                    switch fields["MaxSessionSeconds"] {
                    case nil, .null?: break
                    case let given?:
                        guard let number = given.integer(in: 0...999_999_999) else {
                            throw fail("Roles.\(name).MaxSessionSeconds", "a whole number of seconds")
                        }
                        seconds = number
                    }
                    roles[name] = (file, seconds)
                default:
                    throw fail("Roles.\(name)", "a policy file name or an object with PolicyFile")
                }
            }
            return roles
        }

        /// `{"CertificateFile": …, "KeyFile": …}`, both required (paths as written).
        func tlsFiles(_ key: String) throws(ConfigError) -> TLSFiles? {
            guard let value = value(key) else { return nil }
            let expected = #"an object {"CertificateFile": "cert.pem", "KeyFile": "key.pem"}"#
            guard case .object(let fields) = value else { throw fail(key, expected) }
            if let other = fields.keys.sorted().first(where: { $0 != "CertificateFile" && $0 != "KeyFile" }) {
                throw fail(key, "\(expected) (unknown key \(other))")
            }
            guard case .string(let certificate)? = fields["CertificateFile"], !certificate.isEmpty else {
                throw fail("\(key).CertificateFile", "a file name (the PEM certificate chain)")
            }
            guard case .string(let privateKey)? = fields["KeyFile"], !privateKey.isEmpty else {
                throw fail("\(key).KeyFile", "a file name (the PEM private key)")
            }
            return TLSFiles(certificateFile: certificate, keyFile: privateKey)
        }

        func stringMap(_ key: String) throws(ConfigError) -> [String: String] {
            guard let value = value(key) else { return [:] }
            guard case .object(let members) = value else { throw fail(key, "an object of strings") }
            var map: [String: String] = [:]
            for (name, item) in members {
                guard case .string(let string) = item else { throw fail("\(key).\(name)", "a string") }
                map[name] = string
            }
            return map
        }
    }
}
