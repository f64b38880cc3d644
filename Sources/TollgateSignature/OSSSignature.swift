import Foundation
import TollgateCrypto
import TollgateDates

/// OSS request signatures: V1 (`Authorization: OSS ak:sig`, HMAC-SHA1, and `OSSAccessKeyId`
/// presigned URLs) and V4 (`OSS4-HMAC-SHA256`, header and presigned), canonicalised exactly as
/// Alibaba's oss2 SDK (`oss2/auth.py`) signs.
///
/// OSS signs the bucket and the decoded object key rather than the request path (which differs
/// between path-style and virtual-host addressing), so the HTTP layer passes both explicitly:
/// `bucket` nil for service-level requests (ListBuckets), `key` nil or empty for bucket-level ones.
public enum OSSSignature {
    public static let v4Algorithm = "OSS4-HMAC-SHA256"
    public static let v4Terminator = "aliyun_v4_request"
    public static let v4Product = "oss"
    public static let maxPresignedExpires = 604_800

    /// The query parameters that V1 signs as sub-resources: oss2 2.19.1
    /// `ProviderAuth._subresource_key_set`, in its order, without its two repeated entries.
    public static let v1SubResources: Set<String> = [
        "response-content-type", "response-content-language",
        "response-cache-control", "logging", "response-content-encoding",
        "acl", "uploadId", "uploads", "partNumber", "group", "link",
        "delete", "website", "location", "objectInfo", "objectMeta",
        "response-expires", "response-content-disposition", "cors", "lifecycle",
        "restore", "qos", "referer", "stat", "bucketInfo", "append", "position", "security-token",
        "live", "comp", "status", "vod", "startTime", "endTime", "x-oss-process",
        "symlink", "callback", "callback-var", "tagging", "encryption", "versions",
        "versioning", "versionId", "policy", "requestPayment", "x-oss-traffic-limit", "qosInfo", "asyncFetch",
        "x-oss-request-payer", "sequential", "inventory", "inventoryId", "continuation-token",
        /* oss2 lists "callback" and "callback-var" a second time here */ "worm", "wormId", "wormExtend", "replication", "replicationLocation",
        "replicationProgress", "transferAcceleration", "cname", "metaQuery",
        "x-oss-ac-source-ip", "x-oss-ac-subnet-mask", "x-oss-ac-vpc-id", "x-oss-ac-forward-allow",
        "resourceGroup", "style", "styleName", "x-oss-async-process", "regionList", "x-oss-write-get-object-response",
        "bucketArchiveDirectRead", "httpsConfig", "redundancyTransition", "x-oss-target-redundancy-type", "x-oss-redundancy-transition-taskid",
        "accessPoint", "accessPointPolicy", "publicAccessBlock", "x-oss-access-point-name",
        "requesterQosInfo", "qosRequester", "resourcePoolInfo", "resourcePool", "resourcePoolBuckets",
    ]

