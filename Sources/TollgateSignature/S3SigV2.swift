import Foundation
import TollgateCrypto
import TollgateDates

/// AWS Signature Version 2 for S3, as botocore's `HmacV1Auth` / `HmacV1QueryAuth` sign it (the
/// form boto3's `generate_presigned_url` and s3fs's `sign()` still produce by default for a
/// us-east-1 endpoint): HMAC-SHA1 over
///
///     METHOD \n Content-MD5 \n Content-Type \n Date-or-Expires \n
///     x-amz-name:value \n … (lowercased, sorted, repeated values joined by ",")
///     /bucket/key?sub-resources (the path as sent, the signed sub-resources decoded and sorted)
///
/// in the header (`Authorization: AWS AKID:signature`, with a `Date` or `x-amz-date` within the
/// clock-skew window) or in the query (`AWSAccessKeyId`, `Signature`, `Expires` in epoch
/// seconds; the request's `x-amz-*` values, the security token among them, move to the query and
/// are signed from there). Every `x-amz-*` header present is covered, so none can be added.
/// The body is not signed: like SigV4's `UNSIGNED-PAYLOAD`, only `Content-MD5` and checksum
/// headers are verified against it.
public enum S3SigV2 {
    /// The query parameters signed as sub-resources (botocore's `QSAOfInterest`).
    public static let subresources: Set<String> = [
        "accelerate", "acl", "cors", "defaultObjectAcl", "location", "logging", "partNumber", "policy", "requestPayment",
        "torrent", "versioning", "versionId", "versions", "website", "uploads", "uploadId", "response-content-type",
        "response-content-language", "response-expires", "response-cache-control", "response-content-disposition",
        "response-content-encoding", "delete", "lifecycle", "tagging", "restore", "storageClass", "notification",
        "replication", "analytics", "metrics", "inventory", "select", "select-type", "object-lock",
    ]

    /// True when the request is SigV2-signed: `Authorization: AWS …`, or `AWSAccessKeyId` in the query.
    public static func isSigV2(_ request: SignatureRequest) -> Bool {
        if let authorization = request.headers["authorization"] { return authorization.hasPrefix("AWS ") }
        return request.query.contains(named: "AWSAccessKeyId")
    }

    /// `authPath`: the path the client signed, `/bucket/key` as sent (for a virtual-hosted
    /// request, `/bucket` followed by the path). `bucketLevel`: the request names a bucket and no
    /// key, which clients sign as `/bucket` or, as botocore does, `/bucket/`; both are accepted.
    public static func verify(_ request: SignatureRequest, authPath: String, bucketLevel: Bool = false,
                              lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        var authPaths = [authPath]
        if bucketLevel { authPaths.append(authPath.hasSuffix("/") ? String(authPath.dropLast()) : authPath + "/") }
        let query = request.query
        if let authorization = request.headers["authorization"] {
            if query.contains(named: "AWSAccessKeyId") || query.contains(named: "Signature") {
                throw .invalidRequest("Only one auth mechanism allowed; only the Signature query parameter or the Authorization header should be specified")
            }
            return try verifyHeader(request, authorization: authorization, authPaths: authPaths, lookup: lookup)
        }
        return try verifyQuery(request, authPaths: authPaths, lookup: lookup)
    }

    static func verifyHeader(_ request: SignatureRequest, authorization: String, authPaths: [String],
                             lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        let credentials = authorization.dropFirst("AWS ".count).trimmingASCIIWhitespace()
        guard let colon = credentials.lastIndex(of: ":"), colon != credentials.startIndex,
              credentials.index(after: colon) != credentials.endIndex else {
            throw .authorizationHeaderMalformed("The Authorization header must be \"AWS AccessKeyId:Signature\".")
        }
        let accessKeyId = String(credentials[..<colon])
        let signature = String(credentials[credentials.index(after: colon)...])
        let amzDate = request.headers["x-amz-date"]
        let date = request.headers["date"]
        guard let stamp = amzDate ?? date, let requestTime = parseDate(stamp.trimmingASCIIWhitespace()) else {
            throw .accessDenied("AWS authentication requires a valid Date or x-amz-date header")
        }
        if abs(requestTime.timeIntervalSince(request.now)) > maxClockSkewSeconds {
            throw .requestTimeTooSkewed(requestTime: requestTime, serverTime: request.now)
        }
        let amz = amzHeaders(request.headers.fields.map { ($0.name, $0.value) })
        // The date line is the Date header (botocore); a client that follows AWS's rule leaves
        // it empty when it sends x-amz-date.
        var dateLines = [date?.trimmingASCIIWhitespace() ?? ""]
        if amzDate != nil, date != nil { dateLines.append("") }
        let strings = authPaths.flatMap { path in
            dateLines.map { line in
                stringToSign(method: request.method, contentMD5: request.headers["content-md5"], contentType: request.headers["content-type"],
                             date: line, amzHeaders: amz, resource: canonicalResource(authPath: path, query: request.query))
            }
        }
        let token = request.headers["x-amz-security-token"]
        let secret = try S3SigV4.lookupSecret(accessKeyId, token: token, dialect: .s3SigV2, lookup: lookup)
        try check(secret: secret, stringsToSign: strings, provided: signature, accessKeyId: accessKeyId)
        let identity = VerifiedIdentity(accessKeyId: accessKeyId, dialect: .s3SigV2, securityToken: token, presigned: false,
                                        region: nil, signedHeaders: signedHeaderNames(request.headers),
                                        requestTime: requestTime, expires: nil)
        return try S3SigV4.finishPayload(request, identity: identity, payload: .unsigned, chunkSigning: nil)
    }

