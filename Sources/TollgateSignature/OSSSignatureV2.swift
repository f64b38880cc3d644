import Foundation
import TollgateCrypto
import TollgateDates

/// OSS signature V2: `Authorization: OSS2 AccessKeyId:…,AdditionalHeaders:…,Signature:…` and its
/// presigned form (`x-oss-signature-version=OSS2&x-oss-access-key-id=…&x-oss-expires=…&x-oss-signature=…`,
/// optionally `x-oss-additional-headers`), base64 of HMAC-SHA256, canonicalised exactly as
/// oss2's `ProviderAuthV2` (oss2/auth.py) signs:
///
///     VERB \n Content-MD5 \n Content-Type \n Date \n
///     <x-oss-* and additional headers, lower-cased, sorted: name:value \n each>
///     <additional header names, sorted, joined by ;> \n
///     <UriEncode("/bucket/key"), slashes too> [? <every query parameter, encoded, sorted>]
///
/// Unlike V1, every query parameter is signed (a presigned URL's own parameters included, but
/// not `x-oss-signature`), so nothing can be added to a signed request. The date is the `Date`
/// header (`x-oss-date` when there is none), within the clock-skew window as V1's; a presigned
/// URL's is its `x-oss-expires`, an absolute time in epoch seconds, as V1's `Expires`.
extension OSSSignature {
    /// The query parameters of a presigned V2 request, in the order `verifyV2Query` reads them.
    static let presignedV2Parameters = [
        "x-oss-access-key-id", "x-oss-expires", "x-oss-signature", "x-oss-additional-headers",
    ].map { Array($0.utf8) }