    /// Verifies an OSS-signed request (any of the four forms).
    public static func verify(_ request: SignatureRequest, bucket: String?, key: String?,
                              lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let query = request.rawQueryItems
        let token = try securityToken(request, query: query)
        switch SignatureScheme.detect(request) {
        case .ossV1Header: return try verifyV1Header(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV1Query: return try verifyV1Query(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV4Header: return try verifyV4Header(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV4Query: return try verifyV4Query(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .unsupported(let name):
            throw .invalidArgument(message: "Unsupported signature version.", name: "Authorization", value: name)
        case .anonymous, .s3SigV4Header, .s3SigV4Query:
            throw .accessDenied("AccessDenied")
        }
    }

    /// `x-oss-security-token` header, or `security-token` (V1) / `x-oss-security-token` (V4)
    /// query parameter; more than one is an InvalidArgument.
    static func securityToken(_ request: SignatureRequest, query: [RawQueryItem]) throws(OSSAuthError) -> String? {
        var found: [(String, String)] = []
        for value in request.headers.values("x-oss-security-token") { found.append(("x-oss-security-token", value)) }
        for item in query where item.name == "security-token" || item.name == "x-oss-security-token" {
            found.append((String(item.name), item.value))
        }
        guard found.count <= 1 else {
            throw .invalidArgument(message: "The security token must be sent either in the x-oss-security-token header or in the query, not both.",
                                   name: found[1].0, value: "")
        }
        return found.first?.1
    }

    static func lookupSecret(_ accessKeyId: String, token: String?, dialect: SignatureDialect,
                             lookup: SecretLookup) throws(OSSAuthError) -> String {
        do {
            return try lookup(CredentialQuery(accessKeyId: accessKeyId, securityToken: token, dialect: dialect))
        } catch {
            throw OSSAuthError(error, accessKeyId: accessKeyId)
        }
    }

    static func checkSkew(_ requestTime: Date, now: Date) throws(OSSAuthError) {
        if abs(requestTime.timeIntervalSince(now)) > maxClockSkewSeconds {
            throw .requestTimeTooSkewed(requestTime: requestTime, serverTime: now)
        }
    }

    // MARK: V1

    /// `x-oss-*` headers, lowercased, sorted, `name:value\n` (repeated headers joined by `,`).
    static func canonicalizedOSSHeaders(_ headers: SignatureHeaders) -> String {
        headers.names.filter { $0.hasPrefix("x-oss-") }.sorted().map { name in
            name + ":" + headers.values(name).map { $0.trimmingASCIIWhitespace() }.joined(separator: ",") + "\n"
        }.joined()
    }

    /// `/bucket/key` (or `/`) plus the signed sub-resources, decoded, sorted by name.
    public static func canonicalizedResourceV1(bucket: String?, key: String?, query: [RawQueryItem]) -> String {
        var resource = "/"
        if let bucket, !bucket.isEmpty { resource = "/\(bucket)/\(key ?? "")" }
        let subresources = query.filter { v1SubResources.contains(String($0.name)) }
            .map { (String($0.name), $0.value) }
            .sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        if !subresources.isEmpty {
            resource += "?" + subresources.map { $0.1.isEmpty ? $0.0 : "\($0.0)=\($0.1)" }.joined(separator: "&")
        }
        return resource
    }

    public static func stringToSignV1(method: String, headers: SignatureHeaders, date: String, bucket: String?,
                                      key: String?, rawQuery: String) -> String {
        stringToSignV1(method: method, headers: headers, date: date, bucket: bucket, key: key,
                       query: RawQueryItem.parse(rawQuery))
    }

    static func stringToSignV1(method: String, headers: SignatureHeaders, date: String, bucket: String?,
                               key: String?, query: [RawQueryItem]) -> String {
        let md5 = headers["content-md5"]?.trimmingASCIIWhitespace() ?? ""
        let type = headers["content-type"]?.trimmingASCIIWhitespace() ?? ""
        return [method, md5, type, date,
                canonicalizedOSSHeaders(headers) + canonicalizedResourceV1(bucket: bucket, key: key, query: query)]
            .joined(separator: "\n")
    }

    static func checkV1(secret: String, stringToSign: String, provided: String, accessKeyId: String) throws(OSSAuthError) {
        let expected: String
        do {
            expected = Base64.encode(try Crypto.hmacSHA1(key: Array(secret.utf8), data: Array(stringToSign.utf8)))
        } catch {
            throw .internalError
        }
        guard Crypto.constantTimeEqual(expected, provided) else {
            throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: accessKeyId, stringToSign: stringToSign,
                                                              signatureProvided: provided, canonicalRequest: ""))
        }
    }

    static func verifyV1Header(_ request: SignatureRequest, query: [RawQueryItem], bucket: String?, key: String?,
                               token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let authorization = request.headers["authorization"] ?? ""
        let credentials = authorization.dropFirst("OSS ".count).trimmingASCIIWhitespace()
        guard let colon = credentials.lastIndex(of: ":") else {
            throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
        }
        let accessKeyId = String(credentials[..<colon])
        let signature = String(credentials[credentials.index(after: colon)...])
        guard !accessKeyId.isEmpty, !signature.isEmpty else {
            throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
        }
        // oss2 signs x-oss-date when present, Date otherwise.
        guard let date = (request.headers["x-oss-date"] ?? request.headers["date"])?.trimmingASCIIWhitespace(),
              let requestTime = WireDate.parseHTTPDate(date) ?? WireDate.parseISO8601Basic(date)
        else {
            throw .accessDenied("OSS authentication requires a valid Date.")
        }
        try checkSkew(requestTime, now: request.now)
        let secret = try lookupSecret(accessKeyId, token: token, dialect: .ossV1, lookup: lookup)
        let stringToSign = stringToSignV1(method: request.method, headers: request.headers, date: date,
                                          bucket: bucket, key: key, query: query)
        try checkV1(secret: secret, stringToSign: stringToSign, provided: signature, accessKeyId: accessKeyId)
        return VerifiedIdentity(accessKeyId: accessKeyId, dialect: .ossV1, securityToken: token, presigned: false,
                                region: nil, signedHeaders: v1SignedHeaders(request.headers),
                                requestTime: requestTime, expires: nil)
    }

    static func verifyV1Query(_ request: SignatureRequest, query: [RawQueryItem], bucket: String?, key: String?,
                              token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        guard let accessKeyId = query.first(named: "OSSAccessKeyId"), !accessKeyId.isEmpty,
              let expiresValue = query.first(named: "Expires"),
              let signature = query.first(named: "Signature"), !signature.isEmpty
        else {
            throw .accessDenied("Presigned URLs require the OSSAccessKeyId, Expires and Signature parameters.")
        }
        guard let epoch = Int(expiresValue), expiresValue.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .invalidArgument(message: "Expires is not a valid number.", name: "Expires", value: expiresValue)
        }
        let expires = Date(timeIntervalSince1970: TimeInterval(epoch))
        if request.now > expires { throw .requestExpired(expires: expires, serverTime: request.now) }
        let secret = try lookupSecret(accessKeyId, token: token, dialect: .ossV1, lookup: lookup)
        let stringToSign = stringToSignV1(method: request.method, headers: request.headers, date: expiresValue,
                                          bucket: bucket, key: key, query: query)
        try checkV1(secret: secret, stringToSign: stringToSign, provided: signature, accessKeyId: accessKeyId)
        return VerifiedIdentity(accessKeyId: accessKeyId, dialect: .ossV1, securityToken: token, presigned: true,
                                region: nil, signedHeaders: v1SignedHeaders(request.headers),
                                requestTime: nil, expires: expires)
    }

    static func v1SignedHeaders(_ headers: SignatureHeaders) -> [String] {
        let names = headers.names
        return (["content-md5", "content-type"].filter(names.contains) + names.filter { $0.hasPrefix("x-oss-") }).sorted()
    }

    // MARK: V4

    struct V4Credential {
        var accessKeyId: String
        var date: String
        var region: String
        var scope: String { "\(date)/\(region)/\(OSSSignature.v4Product)/\(OSSSignature.v4Terminator)" }
    }

    static func parseV4Credential(_ value: String) -> V4Credential? {
        let parts = value.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 5, parts[parts.count - 1] == v4Terminator, parts[parts.count - 2] == v4Product else { return nil }
        let accessKeyId = parts[0..<(parts.count - 4)].joined(separator: "/")
        let date = String(parts[parts.count - 4])
        guard !accessKeyId.isEmpty, date.utf8.count == 8, date.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return V4Credential(accessKeyId: accessKeyId, date: date, region: String(parts[parts.count - 3]))
    }

    /// oss2's V4 canonical URI: `/bucket/key` (or `/`), percent-encoded with `/` kept.
    public static func canonicalURIV4(bucket: String?, key: String?) -> String {
        guard let bucket, !bucket.isEmpty else { return "/" }
        return PercentEncoding.encode("/\(bucket)/\(key ?? "")", keepSlash: true)
    }

    static func canonicalQueryV4(_ query: [RawQueryItem], excludingSignature: Bool) -> String {
        var pairs: [(String, String)] = []
        for item in query {
            let name = item.name
            if excludingSignature && name == "x-oss-signature" { continue }
            pairs.append((PercentEncoding.encode(name), PercentEncoding.encode(item.value)))
        }
        pairs.sort { lhs, rhs in
            lhs.0 != rhs.0 ? lhs.0.utf8.lexicographicallyPrecedes(rhs.0.utf8) : lhs.1.utf8.lexicographicallyPrecedes(rhs.1.utf8)
        }
        return pairs.map { $0.1.isEmpty ? $0.0 : "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// Headers signed by V4: `x-oss-*`, `content-type`, `content-md5` and the additional headers.
    static func v4SignedHeaderNames(_ headers: SignatureHeaders, additional: [String]) -> [String] {
        let extra = Set(additional)
        return headers.names.filter { $0.hasPrefix("x-oss-") || $0 == "content-type" || $0 == "content-md5" || extra.contains($0) }
            .sorted()
    }

    public static func canonicalRequestV4(method: String, bucket: String?, key: String?, rawQuery: String,
                                          headers: SignatureHeaders, additionalHeaders: [String], presigned: Bool) -> String {
        canonicalRequestV4(method: method, bucket: bucket, key: key, query: RawQueryItem.parse(rawQuery),
                           headers: headers, additionalHeaders: additionalHeaders, presigned: presigned)
    }

    static func canonicalRequestV4(method: String, bucket: String?, key: String?, query: [RawQueryItem],
                                   headers: SignatureHeaders, additionalHeaders: [String], presigned: Bool) -> String {
        let canonicalHeaders = v4SignedHeaderNames(headers, additional: additionalHeaders).map { name in
            name + ":" + headers.values(name).map { $0.trimmingASCIIWhitespace() }.joined(separator: ",") + "\n"
        }.joined()
        let payload = headers["x-oss-content-sha256"]?.trimmingASCIIWhitespace() ?? "UNSIGNED-PAYLOAD"
        return [method, canonicalURIV4(bucket: bucket, key: key),
                canonicalQueryV4(query, excludingSignature: presigned),
                canonicalHeaders, additionalHeaders.sorted().joined(separator: ";"), payload].joined(separator: "\n")
    }

    static func parseAdditionalHeaders(_ value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ";").map { $0.trimmingASCIIWhitespace().lowercased() }.filter { !$0.isEmpty }.sorted()
    }

    static func checkV4(secret: String, credential: V4Credential, timestamp: String, canonicalRequest: String,
                        provided: String) throws(OSSAuthError) {
        let expected: String
        let stringToSign: String
        do {
            let hash = Hex.encode(try Crypto.sha256(Array(canonicalRequest.utf8)))
            stringToSign = "\(v4Algorithm)\n\(timestamp)\n\(credential.scope)\n\(hash)"
            var key = try Crypto.hmacSHA256(key: Array(("aliyun_v4" + secret).utf8), credential.date)
            key = try Crypto.hmacSHA256(key: key, credential.region)
            key = try Crypto.hmacSHA256(key: key, v4Product)
            key = try Crypto.hmacSHA256(key: key, v4Terminator)
            expected = Hex.encode(try Crypto.hmacSHA256(key: key, stringToSign))
        } catch {
            throw .internalError
        }
        guard Crypto.constantTimeEqual(expected, provided.lowercased()) else {
            throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: credential.accessKeyId, stringToSign: stringToSign,
                                                              signatureProvided: provided, canonicalRequest: canonicalRequest))
        }
    }

