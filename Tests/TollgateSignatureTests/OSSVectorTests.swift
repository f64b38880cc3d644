import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto

func ossError<T>(_ body: () throws(OSSAuthError) -> T) -> OSSAuthError? {
    do { _ = try body(); return nil } catch { return error }
}

func isOSSMismatch(_ error: OSSAuthError?) -> Bool {
    if case .signatureDoesNotMatch = error { return true }
    return false
}

@Suite("OSS V1, V2 and V4 against oss2-signed requests")
struct OSSVectorTests {
    func verify(_ vector: OSSVector, _ request: SignatureRequest, bucket: String?? = nil, key: String?? = nil,
                secretSuffix: String = "") throws(OSSAuthError) -> VerifiedIdentity {
        try OSSSignature.verify(request, bucket: bucket ?? vector.bucket, key: key ?? vector.key,
                                lookup: vector.lookup(secretSuffix: secretSuffix))
    }

    @Test("verifies", arguments: generatedOSSVectors)
    func verifies(_ vector: OSSVector) throws {
        let request = vector.request()
        let scheme = SignatureScheme.detect(request)
        #expect(scheme.isOSS)
        switch (vector.version, vector.presigned) {
        case (.v1, false): #expect(scheme == .ossV1Header)
        case (.v1, true): #expect(scheme == .ossV1Query)
        case (.v2, false): #expect(scheme == .ossV2Header)
        case (.v2, true): #expect(scheme == .ossV2Query)
        case (.v4, false): #expect(scheme == .ossV4Header)
        case (.v4, true): #expect(scheme == .ossV4Query)
        }
        let identity = try verify(vector, request)
        #expect(identity.accessKeyId == vector.accessKeyId)
        #expect(identity.dialect == [OSSVersion.v1: .ossV1, .v2: .ossV2, .v4: .ossV4][vector.version])
        #expect(identity.presigned == vector.presigned)
        #expect(identity.securityToken == vector.token)
        #expect(identity.region == vector.region)
    }

    @Test("a changed signature fails", arguments: generatedOSSVectors)
    func changedSignature(_ vector: OSSVector) {
        var request = vector.request()
        switch (vector.version, vector.presigned) {
        case (.v1, true):
            // base64: flip the first character instead of the padding.
            request.rawQuery = replacingQueryValue(request.rawQuery, "Signature") { ($0.first == "A" ? "B" : "A") + $0.dropFirst() }
        case (.v4, true):
            request.rawQuery = replacingQueryValue(request.rawQuery, "x-oss-signature", flipLastHex)
        case (.v2, true):
            request.rawQuery = replacingQueryValue(request.rawQuery, "x-oss-signature") { ($0.first == "A" ? "B" : "A") + $0.dropFirst() }
        case (.v2, false):
            request.headers = SignatureHeaders(vector.headers.replacing("Authorization") { auth in
                let start = auth.range(of: "Signature:")!.upperBound
                return auth[..<start] + (auth[start] == "A" ? "B" : "A") + auth[auth.index(after: start)...]
            })
        case (.v1, false):
            request.headers = SignatureHeaders(vector.headers.replacing("Authorization") { auth in
                let colon = auth.lastIndex(of: ":")!
                let sig = auth[auth.index(after: colon)...]
                return auth[...colon] + (sig.first == "A" ? "B" : "A") + sig.dropFirst()
            })
        case (.v4, false):
            request.headers = SignatureHeaders(vector.headers.replacing("Authorization") { auth in
                auth.replacingOccurrences(of: "Signature=", with: "Signature=" + (auth.contains("Signature=0") ? "1" : "0"))
                    .replacingOccurrences(of: "Signature=00", with: "Signature=0")
            })
        }
        #expect(isOSSMismatch(ossError { () throws(OSSAuthError) in try verify(vector, request) }))
    }

    @Test("a different secret fails", arguments: generatedOSSVectors)
    func changedSecret(_ vector: OSSVector) {
        let error = ossError { () throws(OSSAuthError) in try verify(vector, vector.request(), secretSuffix: "x") }
        guard case .signatureDoesNotMatch(let mismatch) = error else {
            Issue.record("expected SignatureDoesNotMatch, got \(String(describing: error))")
            return
        }
        #expect(mismatch.accessKeyId == vector.accessKeyId)
        #expect(error?.details.contains { $0.name == "OSSAccessKeyId" && $0.value == vector.accessKeyId } == true)
        #expect(error?.details.contains { $0.name == "SignatureProvided" } == true)
    }

