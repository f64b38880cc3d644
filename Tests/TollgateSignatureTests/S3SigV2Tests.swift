import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto
import TollgateDates

/// S3 Signature Version 2 against AWS's published examples (the S3 developer guide's "Signing
/// and authenticating REST requests", access key AKIAIOSFODNN7EXAMPLE), and the refusals.
@Suite struct S3SigV2Tests {
    static let accessKeyId = "AKIAIOSFODNN7EXAMPLE"
    static let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

    static func lookup(expectToken token: String? = nil) -> SecretLookup {
        { query throws(CredentialLookupError) in
            guard query.accessKeyId == accessKeyId, query.dialect == .s3SigV2 else { throw .unknownAccessKey }
            guard query.securityToken == token else { throw .invalidSecurityToken }
            return secret
        }
    }

    func verify(_ request: SignatureRequest, authPath: String, token: String? = nil) -> S3AuthError? {
        do { _ = try S3SigV2.verify(request, authPath: authPath, lookup: Self.lookup(expectToken: token)); return nil } catch { return error }
    }

    static func date(_ text: String) -> Date { S3SigV2.parseDate(text)! }

    /// (name, method, path the client sent, path it signed, query, headers, published signature)
    static let published: [(String, String, String, String, String, [(String, String)], String)] = [
        ("object GET", "GET", "/photos/puppy.jpg", "/awsexamplebucket1/photos/puppy.jpg", "",
         [("Date", "Tue, 27 Mar 2007 19:36:42 +0000")], "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="),
        ("object PUT", "PUT", "/photos/puppy.jpg", "/awsexamplebucket1/photos/puppy.jpg", "",
         [("Content-Type", "image/jpeg"), ("Content-Length", "94328"), ("Date", "Tue, 27 Mar 2007 21:15:45 +0000")],
         "iqRzw+ileNPu1fhspnRs8nOjjIA="),
        ("list", "GET", "/", "/awsexamplebucket1/", "prefix=photos&max-keys=50&marker=puppy",
         [("Date", "Tue, 27 Mar 2007 19:42:41 +0000")], "m0WP8eCtspQl5Ahe6L1SozdX9YA="),
        ("fetch ACL", "GET", "/", "/awsexamplebucket1/", "acl",
         [("Date", "Tue, 27 Mar 2007 19:44:46 +0000")], "82ZHiFIjc+WbcwFKGUVEQspPn+0="),
    ]

    @Test(arguments: published.indices)
    func publishedHeaderExamples(_ index: Int) {
        let (name, method, path, authPath, query, headers, signature) = Self.published[index]
        let now = Self.date(headers.first { $0.0 == "Date" }!.1)
        let request = SignatureRequest(method: method, rawPath: path, rawQuery: query,
                                       headers: SignatureHeaders(headers + [("Authorization", "AWS \(Self.accessKeyId):\(signature)")]), now: now)
        #expect(SignatureScheme.detect(request) == .s3SigV2Header, "\(name)")
        #expect(verify(request, authPath: authPath) == nil, "\(name)")
        // Another method, path or sub-resource is another request.
        var other = request
        other.method = method == "GET" ? "DELETE" : "GET"
        #expect(isMismatch(verify(other, authPath: authPath)), "\(name)")
        #expect(isMismatch(verify(request, authPath: authPath + "x")), "\(name)")
    }

    @Test func publishedQueryExample() {
        let query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D"
        let request = SignatureRequest(method: "GET", rawPath: "/photos/puppy.jpg", rawQuery: query, headers: SignatureHeaders([]),
                                       now: Date(timeIntervalSince1970: 1_175_139_000))
        #expect(SignatureScheme.detect(request) == .s3SigV2Query)
        #expect(verify(request, authPath: "/johnsmith/photos/puppy.jpg") == nil)
        // After Expires: refused, whatever the signature.
        var late = request
        late.now = Date(timeIntervalSince1970: 1_175_139_621)
        guard case .requestExpired = verify(late, authPath: "/johnsmith/photos/puppy.jpg") else {
            Issue.record("an expired URL must be refused")
            return
        }
    }

    /// Signs the way botocore's HmacV1Auth does (for the rows AWS publishes no example of).
    static func sign(_ stringToSign: String) -> String {
        Base64.encode(try! Crypto.hmacSHA1(key: Array(secret.utf8), data: Array(stringToSign.utf8)))
    }

