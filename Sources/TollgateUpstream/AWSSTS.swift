import Foundation
import TollgateCrypto
import TollgateDates
import TollgateSignature
import TollgateXML

/// The AWS STS query API's `AssumeRole` (version 2011-06-15), as AWS STS, Ceph RGW's STS and
/// MinIO's answer it: a form-encoded POST to `/`, signed with SigV4 for service `sts` by the
/// project's one SigV4 signer (`S3SigV4.authorization`), the way botocore signs STS calls
/// (`host`, `content-type` and `x-amz-date` signed; the body's SHA-256 in the canonical request,
/// no `x-amz-content-sha256` header). The XML answer is read with the bounded `XMLReader`.
public enum AWSSTS {
    public static let version = "2011-06-15"
    public static let service = "sts"
    static let contentType = "application/x-www-form-urlencoded; charset=utf-8"

    public static func assumeRoleParameters(_ request: AssumeRoleParameters) -> [(name: String, value: String)] {
        var parameters: [(name: String, value: String)] = [
            ("Action", "AssumeRole"),
            ("Version", version),
            ("RoleArn", request.roleArn),
            ("RoleSessionName", request.sessionName),
            ("DurationSeconds", String(request.durationSeconds)),
        ]
        if let policy = request.policy { parameters.append(("Policy", policy)) }
        return parameters
    }

    /// The signed request, at `timestamp` (now).
    public static func assumeRole(_ request: AssumeRoleParameters, endpoint: UpstreamEndpoint, region: String,
                                  keys: UpstreamKeys, timestamp: Date) throws(S3AuthError) -> UpstreamHTTPRequest {
        let body = Array(assumeRoleParameters(request)
            .map { PercentEncoding.encode($0.name) + "=" + PercentEncoding.encode($0.value) }
            .joined(separator: "&").utf8)
        let date = WireDate.iso8601Basic(timestamp)
        let signed: SignatureHeaders = ["host": endpoint.hostHeader, "content-type": contentType, "x-amz-date": date]
        let payloadHash: String
        do { payloadHash = Hex.encode(try Crypto.sha256(body)) } catch { throw .internalError }
        let authorization = try S3SigV4.authorization(
            method: "POST", rawPath: "/", rawQuery: "", headers: signed, payloadHash: payloadHash,
            accessKeyId: keys.accessKeyID, secret: keys.accessKeySecret, region: region, timestamp: date, service: service)
        return UpstreamHTTPRequest(method: "POST", url: endpoint.url, headers: [
            .init(name: "Host", value: endpoint.hostHeader),
            .init(name: "Content-Type", value: contentType),
            .init(name: "X-Amz-Date", value: date),
            .init(name: "Authorization", value: authorization),
        ], body: body)
    }

    static let limits = XMLLimits(maxBytes: maxUpstreamAnswerBytes, maxDepth: 8, maxElements: 64)

    /// The credentials of a `200` answer (`AssumeRoleResponse/AssumeRoleResult/Credentials`), or
    /// the failure its error document describes.
    public static func parseAssumeRole(status: Int, body: [UInt8], upstream: String) -> Result<UpstreamCredentials, UpstreamFailure> {
        let document: XMLDocument?
        do { document = try XMLReader.parse(body, limits: limits) } catch {
            document = nil
            if (200..<300).contains(status) {
                return .failure(.malformed(upstream: upstream, "the answer is not XML (\(error.reason))"))
            }
        }
        guard (200..<300).contains(status) else {
            var code: String?, message: String?
            if let document {
                // `Error` (S3-style stores), `ErrorResponse/Error` (AWS), `…/Errors/Error` (moto, EC2-style).
                let error = document.root.name == "Error" ? document.root
                    : document.child(of: document.root, named: "Error")
                    ?? document.child(of: document.root, named: "Errors").flatMap { document.child(of: $0, named: "Error") }
                code = error.flatMap { document.child(of: $0, named: "Code")?.text }
                message = error.flatMap { document.child(of: $0, named: "Message")?.text }
            }
            return .failure(.answered(upstream: upstream, status: status, code: code, message: message))
        }
        guard let document, document.root.name == "AssumeRoleResponse",
              let result = document.child(of: document.root, named: "AssumeRoleResult"),
              let credentials = document.child(of: result, named: "Credentials")
        else {
            return .failure(.malformed(upstream: upstream, "the answer has no AssumeRoleResult/Credentials"))
        }
        func field(_ name: String) -> String? {
            guard let text = document.child(of: credentials, named: name)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
                  !text.isEmpty else { return nil }
            return text
        }
        guard let id = field("AccessKeyId"), let secret = field("SecretAccessKey"), let token = field("SessionToken"),
              let expiration = field("Expiration")
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
