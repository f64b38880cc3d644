/// A bucket's own CORS rules (PutBucketCors), which replace config.json's gateway default for
/// that bucket: the first rule that admits a request decides, as in S3 and OSS.
public struct CORSConfiguration: Sendable, Equatable, Codable {
    /// S3's limits: rules in one configuration, and bytes of its XML.
    public static let maxRules = 100
    public static let maxBytes = 64 * 1024
    /// The longest rule `ID` S3 accepts.
    public static let maxIDLength = 255

    public var rules: [CORSRule]
    /// OSS's `ResponseVary`, kept as given (the gateway always answers `Vary: Origin`).
    public var responseVary: Bool?

    public init(rules: [CORSRule], responseVary: Bool? = nil) {
        self.rules = rules
        self.responseVary = responseVary
    }

    enum CodingKeys: String, CodingKey {
        case rules = "Rules", responseVary = "ResponseVary"
    }

    /// The first negative `MaxAgeSeconds`, which the XML reader reads (an integer) and the
    /// gateway refuses in each dialect's way (S3: `MalformedXML`, OSS: `InvalidArgument`).
    public var negativeMaxAgeSeconds: Int? {
        rules.lazy.compactMap(\.maxAgeSeconds).first { $0 < 0 }
    }

    /// Why S3 refuses this well-formed configuration (its `InvalidRequest` message), or nil
    /// when it is accepted. What is not well-formed (no rule, a rule without an origin or a
    /// method, a MaxAgeSeconds that is not an integer) the XML reader refuses.
    public var refusal: String? {
        guard rules.count <= Self.maxRules else { return "The CORS configuration has more than \(Self.maxRules) rules." }
        for rule in rules {
            if let id = rule.id, id.count > Self.maxIDLength {
                return "The ID of a CORS rule is longer than \(Self.maxIDLength) characters."
            }
            if let method = rule.allowedMethods.first(where: { !CORSRule.methods.contains($0) }) {
                return "Found unsupported HTTP method in CORS config. Unsupported method is \(method)"
            }
            if let origin = rule.allowedOrigins.first(where: { Self.stars($0) > 1 }) {
                return "AllowedOrigin \"\(origin)\" can not have more than one wildcard."
            }
            if let header = rule.allowedHeaders.first(where: { Self.stars($0) > 1 }) {
                return "AllowedHeader \"\(header)\" can not have more than one wildcard."
            }
            if let header = rule.exposeHeaders.first(where: { $0.contains("*") }) {
                return "ExposeHeader \"\(header)\" contains wildcard. We currently do not support wildcard for ExposeHeader."
            }
            // Expose headers are sent back in Access-Control-Expose-Headers: only header names.
            if let header = rule.exposeHeaders.first(where: { !Self.isHeaderName($0) }) {
                return "ExposeHeader \"\(header)\" is not a header name."
            }
        }
        return nil
    }

    static func stars(_ text: String) -> Int {
        text.utf8.count { $0 == UInt8(ascii: "*") }
    }

    /// An HTTP token (RFC 9110 `tchar`s), which is what a header name is.
    static func isHeaderName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }
}
