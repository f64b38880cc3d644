import Foundation
import TollgateIdentity

/// Reading the `Authentication` section of config.json (see README, "App authentication").
extension TollgateConfig {
    static let authenticationKeys = ["AllowAnonymous", "Providers", "RoleRules", "DefaultRole", "Webhook"]
    static let providerKeys = ["Name", "Issuer", "JWKSURL", "DiscoveryURL", "Audiences", "Algorithms", "SubjectClaim",
                               "LeewaySeconds", "HMACSecretEnv", "Claims", "SubjectPrefix"]

    static func parseAuthentication(_ value: JSONValue?, path: String, roles: Set<String>,
                                    environment: [String: String]) throws(ConfigError) -> (AuthenticationSettings?, unknown: [String]) {
        guard let value, value != .null else { return (nil, []) }
        guard case .object(let section) = value else { throw ConfigError(file: path, "Authentication must be an object") }
        func fail(_ message: String) -> ConfigError { ConfigError(file: path, "Authentication: " + message) }
        var unknown = section.keys.filter { !authenticationKeys.contains($0) }.sorted().map { "Authentication.\($0)" }

        let allowAnonymous: Bool
        switch section["AllowAnonymous"] {
        case nil, .null?: allowAnonymous = false
        case .bool(let flag)?: allowAnonymous = flag
        default: throw fail("AllowAnonymous must be true or false")
        }

        var providers: [ProviderSettings] = []
        if let list = section["Providers"], list != .null {
            guard case .array(let items) = list else { throw fail("Providers must be an array of objects") }
            for (index, item) in items.enumerated() {
                guard case .object(let object) = item else { throw fail("Providers[\(index)] must be an object") }
                let (provider, extra) = try parseProvider(object, index: index, fail: fail, environment: environment)
                guard !providers.contains(where: { $0.issuer == provider.issuer }) else {
                    throw fail("Providers[\(index)]: the issuer \(provider.issuer) is listed twice")
                }
                providers.append(provider)
                unknown += extra
            }
        }
        var webhook: WebhookSettings?
        switch section["Webhook"] {
        case nil, .null?: break
        case .object(let object)?:
            guard case .string(let url)? = object["URL"], url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw fail("Webhook.URL must be an http:// or https:// URL")
            }
            func number(_ key: String, _ range: ClosedRange<Int>, default value: Int) throws(ConfigError) -> Int {
                switch object[key] {
                case nil, .null?: return value
                case let given?:
                    guard let number = given.integer(in: range) else {
                        throw fail("Webhook.\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
                    }
                    return number
                }
            }
            webhook = WebhookSettings(url: url, timeoutMilliseconds: try number("TimeoutMs", 1...30_000, default: 2000),
                                      cacheSeconds: try number("CacheSeconds", 0...3600, default: 60),
                                      subjectPrefix: try subjectPrefix(object["SubjectPrefix"], at: "Webhook", fail: fail))
            unknown += object.keys.filter { !["URL", "TimeoutMs", "CacheSeconds", "SubjectPrefix"].contains($0) }.sorted()
                .map { "Authentication.Webhook.\($0)" }
        default:
            throw fail("Webhook must be an object with URL")
        }
        try checkSubjectPrefixes(providers: providers, webhook: webhook, fail: fail)
        guard !providers.isEmpty || webhook != nil || allowAnonymous else {
            throw fail("list at least one provider in Providers or a Webhook, or set AllowAnonymous to true")
        }

        var rules: [RoleRule] = []
        if let list = section["RoleRules"], list != .null {
            guard case .array(let items) = list else { throw fail("RoleRules must be an array of objects") }
            for (index, item) in items.enumerated() {
                guard case .object(let object) = item,
                      case .string(let claim)? = object["Claim"], case .string(let matchName)? = object["Match"],
                      case .string(let ruleValue)? = object["Value"], case .string(let role)? = object["Role"]
                else { throw fail("RoleRules[\(index)] must have the strings Claim, Match, Value and Role") }
                guard let match = RoleRule.Match(rawValue: matchName) else {
                    throw fail("RoleRules[\(index)].Match must be one of \(RoleRule.Match.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                guard roles.contains(role) else { throw fail("RoleRules[\(index)].Role names the unknown role \"\(role)\"") }
                rules.append(RoleRule(claim: claim, match: match, value: ruleValue, role: role))
            }
        }
        var defaultRole: String?
        switch section["DefaultRole"] {
        case nil, .null?: break
        case .string(let role)?:
            guard roles.contains(role) else { throw fail("DefaultRole names the unknown role \"\(role)\"") }
            defaultRole = role
        default: throw fail("DefaultRole must be a role name")
        }
        return (AuthenticationSettings(allowAnonymous: allowAnonymous, providers: providers, roleRules: rules,
                                       defaultRole: defaultRole, webhook: webhook), unknown)
    }

    /// A source's `SubjectPrefix`: text a subject may contain (`google:`, `corp.`), or none.
    static func subjectPrefix(_ value: JSONValue?, at: String, fail: (String) -> ConfigError) throws(ConfigError) -> String {
        switch value {
        case nil, .null?: return ""
        case .string(let prefix)?:
            if let problem = Subject.problem(prefix + "x") {
                throw fail("\(at).SubjectPrefix \"\(prefix)\" cannot begin a user's name: \(problem)")
            }
            return prefix
        default: throw fail("\(at).SubjectPrefix must be a string")
        }
    }