    static func verifyV4Header(_ request: SignatureRequest, query: [RawQueryItem], bucket: String?, key: String?,
                               token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let authorization = request.headers["authorization"] ?? ""
        var fields: [String: String] = [:]
        for part in authorization.dropFirst(v4Algorithm.count + 1).split(separator: ",") {
            let item = part.trimmingASCIIWhitespace()
            guard let eq = item.firstIndex(of: "=") else {
                throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
            }
            fields[String(item[..<eq])] = String(item[item.index(after: eq)...])
        }
        guard let credentialValue = fields["Credential"], let credential = parseV4Credential(credentialValue),
              let signature = fields["Signature"], !signature.isEmpty
        else {
            throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
        }
        guard let timestamp = request.headers["x-oss-date"]?.trimmingASCIIWhitespace(),
              let requestTime = WireDate.parseISO8601Basic(timestamp)
        else {
            throw .accessDenied("OSS V4 authentication requires a valid x-oss-date header.")
        }
        guard timestamp.hasPrefix(credential.date) else {
            throw .invalidArgument(message: "The date in Credential does not match x-oss-date.", name: "Credential", value: credentialValue)
        }
        try checkSkew(requestTime, now: request.now)
        return try verifyV4Signature(
            request, query: query, bucket: bucket, key: key, token: token, credential: credential, timestamp: timestamp,
            requestTime: requestTime, expires: nil, additionalHeaders: fields["AdditionalHeaders"], signature: signature,
            lookup: lookup
        )
    }

