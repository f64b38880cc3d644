import TollgateIdentity

/// `RateLimits` in config.json: token-bucket limits on the token endpoint, per client address
/// and per subject. A per-minute figure of 0 turns that limit off.
///
/// ```json
/// "RateLimits": {"PerAddressPerMinute": 600, "PerAddressBurst": 600,
///                "PerSubjectPerMinute": 60, "PerSubjectBurst": 60, "MaxTrackedKeys": 65536}
/// ```
public struct RateLimitSettings: Sendable, Equatable {
    public static let keys = ["PerAddressPerMinute", "PerAddressBurst", "PerSubjectPerMinute", "PerSubjectBurst", "MaxTrackedKeys"]

    /// Requests a minute from one client address (0: unlimited). Mobile clients behind a
    /// carrier NAT share addresses, hence a generous default.
    public var perAddress = RateLimit(perMinute: 600)
    /// Requests a minute for one authenticated subject (0: unlimited).
    public var perSubject = RateLimit(perMinute: 60)
    /// Keys (addresses, subjects) each limiter tracks at most; idle ones are evicted first.
    public var maxTrackedKeys = 65_536

    public init() {}

    /// Reads the `RateLimits` member of config.json (nil: the defaults).
    static func parse(_ value: JSONValue?, file: String) throws(ConfigError) -> RateLimitSettings {
        var settings = RateLimitSettings()
        guard let value, value != .null else { return settings }
        guard case .object(let members) = value else { throw ConfigError(file: file, "RateLimits must be an object") }
        if let unknown = members.keys.filter({ !keys.contains($0) }).sorted().first {
            throw ConfigError(file: file, "RateLimits: unknown key \"\(unknown)\" (known: \(keys.joined(separator: ", ")))")
        }
        func count(_ key: String, _ defaultValue: Int, minimum: Int = 0) throws(ConfigError) -> Int {
            switch members[key] {
            case nil, .null?:
                return defaultValue
            case let given?:
                guard let number = given.integer(in: minimum...1_000_000_000_000) else {
                    throw ConfigError(file: file, "RateLimits.\(key) must be a whole number ≥ \(minimum)")
                }
                return number
            }
        }
        let addressRate = try count("PerAddressPerMinute", settings.perAddress.perMinute)
        settings.perAddress = RateLimit(perMinute: addressRate, burst: try count("PerAddressBurst", max(1, addressRate), minimum: 1))
        let subjectRate = try count("PerSubjectPerMinute", settings.perSubject.perMinute)
        settings.perSubject = RateLimit(perMinute: subjectRate, burst: try count("PerSubjectBurst", max(1, subjectRate), minimum: 1))
        settings.maxTrackedKeys = try count("MaxTrackedKeys", settings.maxTrackedKeys, minimum: 64)
        return settings
    }
}

/// A token-bucket limit: `perMinute` requests a minute on average, at most `burst` at once.
public struct RateLimit: Sendable, Equatable {
    public var perMinute: Int
    public var burst: Int

    public init(perMinute: Int, burst: Int? = nil) {
        self.perMinute = perMinute
        self.burst = burst ?? perMinute
    }

    package var perSecond: Double { Double(perMinute) / 60 }
}