    @Test("a different object key fails", arguments: generatedOSSVectors.filter { $0.bucket != nil })
    func changedKey(_ vector: OSSVector) {
        let error = ossError { () throws(OSSAuthError) in try verify(vector, vector.request(), key: .some((vector.key ?? "") + "x")) }
        #expect(isOSSMismatch(error))
    }

    @Test("a different bucket fails", arguments: generatedOSSVectors.filter { $0.bucket != nil })
    func changedBucket(_ vector: OSSVector) {
        let error = ossError { () throws(OSSAuthError) in try verify(vector, vector.request(), bucket: .some("other")) }
        #expect(isOSSMismatch(error))
    }

    @Test("a changed signed header value fails",
          arguments: generatedOSSVectors.filter { v in !v.presigned && v.headers.contains { $0.0.lowercased().hasPrefix("x-oss-") && $0.0.lowercased() != "x-oss-date" } || v.headers.contains { $0.0.lowercased() == "content-type" } })
    func changedHeader(_ vector: OSSVector) {
        let name = vector.headers.first { $0.0.lowercased() == "content-type" }?.0
            ?? vector.headers.first { $0.0.lowercased().hasPrefix("x-oss-") && $0.0.lowercased() != "x-oss-date" }!.0
        var request = vector.request()
        request.headers = SignatureHeaders(vector.headers.replacing(name) { $0 + "x" })
        let error = ossError { () throws(OSSAuthError) in try verify(vector, request) }
        // Changing the token changes what the lookup sees first.
        if name.lowercased() == "x-oss-security-token" {
            #expect(error == .invalidSecurityToken)
        } else {
            #expect(isOSSMismatch(error))
        }
    }

    @Test("header-signed requests outside 15 minutes are RequestTimeTooSkewed",
          arguments: generatedOSSVectors.filter { !$0.presigned && $0.name.contains("get_object 0") })
    func skew(_ vector: OSSVector) throws {
        let error = ossError { () throws(OSSAuthError) in
            try verify(vector, vector.request(now: Date(timeIntervalSince1970: generatedNow + 901)))
        }
        #expect(error?.code == "RequestTimeTooSkewed")
        #expect(error?.details.contains { $0.name == "MaxAllowedSkewMilliseconds" && $0.value == "900000" } == true)
        _ = try verify(vector, vector.request(now: Date(timeIntervalSince1970: generatedNow - 899)))
    }

    @Test("presigned URLs expire", arguments: generatedOSSVectors.filter { $0.presigned && $0.name.contains("presigned get 0") })
    func presignedExpiry(_ vector: OSSVector) throws {
        _ = try verify(vector, vector.request(now: Date(timeIntervalSince1970: generatedNow + 3600)))
        let error = ossError { () throws(OSSAuthError) in
            try verify(vector, vector.request(now: Date(timeIntervalSince1970: generatedNow + 3601)))
        }
        #expect(error?.code == "AccessDenied")
        #expect(error?.message == "Request has expired.")
    }

    @Test("token errors map to OSS codes", arguments: generatedOSSVectors.filter { $0.token != nil })
    func tokenErrors(_ vector: OSSVector) {
        let expired = ossError { () throws(OSSAuthError) in
            try OSSSignature.verify(vector.request(), bucket: vector.bucket, key: vector.key,
                                    lookup: { _ throws(CredentialLookupError) in throw .expiredSecurityToken })
        }
        #expect(expired?.code == "SecurityTokenExpired")
        let invalid = ossError { () throws(OSSAuthError) in
            try OSSSignature.verify(vector.request(), bucket: vector.bucket, key: vector.key,
                                    lookup: { _ throws(CredentialLookupError) in throw .invalidSecurityToken })
        }
        #expect(invalid?.code == "InvalidSecurityToken")
        let unknown = ossError { () throws(OSSAuthError) in
            try OSSSignature.verify(vector.request(), bucket: vector.bucket, key: vector.key,
                                    lookup: { _ throws(CredentialLookupError) in throw .unknownAccessKey })
        }
        #expect(unknown == .invalidAccessKeyId(vector.accessKeyId))
    }