    static func verifyV4Query(_ request: SignatureRequest, query: [RawQueryItem], bucket: String?, key: String?,
                              token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        guard let credentialValue = query.first(named: "x-oss-credential"),
              let timestamp = query.first(named: "x-oss-date"),
              let expiresValue = query.first(named: "x-oss-expires"),
              let signature = query.first(named: "x-oss-signature"), !signature.isEmpty
        else {
            throw .accessDenied("Presigned V4 URLs require x-oss-credential, x-oss-date, x-oss-expires and x-oss-signature.")
        }
        guard let credential = parseV4Credential(credentialValue) else {
            throw .invalidArgument(message: "x-oss-credential is invalid.", name: "x-oss-credential", value: credentialValue)
        }
        guard let requestTime = WireDate.parseISO8601Basic(timestamp), timestamp.hasPrefix(credential.date) else {
            throw .invalidArgument(message: "x-oss-date is invalid.", name: "x-oss-date", value: timestamp)
        }
        guard let seconds = Int(expiresValue), expiresValue.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              (1...maxPresignedExpires).contains(seconds)
        else {
            throw .invalidArgument(message: "x-oss-expires must be between 1 and 604800 seconds.", name: "x-oss-expires", value: expiresValue)
        }
        if requestTime.timeIntervalSince(request.now) > maxClockSkewSeconds {
            throw .accessDenied("Request is not valid yet.")
        }
        let expires = requestTime.addingTimeInterval(TimeInterval(seconds))
        if request.now > expires { throw .requestExpired(expires: expires, serverTime: request.now) }
        return try verifyV4Signature(
            request, query: query, bucket: bucket, key: key, token: token, credential: credential, timestamp: timestamp,
            requestTime: requestTime, expires: expires, additionalHeaders: query.first(named: "x-oss-additional-headers"),
            signature: signature, lookup: lookup
        )
    }

    /// The common end of both V4 forms; a request with an expiry is presigned.
    static func verifyV4Signature(
        _ request: SignatureRequest, query: [RawQueryItem], bucket: String?, key: String?, token: String?,
        credential: V4Credential, timestamp: String, requestTime: Date, expires: Date?, additionalHeaders: String?,
        signature: String, lookup: SecretLookup
    ) throws(OSSAuthError) -> VerifiedIdentity {
        let presigned = expires != nil
        let additional = parseAdditionalHeaders(additionalHeaders)
        let secret = try lookupSecret(credential.accessKeyId, token: token, dialect: .ossV4, lookup: lookup)
        let canonical = canonicalRequestV4(method: request.method, bucket: bucket, key: key, query: query,
                                           headers: request.headers, additionalHeaders: additional, presigned: presigned)
        try checkV4(secret: secret, credential: credential, timestamp: timestamp, canonicalRequest: canonical, provided: signature)
        return VerifiedIdentity(accessKeyId: credential.accessKeyId, dialect: .ossV4, securityToken: token, presigned: presigned,
                                region: credential.region,
                                signedHeaders: v4SignedHeaderNames(request.headers, additional: additional),
                                requestTime: requestTime, expires: expires)
    }
}
