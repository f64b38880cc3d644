import Foundation
import TollgateCrypto
import TollgateDates

/// OSS request signatures: V1 (`Authorization: OSS ak:sig`, HMAC-SHA1, and `OSSAccessKeyId`
/// presigned URLs), V2 (`OSS2 AccessKeyId:…`, HMAC-SHA256, header and presigned: see
/// OSSSignatureV2.swift) and V4 (`OSS4-HMAC-SHA256`, header and presigned), canonicalised
/// exactly as Alibaba's oss2 SDK (`oss2/auth.py`) signs.
///
/// OSS signs the bucket and the decoded object key rather than the request path (which differs
/// between path-style and virtual-host addressing), so the HTTP layer passes both explicitly:
/// `bucket` nil for service-level requests (ListBuckets), `key` nil or empty for bucket-level ones.
public enum OSSSignature {
    /// V4: OSS4-HMAC-SHA256, `aliyun_v4` key prefix, `oss`, `aliyun_v4_request`, `x-oss-` headers.
    public static let v4Flavor = SigV4Flavor.oss
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

    /// Verifies an OSS-signed request (any of the six forms).
    public static func verify(_ request: SignatureRequest, bucket: String?, key: String?,
                              lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let query = request.query
        let token = try securityToken(request, query: query)
        switch SignatureScheme.detect(request) {
        case .ossV1Header: return try verifyV1Header(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV1Query: return try verifyV1Query(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV2Header: return try verifyV2Header(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV2Query: return try verifyV2Query(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV4Header: return try verifyV4Header(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .ossV4Query: return try verifyV4Query(request, query: query, bucket: bucket, key: key, token: token, lookup: lookup)
        case .unsupported(let name):
            throw .invalidArgument(message: "Unsupported signature version.", name: "Authorization", value: name)
        case .anonymous, .s3SigV4Header, .s3SigV4Query, .s3SigV2Header, .s3SigV2Query:
            throw .accessDenied("AccessDenied")
        }
    }

    /// `x-oss-security-token` header, or `security-token` (V1, V2) / `x-oss-security-token` (V4)
    /// query parameter; more than one is an InvalidArgument.
    static func securityToken(_ request: SignatureRequest, query: RawQuery) throws(OSSAuthError) -> String? {
        var found: [(String, String)] = []
        for value in request.headers.values("x-oss-security-token") { found.append(("x-oss-security-token", value)) }
        for index in query.indices where query.nameIs(index, "security-token") || query.nameIs(index, "x-oss-security-token") {
            found.append((query.name(at: index), query.value(at: index)))
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
    /// `bucketSlash: false` gives the bucket-level form some clients sign, `/bucket`.
    public static func canonicalizedResourceV1(bucket: String?, key: String?, query: RawQuery, bucketSlash: Bool = true) -> String {
        var resource = "/"
        if let bucket, !bucket.isEmpty { resource = key == nil && !bucketSlash ? "/\(bucket)" : "/\(bucket)/\(key ?? "")" }
        let subresources: [(String, String)] = query.indices.compactMap { index in
            let name = query.name(at: index)
            return v1SubResources.contains(name) ? (name, query.value(at: index)) : nil
        }.sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        if !subresources.isEmpty {
            resource += "?" + subresources.map { $0.1.isEmpty ? $0.0 : "\($0.0)=\($0.1)" }.joined(separator: "&")
        }
        return resource
    }

    public static func stringToSignV1(method: String, headers: SignatureHeaders, date: String, bucket: String?,
                                      key: String?, rawQuery: String) -> String {
        stringToSignV1(method: method, headers: headers, date: date, bucket: bucket, key: key,
                       query: RawQuery(rawQuery))
    }

    static func stringToSignV1(method: String, headers: SignatureHeaders, date: String, bucket: String?,
                               key: String?, query: RawQuery, bucketSlash: Bool = true) -> String {
        let md5 = headers["content-md5"]?.trimmingASCIIWhitespace() ?? ""
        let type = headers["content-type"]?.trimmingASCIIWhitespace() ?? ""
        return [method, md5, type, date,
                canonicalizedOSSHeaders(headers) + canonicalizedResourceV1(bucket: bucket, key: key, query: query, bucketSlash: bucketSlash)]
            .joined(separator: "\n")
    }

    /// The strings a V1 signature may cover: the canonical one and, for a bucket-level request
    /// only, the same with `/bucket` for `/bucket/` (as some path-style clients sign it). Every
    /// other part of the canonical form stays strict.
    static func stringsToSignV1(method: String, headers: SignatureHeaders, date: String, bucket: String?,
                                key: String?, query: RawQuery) -> [String] {
        let canonical = stringToSignV1(method: method, headers: headers, date: date, bucket: bucket, key: key, query: query)
        guard key == nil, let bucket, !bucket.isEmpty else { return [canonical] }
        return [canonical, stringToSignV1(method: method, headers: headers, date: date, bucket: bucket, key: nil, query: query, bucketSlash: false)]
    }

    /// Accepts `provided` when it signs one of `stringsToSign`; a mismatch reports the canonical one.
    static func checkV1(secret: String, stringsToSign: [String], provided: String, accessKeyId: String) throws(OSSAuthError) {
        for stringToSign in stringsToSign {
            let expected: String
            do {
                expected = Base64.encode(try Crypto.hmacSHA1(key: Array(secret.utf8), data: Array(stringToSign.utf8)))
            } catch {
                throw .internalError
            }
            if Crypto.constantTimeEqual(expected, provided) { return }
        }
        throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: accessKeyId, stringToSign: stringsToSign[0],
                                                          signatureProvided: provided, canonicalRequest: ""))
    }

    static func verifyV1Header(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
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
        let stringsToSign = stringsToSignV1(method: request.method, headers: request.headers, date: date,
                                            bucket: bucket, key: key, query: query)
        try checkV1(secret: secret, stringsToSign: stringsToSign, provided: signature, accessKeyId: accessKeyId)
        return VerifiedIdentity(accessKeyId: accessKeyId, dialect: .ossV1, securityToken: token, presigned: false,
                                region: nil, signedHeaders: v1SignedHeaders(request.headers),
                                requestTime: requestTime, expires: nil)
    }

    static func verifyV1Query(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
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
        let stringsToSign = stringsToSignV1(method: request.method, headers: request.headers, date: expiresValue,
                                            bucket: bucket, key: key, query: query)
        try checkV1(secret: secret, stringsToSign: stringsToSign, provided: signature, accessKeyId: accessKeyId)
        return VerifiedIdentity(accessKeyId: accessKeyId, dialect: .ossV1, securityToken: token, presigned: true,
                                region: nil, signedHeaders: v1SignedHeaders(request.headers),
                                requestTime: nil, expires: expires)
    }

    static func v1SignedHeaders(_ headers: SignatureHeaders) -> [String] {
        let names = headers.names
        return (["content-md5", "content-type"].filter(names.contains) + names.filter { $0.hasPrefix("x-oss-") }).sorted()
    }

    // MARK: V4

    /// oss2's V4 canonical URI: `/bucket/key` (or `/`), percent-encoded with `/` kept.
    public static func canonicalURIV4(bucket: String?, key: String?) -> String {
        var out: [UInt8] = []
        appendCanonicalURIV4(bucket: bucket, key: key, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendCanonicalURIV4(bucket: String?, key: String?, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "/"))
        guard let bucket, !bucket.isEmpty else { return }
        for c in bucket.utf8 { PercentEncoding.appendEncoded(c, to: &out, keepSlash: true) }
        out.append(UInt8(ascii: "/"))
        for c in (key ?? "").utf8 { PercentEncoding.appendEncoded(c, to: &out, keepSlash: true) }
    }

    /// Every parameter decoded, then encoded, sorted by encoded name then value, joined by `&`:
    /// `name=value`, or `name` alone when the value is empty. A presigned request's
    /// `x-oss-signature` is left out.
    static func appendCanonicalQueryV4(_ query: RawQuery, excludingSignature: Bool, to out: inout [UInt8]) {
        // Every name and value in canonical form in one buffer; the pairs are sorted as ranges of it.
        var arena: [UInt8] = []
        var pairs: [(name: Range<Int>, value: Range<Int>)] = []
        pairs.reserveCapacity(query.count)
        for index in query.indices {
            if excludingSignature && query.nameIs(index, "x-oss-signature") { continue }
            let start = arena.count
            query.withNameBytes(at: index) { for c in $0 { PercentEncoding.appendEncoded(c, to: &arena, keepSlash: false) } }
            let middle = arena.count
            query.withValueBytes(at: index) { for c in $0 { PercentEncoding.appendEncoded(c, to: &arena, keepSlash: false) } }
            pairs.append((start..<middle, middle..<arena.count))
        }
        arena.withUnsafeBufferPointer { arena in
            pairs.sort { lhs, rhs in
                let byName = S3SigV4.compareBytes(arena, lhs.name, rhs.name)
                return byName != 0 ? byName < 0 : S3SigV4.compareBytes(arena, lhs.value, rhs.value) < 0
            }
            for (index, pair) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: "&")) }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[pair.name]))
                if !pair.value.isEmpty {
                    out.append(UInt8(ascii: "="))
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[pair.value]))
                }
            }
        }
    }

    /// Headers signed by V4: `x-oss-*`, `content-type`, `content-md5` and the additional headers,
    /// each once, sorted.
    static func v4SignedHeaderNames(_ headers: SignatureHeaders, additional: [String]) -> [String] {
        var names: [String] = []
        for field in headers.fields where !names.contains(field.name) {
            let name = field.name
            if name.hasPrefix(v4Flavor.headerPrefix) || name == "content-type" || name == "content-md5" || additional.contains(name) {
                names.append(name)
            }
        }
        return names.sorted()
    }

    public static func canonicalRequestV4(method: String, bucket: String?, key: String?, rawQuery: String,
                                          headers: SignatureHeaders, additionalHeaders: [String], presigned: Bool) -> String {
        let additional = additionalHeaders.sorted()
        return String(decoding: canonicalRequestV4(method: method, bucket: bucket, key: key, query: RawQuery(rawQuery),
                                                   headers: headers, signedHeaders: v4SignedHeaderNames(headers, additional: additional),
                                                   additionalHeaders: additional, presigned: presigned),
                      as: UTF8.self)
    }

    /// `method`, canonical URI, canonical query, one `name:value` line per signed header (values
    /// trimmed, repeats joined by `,`), an empty line, the additional header names joined by `;`,
    /// and the `x-oss-content-sha256` value (`UNSIGNED-PAYLOAD` without one), `\n` between them.
    static func canonicalRequestV4(method: String, bucket: String?, key: String?, query: RawQuery,
                                   headers: SignatureHeaders, signedHeaders: [String], additionalHeaders: [String],
                                   presigned: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        out += method.utf8
        out.append(UInt8(ascii: "\n"))
        appendCanonicalURIV4(bucket: bucket, key: key, to: &out)
        out.append(UInt8(ascii: "\n"))
        appendCanonicalQueryV4(query, excludingSignature: presigned, to: &out)
        out.append(UInt8(ascii: "\n"))
        // OSS trims each value's ends only; S3 also collapses the whitespace inside.
        headers.appendCanonicalLines(signedHeaders, to: &out) { value, out in out += value.trimmingASCIIWhitespace().utf8 }
        for (index, name) in additionalHeaders.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ";")) }
            out += name.utf8
        }
        out.append(UInt8(ascii: "\n"))
        out += (headers[v4Flavor.contentSHA256Header]?.trimmingASCIIWhitespace() ?? S3PayloadMode.unsignedPayload).utf8
        return out
    }

    /// `AdditionalHeaders` / `x-oss-additional-headers`: `;`-separated names, trimmed, lower-cased, sorted.
    static func parseAdditionalHeaders(_ value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ";").map { $0.trimmingASCIIWhitespace().lowercased() }.filter { !$0.isEmpty }.sorted()
    }

    /// A V4 credential of this service (`<ak>/<date>/<region>/oss/aliyun_v4_request`), or nil.
    static func parseV4Credential(_ value: String) -> SigV4Credential? {
        guard let credential = v4Flavor.parseCredential(value), credential.service == v4Flavor.service else { return nil }
        return credential
    }

    static func verifyV4Header(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
                               token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let authorization = request.headers["authorization"] ?? ""
        guard let fields = SigV4Flavor.parseAuthorizationFields(authorization.dropFirst(v4Flavor.algorithm.count + 1)),
              let credentialValue = fields["Credential"], let credential = parseV4Credential(credentialValue),
              let signature = fields["Signature"], !signature.isEmpty
        else {
            throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
        }
        guard let timestamp = request.headers[v4Flavor.dateHeader]?.trimmingASCIIWhitespace(),
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

    /// The query parameters of a presigned V4 request, in the order `verifyV4Query` reads them.
    static let presignedV4Parameters = [
        "x-oss-credential", "x-oss-date", "x-oss-expires", "x-oss-signature", "x-oss-additional-headers",
    ].map { Array($0.utf8) }

    static func verifyV4Query(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
                              token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let parameters = query.firstValues(named: presignedV4Parameters)
        guard let credentialValue = parameters[0], let timestamp = parameters[1], let expiresValue = parameters[2],
              let signature = parameters[3], !signature.isEmpty
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
            requestTime: requestTime, expires: expires, additionalHeaders: parameters[4], signature: signature, lookup: lookup
        )
    }

    /// The common end of both V4 forms; a request with an expiry is presigned.
    static func verifyV4Signature(
        _ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?, token: String?,
        credential: SigV4Credential, timestamp: String, requestTime: Date, expires: Date?, additionalHeaders: String?,
        signature: String, lookup: SecretLookup
    ) throws(OSSAuthError) -> VerifiedIdentity {
        let presigned = expires != nil
        let additional = parseAdditionalHeaders(additionalHeaders)
        let signedHeaders = v4SignedHeaderNames(request.headers, additional: additional)
        let secret = try lookupSecret(credential.accessKeyId, token: token, dialect: .ossV4, lookup: lookup)
        let canonical = canonicalRequestV4(method: request.method, bucket: bucket, key: key, query: query, headers: request.headers,
                                           signedHeaders: signedHeaders, additionalHeaders: additional, presigned: presigned)
        let stringToSign: [UInt8]
        let matches: Bool
        do {
            stringToSign = try v4Flavor.stringToSign(timestamp: timestamp, scope: credential.scope, canonicalRequest: canonical)
            let key = try v4Flavor.signingKey(secret: secret, date: credential.date, region: credential.region, service: credential.service)
            matches = try SigV4Flavor.signatureMatches(key: key, stringToSign: stringToSign, provided: signature)
        } catch {
            throw .internalError
        }
        guard matches else {
            throw .signatureDoesNotMatch(SignatureMismatch(
                accessKeyId: credential.accessKeyId, stringToSign: String(decoding: stringToSign, as: UTF8.self),
                signatureProvided: signature, canonicalRequest: String(decoding: canonical, as: UTF8.self)))
        }
        return VerifiedIdentity(accessKeyId: credential.accessKeyId, dialect: .ossV4, securityToken: token, presigned: presigned,
                                region: credential.region, signedHeaders: signedHeaders,
                                requestTime: requestTime, expires: expires)
    }
}