    @Test("a security token in both header and query is InvalidArgument")
    func tokenTwice() throws {
        let vector = try #require(generatedOSSVectors.first { $0.token != nil && $0.presigned && $0.version == .v1 })
        var request = vector.request()
        request.headers.add(name: "x-oss-security-token", value: vector.token!)
        let error = ossError { () throws(OSSAuthError) in try verify(vector, request) }
        #expect(error?.code == "InvalidArgument")
        #expect(error?.httpStatus == 400)
    }

    @Test("V4's canonical query: names and values decoded, then encoded; invalid UTF-8 replaced; the signature left out")
    func canonicalQueryV4() {
        func query(_ raw: String, presigned: Bool) -> String {
            let canonical = OSSSignature.canonicalRequestV4(method: "GET", bucket: "b", key: "k", rawQuery: raw, headers: [:],
                                                            additionalHeaders: [], presigned: presigned)
            return String(canonical.split(separator: "\n", omittingEmptySubsequences: false)[2])
        }
        let raw = "b=%2f+x&a%20b=1&x-oss-signature=sig&e=%FF&c&d=%e6%97%a5~"
        #expect(query(raw, presigned: true) == "a%20b=1&b=%2F%20x&c&d=%E6%97%A5~&e=%EF%BF%BD")
        #expect(query(raw, presigned: false) == "a%20b=1&b=%2F%20x&c&d=%E6%97%A5~&e=%EF%BF%BD&x-oss-signature=sig")
        #expect(query("x%2Doss-signature=s&z", presigned: true) == "z")
        #expect(query("", presigned: true) == "")
    }

