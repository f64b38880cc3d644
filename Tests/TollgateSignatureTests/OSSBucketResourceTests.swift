import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto
import TollgateDates

/// OSS V1 path-style bucket-level requests: oss2 signs `/bucket/`, some clients `/bucket`. Both
/// are accepted for a bucket-level request; every object-level canonical form stays strict.
@Suite struct OSSBucketResourceTests {
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let secret = "bucket-resource-secret"

    /// A V1 header-signed request whose string to sign ends with `resource`.
    func request(method: String = "GET", path: String, query: String = "", resource: String) throws -> SignatureRequest {
        let date = WireDate.httpDate(Self.now)
        let stringToSign = [method, "", "", date, resource].joined(separator: "\n")
        let signature = Base64.encode(try Crypto.hmacSHA1(key: Array(Self.secret.utf8), data: Array(stringToSign.utf8)))
        return SignatureRequest(method: method, rawPath: path, rawQuery: query,
                                headers: SignatureHeaders([("Date", date), ("Authorization", "OSS AKID:\(signature)")]), now: Self.now)
    }

    func verify(_ request: SignatureRequest, bucket: String?, key: String?) -> OSSAuthError? {
        ossError { () throws(OSSAuthError) in
            try OSSSignature.verify(request, bucket: bucket, key: key) { query throws(CredentialLookupError) in
                guard query.accessKeyId == "AKID" else { throw .unknownAccessKey }
                return Self.secret
            }
        }
    }

    @Test(arguments: [
        // (path, query, signed resource, bucket, key, accepted)
        ("/photos", "", "/photos/", "photos", nil, true),
        ("/photos", "", "/photos", "photos", nil, true),
        ("/photos/", "", "/photos", "photos", nil, true),
        ("/photos", "acl", "/photos?acl", "photos", nil, true),
        ("/photos", "acl", "/photos/?acl", "photos", nil, true),
        ("/photos", "acl", "/photos", "photos", nil, false),
        ("/photos/a.jpg", "", "/photos/a.jpg", "photos", "a.jpg", true),
        ("/photos/a.jpg", "", "/photos/a.jpg/", "photos", "a.jpg", false),
        ("/photos/a.jpg", "", "/photosa.jpg", "photos", "a.jpg", false),
        ("/photos/a.jpg", "", "/photos", "photos", "a.jpg", false),
        ("/", "", "/", nil, nil, true),
        ("/", "", "//", nil, nil, false),
    ] as [(String, String, String, String?, String?, Bool)])
    func bucketLevelResourceForms(path: String, query: String, resource: String, bucket: String?, key: String?, accepted: Bool) throws {
        let error = verify(try request(path: path, query: query, resource: resource), bucket: bucket, key: key)
        if accepted {
            #expect(error == nil, "\(resource): \(String(describing: error))")
        } else {
            #expect(isOSSMismatch(error), "\(resource): \(String(describing: error))")
        }
    }

    /// A refusal reports the canonical string to sign (with `/bucket/`), not the alternative.
    @Test func mismatchReportsTheCanonicalForm() throws {
        let error = verify(try request(path: "/photos", resource: "/other"), bucket: "photos", key: nil)
        guard case .signatureDoesNotMatch(let mismatch) = error else {
            Issue.record("expected a mismatch, got \(String(describing: error))")
            return
        }
        #expect(mismatch.stringToSign.hasSuffix("\n/photos/"))
    }
}