    /// `UriEncode("/bucket/key")` (every byte but the unreserved ones, `/` included), or of `/`
    /// without a bucket; then `?` and the canonical query when there is one: every parameter
    /// decoded, then encoded, sorted, `name=value` or `name` alone when the value is empty, as
    /// V4's (a presigned request's `x-oss-signature` left out).
    public static func canonicalizedResourceV2(bucket: String?, key: String?, query: RawQuery, presigned: Bool) -> String {
        var out: [UInt8] = []
        let path = if let bucket, !bucket.isEmpty { "/" + bucket + "/" + (key ?? "") } else { "/" }
        for c in path.utf8 { PercentEncoding.appendEncoded(c, to: &out, keepSlash: false) }
        var canonicalQuery: [UInt8] = []
        appendCanonicalQueryV4(query, excludingSignature: presigned, to: &canonicalQuery)
        if !canonicalQuery.isEmpty {
            out.append(UInt8(ascii: "?"))
            out += canonicalQuery
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The V2 string to sign. `additionalHeaders`: lower-cased, sorted (`parseAdditionalHeaders`).
    public static func stringToSignV2(method: String, headers: SignatureHeaders, date: String, additionalHeaders: [String],
                                      bucket: String?, key: String?, query: RawQuery, presigned: Bool) -> String {
        let md5 = headers["content-md5"]?.trimmingASCIIWhitespace() ?? ""
        let type = headers["content-type"]?.trimmingASCIIWhitespace() ?? ""
        var lines = ""
        for name in v2CanonicalHeaderNames(headers, additional: additionalHeaders) {
            lines += name + ":" + headers.values(name).map { $0.trimmingASCIIWhitespace() }.joined(separator: ",") + "\n"
        }
        return method + "\n" + md5 + "\n" + type + "\n" + date + "\n" + lines + additionalHeaders.joined(separator: ";") + "\n"
            + canonicalizedResourceV2(bucket: bucket, key: key, query: query, presigned: presigned)
    }

    /// The headers whose values V2 signs by name: every `x-oss-` header and each additional one
    /// present, sorted.
    static func v2CanonicalHeaderNames(_ headers: SignatureHeaders, additional: [String]) -> [String] {
        headers.names.filter { $0.hasPrefix("x-oss-") || additional.contains($0) }.sorted()
    }

    /// `OSS2 AccessKeyId:…,AdditionalHeaders:…,Signature:…` (AdditionalHeaders optional), each
    /// field once; nil when malformed.
    static func parseV2Authorization(_ authorization: String) -> (accessKeyId: String, additionalHeaders: String?, signature: String)? {
        guard authorization.hasPrefix("OSS2 ") else { return nil }
        var fields: [String: String] = [:]
        for item in authorization.dropFirst("OSS2 ".count).split(separator: ",", omittingEmptySubsequences: false) {
            let item = item.trimmingASCIIWhitespace()
            guard let colon = item.firstIndex(of: ":") else { return nil }
            let name = String(item[..<colon])
            guard ["AccessKeyId", "AdditionalHeaders", "Signature"].contains(name), fields[name] == nil else { return nil }
            fields[name] = String(item[item.index(after: colon)...]).trimmingASCIIWhitespace()
        }
        guard let accessKeyId = fields["AccessKeyId"], !accessKeyId.isEmpty,
              let signature = fields["Signature"], !signature.isEmpty else { return nil }
        return (accessKeyId, fields["AdditionalHeaders"], signature)
    }

    static func verifyV2Header(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
                               token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let authorization = request.headers["authorization"] ?? ""
        guard let parsed = parseV2Authorization(authorization) else {
            throw .invalidArgument(message: "Authorization header is invalid.", name: "Authorization", value: authorization)
        }
        // oss2 signs the Date header it sets; a client that cannot set Date sends x-oss-date.
        guard let date = (request.headers["date"] ?? request.headers["x-oss-date"])?.trimmingASCIIWhitespace(),
              let requestTime = WireDate.parseHTTPDate(date) ?? WireDate.parseISO8601Basic(date)
        else {
            throw .accessDenied("OSS authentication requires a valid Date.")
        }
        try checkSkew(requestTime, now: request.now)
        return try verifyV2Signature(request, query: query, bucket: bucket, key: key, token: token, accessKeyId: parsed.accessKeyId,
                                     date: date, additionalHeaders: parsed.additionalHeaders, signature: parsed.signature,
                                     requestTime: requestTime, expires: nil, lookup: lookup)
    }

    static func verifyV2Query(_ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?,
                              token: String?, lookup: SecretLookup) throws(OSSAuthError) -> VerifiedIdentity {
        let parameters = query.firstValues(named: presignedV2Parameters)
        guard let accessKeyId = parameters[0], !accessKeyId.isEmpty, let expiresValue = parameters[1],
              let signature = parameters[2], !signature.isEmpty
        else {
            throw .accessDenied("Presigned V2 URLs require x-oss-access-key-id, x-oss-expires and x-oss-signature.")
        }
        guard let epoch = Int(expiresValue), expiresValue.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .invalidArgument(message: "x-oss-expires is not a valid number.", name: "x-oss-expires", value: expiresValue)
        }
        let expires = Date(timeIntervalSince1970: TimeInterval(epoch))
        if request.now > expires { throw .requestExpired(expires: expires, serverTime: request.now) }
        return try verifyV2Signature(request, query: query, bucket: bucket, key: key, token: token, accessKeyId: accessKeyId,
                                     date: expiresValue, additionalHeaders: parameters[3], signature: signature,
                                     requestTime: nil, expires: expires, lookup: lookup)
    }

    /// The common end of both V2 forms; a request with an expiry is presigned.
    static func verifyV2Signature(
        _ request: SignatureRequest, query: RawQuery, bucket: String?, key: String?, token: String?, accessKeyId: String,
        date: String, additionalHeaders: String?, signature: String, requestTime: Date?, expires: Date?, lookup: SecretLookup
    ) throws(OSSAuthError) -> VerifiedIdentity {
        let presigned = expires != nil
        let additional = parseAdditionalHeaders(additionalHeaders)
        let secret = try lookupSecret(accessKeyId, token: token, dialect: .ossV2, lookup: lookup)
        let stringToSign = stringToSignV2(method: request.method, headers: request.headers, date: date, additionalHeaders: additional,
                                          bucket: bucket, key: key, query: query, presigned: presigned)
        let expected: String
        do {
            expected = Base64.encode(try Crypto.hmacSHA256(key: Array(secret.utf8), data: Array(stringToSign.utf8)))
        } catch {
            throw .internalError
        }
        guard Crypto.constantTimeEqual(expected, signature) else {
            throw .signatureDoesNotMatch(SignatureMismatch(accessKeyId: accessKeyId, stringToSign: stringToSign,
                                                              signatureProvided: signature, canonicalRequest: ""))
        }
        let names = request.headers.names
        let signedHeaders = Set(["content-md5", "content-type"].filter(names.contains) + v2CanonicalHeaderNames(request.headers, additional: additional))
        return VerifiedIdentity(accessKeyId: accessKeyId, dialect: .ossV2, securityToken: token, presigned: presigned,
                                region: nil, signedHeaders: signedHeaders.sorted(), requestTime: requestTime, expires: expires)
    }
}