    @Test("the V1 sub-resource list is oss2's")
    func subresources() {
        #expect(OSSSignature.v1SubResources.count == 86)
        for name in ["acl", "uploads", "uploadId", "partNumber", "security-token", "x-oss-process", "response-content-type",
                     "continuation-token", "tagging", "versionId", "callback", "callback-var"] {
            #expect(OSSSignature.v1SubResources.contains(name))
        }
        #expect(!OSSSignature.v1SubResources.contains("prefix"))
        #expect(OSSSignature.canonicalizedResourceV1(bucket: "b", key: "k", query: RawQuery("prefix=a&acl&uploadId=x%2By&foo=1"))
                == "/b/k?acl&uploadId=x+y")
        #expect(OSSSignature.canonicalizedResourceV1(bucket: nil, key: nil, query: RawQuery("")) == "/")
    }

    @Test("V2's string to sign is the one oss2 signed", arguments: generatedOSSVectors.filter { $0.version == .v2 })
    func stringToSignV2(_ vector: OSSVector) throws {
        let expected = try #require(vector.stringToSign)
        let request = vector.request()
        let date = vector.presigned ? try #require(request.query.first(named: "x-oss-expires")) : try #require(request.headers["date"])
        let additional = vector.presigned
            ? request.query.first(named: "x-oss-additional-headers")
            : OSSSignature.parseV2Authorization(request.headers["authorization"] ?? "")?.additionalHeaders
        let computed = OSSSignature.stringToSignV2(method: vector.method, headers: request.headers, date: date,
                                                   additionalHeaders: OSSSignature.parseAdditionalHeaders(additional),
                                                   bucket: vector.bucket, key: vector.key, query: request.query, presigned: vector.presigned)
        #expect(computed == expected)
        // The error for a wrong secret shows that string, for the client to compare with its own.
        let error = ossError { () throws(OSSAuthError) in try verify(vector, vector.request(), secretSuffix: "x") }
        #expect(error?.details.first { $0.name == "StringToSign" }?.value == expected)
    }

    @Test("V2 signs every query parameter: one added, removed or changed fails",
          arguments: generatedOSSVectors.filter { $0.version == .v2 })
    func v2SignsTheWholeQuery(_ vector: OSSVector) {
        var added = vector.request()
        added.rawQuery = added.rawQuery.isEmpty ? "objectMeta" : added.rawQuery + "&prefix=x"
        #expect(isOSSMismatch(ossError { () throws(OSSAuthError) in try verify(vector, added) }))
        for scheme in [SignatureScheme.ossV2Header, .ossV2Query] {
            for name in ["prefix", "objectMeta", "x-oss-process", "anything"] { #expect(scheme.signsQueryParameter(name)) }
        }
    }

    @Test("V2 canonical resource: /bucket/key encoded, slashes too; every parameter, decoded then encoded, sorted")
    func canonicalResourceV2() {
        func resource(_ bucket: String?, _ key: String?, _ query: String, presigned: Bool = false) -> String {
            OSSSignature.canonicalizedResourceV2(bucket: bucket, key: key, query: RawQuery(query), presigned: presigned)
        }
        #expect(resource(nil, nil, "") == "%2F")
        #expect(resource("b", nil, "") == "%2Fb%2F")
        #expect(resource("b", "a b/ü+~", "") == "%2Fb%2Fa%20b%2F%C3%BC%2B~")
        #expect(resource("b", "k", "z=1&a%20b=%2f+x&acl&c=") == "%2Fb%2Fk?a%20b=%2F%20x&acl&c&z=1")
        #expect(resource("b", "k", "x-oss-signature=s&x-oss-expires=1", presigned: true) == "%2Fb%2Fk?x-oss-expires=1")
        #expect(resource("b", "k", "x-oss-signature=s", presigned: false) == "%2Fb%2Fk?x-oss-signature=s")
    }

    @Test("V2 Authorization: AccessKeyId and Signature required, AdditionalHeaders optional, nothing else, nothing twice",
          arguments: [
              ("OSS2 AccessKeyId:ak,Signature:c2ln", "ak", nil, "c2ln"),
              ("OSS2 AccessKeyId:ak,AdditionalHeaders:range;host,Signature:c2/+ln==", "ak", "range;host", "c2/+ln=="),
              ("OSS2 AccessKeyId: ak , Signature: c2ln", "ak", nil, "c2ln"),
              ("OSS2 Signature:c2ln,AccessKeyId:ak", "ak", nil, "c2ln"),
              ("OSS2 AccessKeyId:ak", nil, nil, nil),
              ("OSS2 Signature:c2ln", nil, nil, nil),
              ("OSS2 AccessKeyId:ak,Signature:", nil, nil, nil),
              ("OSS2 AccessKeyId:ak,Signature:a,Signature:b", nil, nil, nil),
              ("OSS2 AccessKeyId:ak,Signature:a,Other:b", nil, nil, nil),
              ("OSS2 AccessKeyId:ak,Signature", nil, nil, nil),
              ("OSS AccessKeyId:ak,Signature:a", nil, nil, nil),
          ] as [(String, String?, String?, String?)])
    func authorizationV2(_ input: (String, String?, String?, String?)) {
        let parsed = OSSSignature.parseV2Authorization(input.0)
        #expect(parsed?.accessKeyId == input.1)
        #expect(parsed?.additionalHeaders == input.2)
        #expect(parsed?.signature == input.3)
    }

    @Test("V2 header-signed requests outside 15 minutes are RequestTimeTooSkewed; presigned ones expire at x-oss-expires")
    func v2Times() throws {
        let header = try #require(generatedOSSVectors.first { $0.version == .v2 && !$0.presigned && $0.token == nil })
        #expect(ossError { () throws(OSSAuthError) in try verify(header, header.request(now: Date(timeIntervalSince1970: generatedNow + 901))) }?.code
                == "RequestTimeTooSkewed")
        _ = try verify(header, header.request(now: Date(timeIntervalSince1970: generatedNow + 899)))
        let presigned = try #require(generatedOSSVectors.first { $0.name == "oss2 v2 presigned get 0" })
        _ = try verify(presigned, presigned.request(now: Date(timeIntervalSince1970: generatedNow + 3600)))
        let expired = ossError { () throws(OSSAuthError) in try verify(presigned, presigned.request(now: Date(timeIntervalSince1970: generatedNow + 3601))) }
        #expect(expired?.code == "AccessDenied" && expired?.message == "Request has expired.")
        var noExpiry = presigned.request()
        noExpiry.rawQuery = replacingQueryValue(noExpiry.rawQuery, "x-oss-expires") { _ in "soon" }
        #expect(ossError { () throws(OSSAuthError) in try verify(presigned, noExpiry) }?.code == "InvalidArgument")
    }
}
