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
    case ossV4Header
    case ossV4Query
    /// A scheme Tollgate does not implement (`OSS2`, …), by name.
    case unsupported(String)

    public var dialect: SignatureDialect? {
        switch self {
        case .s3SigV4Header, .s3SigV4Query: .s3SigV4
        case .s3SigV2Header, .s3SigV2Query: .s3SigV2
        case .ossV1Header, .ossV1Query: .ossV1
        case .ossV4Header, .ossV4Query: .ossV4
        case .anonymous, .unsupported: nil
        }
    }

    /// True when the request speaks the OSS dialect (and gets OSS errors and headers back):
    /// `Authorization: OSS …`/`OSS4-HMAC-SHA256 …`, or `OSSAccessKeyId`/`x-oss-signature-version`
    /// in the query.
    public var isOSS: Bool {
        switch self {
        case .ossV1Header, .ossV1Query, .ossV4Header, .ossV4Query: true
        case .unsupported(let name): name.hasPrefix("OSS")
        default: false
        }
    }

    public static func detect(_ request: SignatureRequest) -> SignatureScheme {
        if let authorization = request.headers["authorization"] {
            if authorization.hasPrefix("OSS4-HMAC-SHA256 ") { return .ossV4Header }
            if authorization.hasPrefix("OSS ") { return .ossV1Header }
            if authorization.hasPrefix("AWS4-HMAC-SHA256 ") { return .s3SigV4Header }
            if authorization.hasPrefix("AWS ") { return .s3SigV2Header }
            let name = authorization.prefix { $0 != " " }
            return .unsupported(String(name))
        }
        // One pass over the query; the schemes' parameters in this order of precedence.
        let items = request.rawQueryItems
        var (ossV1, s3V4, s3V2) = (false, false, false)
        for index in items.indices {
            let name = items[index].name
            // Lengths first: most names are none of these.
            switch name.utf8.count {
            case 23 where name == "x-oss-signature-version":
                let version = items[index].value
                return version == "OSS4-HMAC-SHA256" ? .ossV4Query : .unsupported(version)
            case 14 where name == "OSSAccessKeyId": ossV1 = true
            case 15 where name == "X-Amz-Algorithm": s3V4 = true
            case 14 where name == "AWSAccessKeyId": s3V2 = true
            default: continue
            }
        }
        if ossV1 { return .ossV1Query }
        if s3V4 { return .s3SigV4Query }
        if s3V2 { return .s3SigV2Query }
        return .anonymous
    }
}