    @Test func securityTokenAndAmzHeadersAreSigned() {
        let now = Self.date("Tue, 27 Mar 2007 19:36:42 +0000")
        let string = "PUT\n\n\nTue, 27 Mar 2007 19:36:42 +0000\nx-amz-meta-a:1,2\nx-amz-security-token:TOKEN\n/b/k"
        let headers: [(String, String)] = [("Date", "Tue, 27 Mar 2007 19:36:42 +0000"), ("x-amz-meta-a", "1"), ("X-Amz-Meta-A", " 2 "),
                                           ("x-amz-security-token", "TOKEN"), ("Authorization", "AWS \(Self.accessKeyId):\(Self.sign(string))")]
        let request = SignatureRequest(method: "PUT", rawPath: "/b/k", headers: SignatureHeaders(headers), now: now)
        #expect(verify(request, authPath: "/b/k", token: "TOKEN") == nil)
        // A header added after signing (any x-amz-*) breaks it.
        var added = request
        added.headers = SignatureHeaders(headers + [("x-amz-copy-source", "/other/secret")])
        #expect(isMismatch(verify(added, authPath: "/b/k", token: "TOKEN")))
        // The token is the lookup's to check.
        #expect(verify(request, authPath: "/b/k", token: "OTHER") != nil)
    }

    @Test func presignedTokenAndHeadersInTheQuery() {
        let expires = 1_175_139_620
        let string = "GET\n\n\n\(expires)\nx-amz-security-token:TOKEN\n/b/k?response-content-type=text/plain"
        let query = "response-content-type=text%2Fplain&AWSAccessKeyId=\(Self.accessKeyId)&Signature="
            + PercentEncoding.encode(Self.sign(string), keepSlash: false) + "&x-amz-security-token=TOKEN&Expires=\(expires)"
        let request = SignatureRequest(method: "GET", rawPath: "/b/k", rawQuery: query, headers: SignatureHeaders([]),
                                       now: Date(timeIntervalSince1970: TimeInterval(expires - 60)))
        #expect(verify(request, authPath: "/b/k", token: "TOKEN") == nil)
        var swapped = request
        swapped.rawQuery = query.replacingOccurrences(of: "text%2Fplain", with: "text%2Fhtml")
        #expect(isMismatch(verify(swapped, authPath: "/b/k", token: "TOKEN")))
        var withHeader = request
        withHeader.headers = SignatureHeaders([("x-amz-tagging", "a=b")])
        #expect(isMismatch(verify(withHeader, authPath: "/b/k", token: "TOKEN")))
        // More than a week ahead: refused, as SigV4 refuses it.
        var far = request
        far.now = Date(timeIntervalSince1970: TimeInterval(expires - 8 * 86_400))
        guard case .authorizationQueryParametersError = verify(far, authPath: "/b/k", token: "TOKEN") else {
            Issue.record("an expiry beyond a week must be refused")
            return
        }
    }

    /// botocore signs a path-style bucket-level request as `/bucket/` and sends `/bucket`: both
    /// forms are accepted for a bucket-level request, never for an object.
    @Test func bucketLevelPathsWithOrWithoutTheSlash() {
        let now = Self.date("Tue, 27 Mar 2007 19:36:42 +0000")
        func request(signing resource: String) -> SignatureRequest {
            let string = "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n\(resource)"
            return SignatureRequest(method: "GET", rawPath: "/b", rawQuery: "list-type=2",
                                    headers: SignatureHeaders([("Date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                                                               ("Authorization", "AWS \(Self.accessKeyId):\(Self.sign(string))")]), now: now)
        }
        func check(_ request: SignatureRequest, bucketLevel: Bool) -> S3AuthError? {
            do { _ = try S3SigV2.verify(request, authPath: "/b", bucketLevel: bucketLevel, lookup: Self.lookup()); return nil } catch { return error }
        }
        #expect(check(request(signing: "/b/"), bucketLevel: true) == nil)
        #expect(check(request(signing: "/b"), bucketLevel: true) == nil)
        #expect(isMismatch(check(request(signing: "/b/"), bucketLevel: false)))
        #expect(isMismatch(check(request(signing: "/b//"), bucketLevel: true)))
    }

    @Test func headerDateMustBeCurrent() {
        let string = "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/b/k"
        let request = SignatureRequest(method: "GET", rawPath: "/b/k",
                                       headers: SignatureHeaders([("Date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                                                                  ("Authorization", "AWS \(Self.accessKeyId):\(Self.sign(string))")]),
                                       now: Self.date("Tue, 27 Mar 2007 20:36:42 +0000"))
        guard case .requestTimeTooSkewed = verify(request, authPath: "/b/k") else {
            Issue.record("a Date an hour old must be refused")
            return
        }
        var undated = request
        undated.headers = SignatureHeaders([("Authorization", "AWS \(Self.accessKeyId):\(Self.sign(string))")])
        #expect(verify(undated, authPath: "/b/k") != nil)
    }

    func isMismatch(_ error: S3AuthError?) -> Bool {
        if case .signatureDoesNotMatch = error { return true }
        return false
    }
}
