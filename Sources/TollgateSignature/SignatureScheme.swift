/// Which authentication scheme a request uses, decided from its headers and query alone.
/// The gateway calls this first, then `S3SigV4.verify` or `OSSSignature.verify`.
public enum SignatureScheme: Sendable, Equatable {
    case anonymous
    case s3SigV4Header
    case s3SigV4Query
    case s3SigV2Header
    case s3SigV2Query
    case ossV1Header
    case ossV1Query
    case ossV2Header
    case ossV2Query
    case ossV4Header
    case ossV4Query
    /// A scheme Tollgate does not implement (`Bearer`, `OSS3`, …), by name.
    case unsupported(String)

    public var dialect: SignatureDialect? {
        switch self {
        case .s3SigV4Header, .s3SigV4Query: .s3SigV4
        case .s3SigV2Header, .s3SigV2Query: .s3SigV2
        case .ossV1Header, .ossV1Query: .ossV1
        case .ossV2Header, .ossV2Query: .ossV2
        case .ossV4Header, .ossV4Query: .ossV4
        case .anonymous, .unsupported: nil
        }
    }

    /// Whether the signature covers the query parameter `name`. SigV4 (S3 and OSS) and OSS V2
    /// sign the whole query; S3 SigV2 and OSS V1 sign only their sub-resources (botocore's and
    /// oss2's lists), so any other parameter may be added to a signed URL by anyone.
    public func signsQueryParameter(_ name: String) -> Bool {
        switch self {
        case .s3SigV2Header, .s3SigV2Query: S3SigV2.subresources.contains(name)
        case .ossV1Header, .ossV1Query: OSSSignature.v1SubResources.contains(name)
        case .s3SigV4Header, .s3SigV4Query, .ossV2Header, .ossV2Query, .ossV4Header, .ossV4Query: true
        case .anonymous, .unsupported: false
        }
    }

    /// True when the request speaks the OSS dialect (and gets OSS errors and headers back):
    /// `Authorization: OSS …`/`OSS2 …`/`OSS4-HMAC-SHA256 …` (or any other scheme named `OSS…`),
    /// or `OSSAccessKeyId`/`x-oss-signature-version` in the query.
    public var isOSS: Bool {
        switch self {
        case .ossV1Header, .ossV1Query, .ossV2Header, .ossV2Query, .ossV4Header, .ossV4Query: true
        case .unsupported(let name): name.hasPrefix("OSS")
        default: false
        }
    }

    public static func detect(_ request: SignatureRequest) -> SignatureScheme {
        if let authorization = request.headers["authorization"] {
            if authorization.hasPrefix("OSS4-HMAC-SHA256 ") { return .ossV4Header }
            if authorization.hasPrefix("OSS ") { return .ossV1Header }
            if authorization.hasPrefix("OSS2 ") { return .ossV2Header }
            if authorization.hasPrefix("AWS4-HMAC-SHA256 ") { return .s3SigV4Header }
            if authorization.hasPrefix("AWS ") { return .s3SigV2Header }
            let name = authorization.prefix { $0 != " " }
            return .unsupported(String(name))
        }
        // The schemes' parameters, in this order of precedence.
        let query = request.query
        if let index = query.firstIndex(named: "x-oss-signature-version") {
            let version = query.value(at: index)
            switch version {
            case "OSS4-HMAC-SHA256": return .ossV4Query
            case "OSS2": return .ossV2Query
            default: return .unsupported(version)
            }
        }
        if query.contains(named: "OSSAccessKeyId") { return .ossV1Query }
        if query.contains(named: "X-Amz-Algorithm") { return .s3SigV4Query }
        if query.contains(named: "AWSAccessKeyId") { return .s3SigV2Query }
        return .anonymous
    }
}
