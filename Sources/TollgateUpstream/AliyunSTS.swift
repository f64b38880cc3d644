import Foundation
import TollgateCrypto
import TollgateDates
import TollgateSignature

/// Alibaba Cloud STS's RPC-style `AssumeRole`, signed with signature version 1.0 (HMAC-SHA1),
/// as Alibaba documents it and its SDKs compute it:
///
///     CanonicalizedQueryString = for each parameter but Signature, sorted by name:
///                                percentEncode(name) "=" percentEncode(value), joined by "&"
///     StringToSign = METHOD "&" percentEncode("/") "&" percentEncode(CanonicalizedQueryString)
///     Signature    = base64(HMAC-SHA1(AccessKeySecret + "&", StringToSign))
///
/// `percentEncode` is RFC 3986's: the unreserved `A–Z a–z 0–9 - _ . ~` stay, every other byte
/// of the UTF-8 form becomes `%XX` (so a space is `%20`, `*` is `%2A`): `PercentEncoding`.
/// Every parameter, the signature included, goes in a form-encoded POST body, so the session
/// policy never sits in a URL (and in access logs on the way).
public enum AliyunSTS {
    public static let version = "2015-04-01"
    public static let method = "POST"

    /// The canonicalized query string of `parameters` (Signature excluded by the caller).
    public static func canonicalizedQuery(_ parameters: [(name: String, value: String)]) -> String {
        parameters
            .sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
            .map { PercentEncoding.encode($0.name) + "=" + PercentEncoding.encode($0.value) }
            .joined(separator: "&")
    }

    public static func stringToSign(method: String, canonicalizedQuery: String) -> String {
        method + "&" + PercentEncoding.encode("/") + "&" + PercentEncoding.encode(canonicalizedQuery)
    }

    /// Base64 of HMAC-SHA1 keyed with `secret + "&"` (OpenSSL through `TollgateCrypto`).
    public static func signature(stringToSign: String, secret: String) throws(CryptoError) -> String {
        Base64.encode(try Crypto.hmacSHA1(key: Array((secret + "&").utf8), data: Array(stringToSign.utf8)))
    }

    /// The parameters of an `AssumeRole` call, common ones first, without the signature.
    public static func assumeRoleParameters(_ request: AssumeRoleParameters, accessKeyID: String, regionID: String?,
                                            timestamp: Date, nonce: String) -> [(name: String, value: String)] {
        var parameters: [(name: String, value: String)] = [
            ("Action", "AssumeRole"),
            ("Version", version),
            ("Format", "JSON"),
            ("AccessKeyId", accessKeyID),
            ("SignatureMethod", "HMAC-SHA1"),
            ("SignatureVersion", "1.0"),
            ("SignatureNonce", nonce),
            ("Timestamp", WireDate.iso8601(timestamp)),
        ]
        if let regionID, !regionID.isEmpty { parameters.append(("RegionId", regionID)) }
        parameters.append(("RoleArn", request.roleArn))
        parameters.append(("RoleSessionName", request.sessionName))
        if let policy = request.policy { parameters.append(("Policy", policy)) }
        parameters.append(("DurationSeconds", String(request.durationSeconds)))
        return parameters
    }

    /// The signed request. `nonce` must be fresh for every call (`newNonce`), `timestamp` now.
    public static func assumeRole(_ request: AssumeRoleParameters, endpoint: UpstreamEndpoint, regionID: String?,
                                  keys: UpstreamKeys, timestamp: Date, nonce: String) throws(CryptoError) -> UpstreamHTTPRequest {
        var parameters = assumeRoleParameters(request, accessKeyID: keys.accessKeyID, regionID: regionID,
                                              timestamp: timestamp, nonce: nonce)
        let toSign = stringToSign(method: method, canonicalizedQuery: canonicalizedQuery(parameters))
        parameters.append(("Signature", try signature(stringToSign: toSign, secret: keys.accessKeySecret)))
        let body = parameters.map { PercentEncoding.encode($0.name) + "=" + PercentEncoding.encode($0.value) }.joined(separator: "&")
        return UpstreamHTTPRequest(method: method, url: endpoint.url, headers: [
            .init(name: "Host", value: endpoint.hostHeader),
            .init(name: "Content-Type", value: "application/x-www-form-urlencoded; charset=utf-8"),
            .init(name: "Accept", value: "application/json"),
        ], body: Array(body.utf8))
    }

    /// A `SignatureNonce`: 128 random bits from OpenSSL, as hex.
    public static func newNonce() throws(CryptoError) -> String {
        Hex.encode(try Crypto.randomBytes(count: 16))
    }

    // MARK: Answers

    private struct Answer: Decodable {
        struct Credentials: Decodable {
            var AccessKeyId: String?
            var AccessKeySecret: String?
            var SecurityToken: String?
            var Expiration: String?
        }
        var Credentials: Credentials?
        var Code: String?
        var Message: String?
        var RequestId: String?
    }

    /// The credentials of a `200` answer, or the failure any other answer describes
    /// (`{"RequestId":…,"HostId":…,"Code":"Throttling.User","Message":…}`).
    public static func parseAssumeRole(status: Int, body: [UInt8], upstream: String) -> Result<UpstreamCredentials, UpstreamFailure> {
        guard body.count <= maxUpstreamAnswerBytes else {
            return .failure(.malformed(upstream: upstream, "the answer is larger than \(maxUpstreamAnswerBytes) bytes"))
        }
        let answer = try? JSONDecoder().decode(Answer.self, from: Data(body))
        guard (200..<300).contains(status) else {
            return .failure(.answered(upstream: upstream, status: status, code: answer?.Code, message: answer?.Message))
        }
        guard let answer else { return .failure(.malformed(upstream: upstream, "the answer is not the documented JSON")) }
        guard let credentials = answer.Credentials, let id = credentials.AccessKeyId, !id.isEmpty,
              let secret = credentials.AccessKeySecret, !secret.isEmpty,
              let token = credentials.SecurityToken, !token.isEmpty, let expiration = credentials.Expiration
        else {
            return .failure(.malformed(upstream: upstream, "the answer has no complete Credentials"))
        }
        guard let seconds = WireDate.parseISO8601(expiration) else {
            return .failure(.malformed(upstream: upstream, "Credentials.Expiration is not an ISO 8601 time"))
        }
        return .success(UpstreamCredentials(accessKeyId: id, accessKeySecret: secret, securityToken: token,
                                            expiration: Date(timeIntervalSince1970: seconds.rounded(.down))))
    }
}
