import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import TollgateCrypto
import TollgateSignature
import TollgateStore
import TollgateToken
@testable import TollgateServer

// What the OSS SDKs expect of OSS (issue 39), through the gateway's front door with signed
// requests (see SignedGatewayTests.swift): ETags, bodiless errors, copied parts, append tags,
// complete-all, DeleteObjects' encoding, bucket info and stat, CORS; and S3 ListObjects (v1)'s
// encoding; and OSS signature V2.

private func xml(_ response: TestResponse) -> String { String(buffer: response.body) }

/// The text of the first `<name>` element of `xml`.
private func element(_ name: String, in xml: String) -> String? {
    guard let start = xml.range(of: "<\(name)>"), let end = xml.range(of: "</\(name)>", range: start.upperBound..<xml.endIndex) else {
        return xml.contains("<\(name)/>") ? "" : nil
    }
    return String(xml[start.upperBound..<end.lowerBound])
}

private func elements(_ name: String, in xml: String) -> [String] {
    var found: [String] = []
    var rest = xml[...]
    while let start = rest.range(of: "<\(name)>"), let end = rest.range(of: "</\(name)>", range: start.upperBound..<rest.endIndex) {
        found.append(String(rest[start.upperBound..<end.lowerBound]))
        rest = rest[end.upperBound...]
    }
    return found
}

/// `"<md5 hex>"` of `text`, in `dialect`'s case.
private func quotedMD5(_ text: String, _ dialect: Dialect) throws -> String {
    let hex = Hex.encode(try Crypto.md5(Array(text.utf8)))
    return "\"" + (dialect == .oss ? hex.uppercased() : hex) + "\""
}

// MARK: Signature V2

/// OSS V2 as oss2's ProviderAuthV2 signs (Date, x-oss-* headers, the security token), the
/// string from `OSSSignature.stringToSignV2`.
private func signOSSV2(_ request: Unsigned, _ credentials: IssuedCredentials, additional: [String] = []) throws -> HTTPFields {
    var signed: SignatureHeaders = ["host": "localhost", "date": signedGatewayHTTPDate, "x-oss-security-token": credentials.securityToken]
    for (name, value) in request.headers { signed.add(name: name, value: value) }
    let stringToSign = OSSSignature.stringToSignV2(method: request.method.rawValue, headers: signed, date: signedGatewayHTTPDate,
                                                   additionalHeaders: additional, bucket: request.bucket, key: request.key,
                                                   query: RawQuery(request.query), presigned: false)
    let signature = Base64.encode(try Crypto.hmacSHA256(key: Array(credentials.accessKeySecret.utf8), data: Array(stringToSign.utf8)))
    let additionalField = additional.isEmpty ? "" : "AdditionalHeaders:\(additional.joined(separator: ";")),"
    return fields(signed, authorization: "OSS2 AccessKeyId:\(credentials.accessKeyId),\(additionalField)Signature:\(signature)")
}

@Test("OSS V2 through the gateway: authorized by the token's policy, answered in OSS; every query parameter signed")
func signatureV2ThroughTheGateway() async throws {
    try await withSignedGateway { gateway in
        let writer = try gateway.credentials()
        let put = Unsigned(.put, "tollgate", "v2/a b.txt", headers: ["content-type": "text/plain", "x-oss-meta-a": "1"], body: "signed v2")
        let stored = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt", method: .put, headers: try signOSSV2(put, writer),
                                                      body: ByteBuffer(string: "signed v2"))
        #expect(stored.status == .ok, "\(xml(stored))")
        let etag = try quotedMD5("signed v2", .s3)
        #expect(stored.headers[.ossRequestID] != nil)
        #expect(stored.headers[.eTag]?.lowercased() == etag)
        #expect(try await gateway.content("tollgate", "v2/a b.txt") == "signed v2")

        let get = Unsigned(.get, "tollgate", "v2/a b.txt", query: "response-content-type=text/csv", headers: ["range": "bytes=0-5"])
        let got = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt?response-content-type=text/csv", method: .get,
                                                   headers: try signOSSV2(get, writer, additional: ["range"]))
        #expect(got.status == .partialContent && String(buffer: got.body) == "signed" && got.headers[.contentType] == "text/csv")
        // A parameter added after signing, whatever it is, breaks the signature.
        let added = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt?response-content-type=text/csv&prefix=x", method: .get,
                                                     headers: try signOSSV2(get, writer, additional: ["range"]))
        expectError(added, .oss, status: .forbidden, code: "SignatureDoesNotMatch")
        // The policy decides as for any other signature: the writer may not delete outside tmp/.
        let delete = Unsigned(.delete, "tollgate", "v2/a%20b.txt")
        let refused = try await gateway.client.execute(uri: "/tollgate/v2/a%20b.txt", method: .delete, headers: try signOSSV2(
            Unsigned(.delete, "tollgate", "v2/a b.txt"), writer))
        expectError(refused, .oss, status: .forbidden, code: "AccessDenied")
        _ = delete
        #expect(try await gateway.keys("tollgate").contains("v2/a b.txt"))
    }
}

@Test("an OSS scheme the gateway does not know is refused in OSS's words, not told to use AWS4")
func unknownOSSSchemeSpeaksOSS() async throws {
    try await withSignedGateway { gateway in
        let response = try await gateway.client.execute(uri: "/tollgate/k", method: .get,
                                                        headers: [.authorization: "OSS3 AccessKeyId:a,Signature:b", .date: signedGatewayHTTPDate])
        expectError(response, .oss, status: .badRequest, code: "InvalidArgument")
        #expect(!xml(response).contains("AWS4"), "\(xml(response))")
    }
}