    /// With more than one identity source (providers, the webhook), two could name the same
    /// user (`alice` at one provider and `alice` at another would share `${user}`'s space). So
    /// each must then have a `SubjectPrefix`, and none may begin another (`a` and `ab`: `a`+`bx`
    /// is `ab`+`x`): the names of different sources can then never be the same.
    static func checkSubjectPrefixes(providers: [ProviderSettings], webhook: WebhookSettings?,
                                     fail: (String) -> ConfigError) throws(ConfigError) {
        var sources = providers.enumerated().map { ("Providers[\($0.offset)] (\($0.element.issuer))", $0.element.subjectPrefix) }
        if let webhook { sources.append(("Webhook", webhook.subjectPrefix)) }
        guard sources.count > 1 else { return }
        if let unprefixed = sources.first(where: { $0.1.isEmpty }) {
            throw fail("\(unprefixed.0) needs a SubjectPrefix: with \(sources.count) identity sources, two could name the same user "
                + "and share one ${user} space; give each source its own prefix (for example \"google:\")")
        }
        for (index, first) in sources.enumerated() {
            for second in sources[(index + 1)...] where first.1.hasPrefix(second.1) || second.1.hasPrefix(first.1) {
                throw fail("the SubjectPrefix \"\(first.1)\" of \(first.0) and \"\(second.1)\" of \(second.0) overlap: "
                    + "a user of one could be named like a user of the other; use prefixes that do not begin one another")
            }
        }
    }

    private static func parseProvider(_ object: [String: JSONValue], index: Int, fail: (String) -> ConfigError,
                                      environment: [String: String]) throws(ConfigError) -> (ProviderSettings, [String]) {
        let at = "Providers[\(index)]"
        func string(_ key: String) throws(ConfigError) -> String? {
            switch object[key] {
            case nil, .null?: return nil
            case .string(let text)?: return text
            default: throw fail("\(at).\(key) must be a string")
            }
        }
        func strings(_ key: String) throws(ConfigError) -> [String]? {
            switch object[key] {
            case nil, .null?: return nil
            case .array(let items)?:
                var out: [String] = []
                for item in items {
                    guard case .string(let text) = item else { throw fail("\(at).\(key) must be an array of strings") }
                    out.append(text)
                }
                return out
            default: throw fail("\(at).\(key) must be an array of strings")
            }
        }
        guard let issuer = try string("Issuer"), !issuer.isEmpty else { throw fail("\(at).Issuer is required") }
        let name = try string("Name") ?? issuer
        guard let audiences = try strings("Audiences"), !audiences.isEmpty else {
            throw fail("\(at).Audiences must list the audiences (client ids) this server accepts")
        }
        var algorithms: [JWTAlgorithmName] = []
        for text in try strings("Algorithms") ?? ["RS256", "ES256"] {
            guard let algorithm = JWTAlgorithmName(rawValue: text) else {
                throw fail("\(at).Algorithms: \"\(text)\" is not accepted (use \(JWTAlgorithmName.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            algorithms.append(algorithm)
        }
        let jwksURL = try string("JWKSURL"), discoveryURL = try string("DiscoveryURL")
        if algorithms.contains(where: { !$0.isHMAC }), jwksURL == nil, discoveryURL == nil {
            throw fail("\(at) needs JWKSURL or DiscoveryURL for \(algorithms.filter { !$0.isHMAC }.map(\.rawValue).joined(separator: ", "))")
        }
        var hmacSecret: [UInt8]?
        if algorithms.contains(where: \.isHMAC) {
            guard let variable = try string("HMACSecretEnv") else {
                throw fail("\(at).HMACSecretEnv must name the environment variable holding the HS256/384/512 secret")
            }
            guard let secret = environment[variable], secret.utf8.count >= minimumSecretLength else {
                throw fail("\(at): the environment variable \(variable) must hold a secret of at least \(minimumSecretLength) bytes")
            }
            hmacSecret = Array(secret.utf8)
        }
        var leeway = 60
        switch object["LeewaySeconds"] {
        case nil, .null?: break
        case let given?:
            guard let number = given.integer(in: 0...600) else { throw fail("\(at).LeewaySeconds must be a whole number from 0 to 600") }
            leeway = number
        }
        let claims = try strings("Claims") ?? []
        for claim in claims where claim.isEmpty || !claim.utf8.allSatisfy({ $0 < 0x80 && (Character(UnicodeScalar($0)).isLetter || Character(UnicodeScalar($0)).isNumber || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")) }) {
            throw fail("\(at).Claims: \"\(claim)\" must be letters, digits, _ - .")
        }
        let provider = ProviderSettings(
            name: name, issuer: issuer, jwksURL: jwksURL, discoveryURL: discoveryURL, audiences: audiences,
            algorithms: algorithms, subjectClaim: try string("SubjectClaim") ?? "sub", leewaySeconds: leeway,
            hmacSecret: hmacSecret, carriedClaims: claims, subjectPrefix: try subjectPrefix(object["SubjectPrefix"], at: at, fail: fail)
        )
        let unknown = object.keys.filter { !providerKeys.contains($0) }.sorted().map { "Authentication.\(at).\($0)" }
        return (provider, unknown)
    }
}