    static func verifyQuery(_ request: SignatureRequest, authPaths: [String], lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        let query = request.query
        guard let accessKeyId = query.first(named: "AWSAccessKeyId"), !accessKeyId.isEmpty,
              let signature = query.first(named: "Signature"), !signature.isEmpty,
              let expiresValue = query.first(named: "Expires")
        else {
            throw .authorizationQueryParametersError("Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
        }
        guard let epoch = Int(expiresValue), expiresValue.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .authorizationQueryParametersError("Expires must be a number of seconds since the epoch")
        }
        let expires = Date(timeIntervalSince1970: TimeInterval(epoch))
        if request.now > expires {
            throw .requestExpired(expires: expires, serverTime: request.now, expiresSeconds: 0)
        }
        // As long as SigV4 allows: a leaked URL must not stay valid for ever.
        guard expires.timeIntervalSince(request.now) <= TimeInterval(S3SigV4.maxPresignedExpires) + maxClockSkewSeconds else {
            throw .authorizationQueryParametersError("Expires must be less than a week (604800 seconds) in the future")
        }
        // botocore moves x-amz-* headers, Content-MD5 and Content-Type into the query; headers
        // sent as headers count too, so nothing unsigned can ride along.
        var amzPairs = request.headers.fields.filter { $0.name.hasPrefix("x-amz-") }.map { ($0.name, $0.value) }
        for index in query.indices {
            let name = query.name(at: index).lowercased()
            if name.hasPrefix("x-amz-") { amzPairs.append((name, query.value(at: index))) }
        }
        let contentMD5 = query.first(named: "content-md5") ?? request.headers["content-md5"]
        let contentType = query.first(named: "content-type") ?? request.headers["content-type"]
        let amz = amzHeaders(amzPairs)
        let strings = authPaths.map { path in
            stringToSign(method: request.method, contentMD5: contentMD5, contentType: contentType, date: expiresValue,
                         amzHeaders: amz, resource: canonicalResource(authPath: path, query: query))
        }
        let token = query.first(named: "x-amz-security-token") ?? request.headers["x-amz-security-token"]
        let secret = try S3SigV4.lookupSecret(accessKeyId, token: token, dialect: .s3SigV2, lookup: lookup)
        try check(secret: secret, stringsToSign: strings, provided: signature, accessKeyId: accessKeyId)
        let identity = VerifiedIdentity(accessKeyId: accessKeyId, dialect: .s3SigV2, securityToken: token, presigned: true,
                                        region: nil, signedHeaders: signedHeaderNames(request.headers),
                                        requestTime: nil, expires: expires)
        return try S3SigV4.finishPayload(request, identity: identity, payload: .unsigned, chunkSigning: nil)
    }

    /// An HTTP date, also with the numeric zone `+0000` that AWS's SigV2 examples (and tools
    /// written from them) use for GMT, or an ISO 8601 basic timestamp.
    static func parseDate(_ text: String) -> Date? {
        if let date = WireDate.parseHTTPDate(text) ?? WireDate.parseISO8601Basic(text) { return date }
        guard text.hasSuffix(" +0000") else { return nil }
        return WireDate.parseHTTPDate(String(text.dropLast(5)) + "GMT")
    }

    // MARK: The string to sign

    /// `name:value` lines for the `x-amz-*` pairs: names lowercased and sorted, a name's values
    /// trimmed and joined by `,`.
    static func amzHeaders(_ pairs: [(String, String)]) -> [String] {
        var values: [String: [String]] = [:]
        for (name, value) in pairs {
            let lower = name.lowercased()
            guard lower.hasPrefix("x-amz-") else { continue }
            values[lower, default: []].append(value.trimmingASCIIWhitespace())
        }
        return values.keys.sorted().map { "\($0):\(values[$0]!.joined(separator: ","))" }
    }

    /// The path as signed, then the signed sub-resources, values decoded, sorted by name.
    static func canonicalResource(authPath: String, query: RawQuery) -> String {
        let signed: [(String, String?)] = query.indices.compactMap { index in
            let name = query.name(at: index)
            guard subresources.contains(name) else { return nil }
            return (name, query.hasValue(at: index) ? query.value(at: index) : nil)
        }.sorted { $0.0 < $1.0 }
        guard !signed.isEmpty else { return authPath }
        return authPath + "?" + signed.map { name, value in value.map { "\(name)=\($0)" } ?? name }.joined(separator: "&")
    }

    public static func stringToSign(method: String, contentMD5: String?, contentType: String?, date: String,
                                    amzHeaders: [String], resource: String) -> String {
        var lines = [method, contentMD5?.trimmingASCIIWhitespace() ?? "", contentType?.trimmingASCIIWhitespace() ?? "", date]
        lines.append(contentsOf: amzHeaders)
        lines.append(resource)
        return lines.joined(separator: "\n")
    }

    static func signedHeaderNames(_ headers: SignatureHeaders) -> [String] {
        (["content-md5", "content-type", "date"].filter(headers.names.contains) + headers.names.filter { $0.hasPrefix("x-amz-") }).sorted()
    }

    /// Accepts `provided` when it is the base64 HMAC-SHA1 of one of `stringsToSign`; a mismatch
    /// reports the first.
    static func check(secret: String, stringsToSign: [String], provided: String, accessKeyId: String) throws(S3AuthError) {
        for string in stringsToSign {
            let expected: String
            do { expected = Base64.encode(try Crypto.hmacSHA1(key: Array(secret.utf8), data: Array(string.utf8))) } catch {
                throw .internalError
            }
            if Crypto.constantTimeEqual(expected, provided) { return }
        }
        throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: accessKeyId, stringToSign: stringsToSign[0],
                                                       signatureProvided: provided, canonicalRequest: ""))
    }
}
