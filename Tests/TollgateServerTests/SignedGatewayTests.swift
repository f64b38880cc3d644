import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Synchronization
import Testing
import TollgateCORS
import TollgateCrypto
@testable import TollgateGateway
@testable import TollgateHTTP
import TollgatePolicy
import TollgateSignature
import TollgateLocalStore
import TollgateMemoryStore
import TollgateStore
import TollgateToken
@testable import TollgateServer
@testable import TollgateTokenService

// Signed requests through the gateway's front door: real STS credentials minted from the
// fixture's token keys, signed as clients sign them (S3 SigV4 with the signer `GatewayClient`
// uses, presigned S3 URLs, OSS V1), answered by the real gateway responder. Each refusal is
// checked in the caller's dialect and against what the store then holds.

/// The gateway's clock and the time of every signature, fixed so the signed dates are constants.
let signedGatewayNow = Date(timeIntervalSince1970: 1_795_000_000)
private let now = signedGatewayNow
private let amzDate = "20261118T110640Z"
let signedGatewayHTTPDate = "Wed, 18 Nov 2026 11:06:40 GMT"
private let httpDate = signedGatewayHTTPDate
private let region = "us-east-1"

/// The role the tests' credentials carry: read, write and list in `tollgate`, delete only under
/// `tmp/`, never read `secret/` (an explicit Deny), nothing at all in `private`.
private let writerPolicy = """
    {"Version": "1", "Statement": [
      {"Effect": "Allow", "Action": ["oss:GetObject", "oss:PutObject", "oss:ListObjects"],
       "Resource": ["acs:oss:*:*:tollgate", "acs:oss:*:*:tollgate/*"]},
      {"Effect": "Allow", "Action": ["oss:DeleteObject"], "Resource": ["acs:oss:*:*:tollgate/tmp/*"]},
      {"Effect": "Deny", "Action": ["oss:GetObject"], "Resource": ["acs:oss:*:*:tollgate/secret/*"]}
    ]}
    """

/// A session policy that narrows the role to reading and listing.
private let readOnlySessionPolicy = """
    {"Version": "1", "Statement": [{"Effect": "Allow", "Action": ["oss:GetObject", "oss:ListObjects"],
     "Resource": ["acs:oss:*:*:tollgate", "acs:oss:*:*:tollgate/*"]}]}
    """

/// A second role, in IAM's names, that may read and change buckets' CORS rules and nothing else:
/// `s3:PutBucketCORS` also covers deleting them, as in IAM.
private let corsPolicy = """
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:PutBucketCORS", "s3:GetBucketCORS"],
     "Resource": "arn:aws:s3:::*"}]}
    """

/// Everything, everywhere: the reference `all_policy.txt`.
private let allPolicy = """
    {"Version": "1", "Statement": [{"Effect": "Allow", "Action": ["oss:*"], "Resource": ["acs:oss:*:*:*"]}]}
    """

/// One request before it is signed. Keys and queries here need no percent-encoding.
struct Unsigned {
    var method: HTTPRequest.Method
    var bucket: String
    var key: String?
    /// The raw query, without `?` (`delete`, `prefix=docs/`).
    var query = ""
    /// Further headers, lower-case names; all of them are signed.
    var headers: [String: String] = [:]
    var body: [UInt8] = []

    init(_ method: HTTPRequest.Method, _ bucket: String, _ key: String? = nil, query: String = "",
         headers: [String: String] = [:], body: String = "") {
        self.method = method
        self.bucket = bucket
        self.key = key
        self.query = query
        self.headers = headers
        self.body = Array(body.utf8)
        if !body.isEmpty { self.headers["content-length"] = String(body.utf8.count) }
    }

    var path: String { "/" + bucket + (key.map { "/" + $0 } ?? "") }
    var uri: String { query.isEmpty ? path : path + "?" + query }
}

/// The gateway under test, with its store and the token service of its configuration.
struct SignedGateway {
    let client: any TestClientProtocol
    let store: any ObjectStore
    let tokens: TokenService

    /// Temporary credentials for the `writer` role (or `role`), as the token endpoint issues them.
    func credentials(role: String = "writer", sessionPolicy: String? = nil, issuedAt: Date = now) throws -> IssuedCredentials {
        try tokens.issue(subject: "alice", role: role, sessionPolicy: sessionPolicy, duration: 900, now: issuedAt)
    }

    /// Sends `request` signed in `dialect`'s header scheme (S3 SigV4, OSS V1); `tamper` changes
    /// the signature's first character (to another of its alphabet, hex or base64).
    @discardableResult
    func send(_ request: Unsigned, _ dialect: Dialect, _ credentials: IssuedCredentials, tamper: Bool = false,
              payloadHash: String? = nil) async throws -> TestResponse {
        var signed = try dialect == .s3 ? signS3(request, credentials, payloadHash: payloadHash) : signOSS(request, credentials)
        if tamper, var authorization = signed[.authorization] {
            let start = dialect == .s3
                ? try #require(authorization.range(of: "Signature="))
                : try #require(authorization.range(of: ":", options: .backwards))
            let first = authorization[start.upperBound]
            authorization.replaceSubrange(start.upperBound...start.upperBound, with: first == "0" ? "1" : "0")
            signed[.authorization] = authorization
        }
        return try await client.execute(uri: request.uri, method: request.method, headers: signed,
                                        body: request.body.isEmpty ? nil : ByteBuffer(bytes: request.body))
    }

    /// Keys in `bucket`, as the store lists them.
    func keys(_ bucket: String) async throws -> [String] {
        try await store.listObjects(bucket: bucket, query: ListQuery()).objects.map(\.key)
    }

    /// What the store holds at `bucket/key`.
    func content(_ bucket: String, _ key: String) async throws -> String {
        var bytes = ByteBuffer()
        for try await buffer in try await store.getObject(bucket: bucket, key: key).body {
            var buffer = buffer
            bytes.writeBuffer(&buffer)
        }
        return String(buffer: bytes)
    }

    func seed(_ bucket: String, _ key: String, _ text: String) async throws {
        try await put(store, bucket, key, text.utf8)
    }
}

func withSignedGateway(extraConfig: String = "", store: (any ObjectStore)? = nil,
                               _ body: @Sendable (SignedGateway) async throws -> Void) async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy, "cors": corsPolicy, "all": allPolicy], extraConfig: extraConfig, now: { now })
    defer { fixture.remove() }
    let store = if let store { store } else { try await makeGatewayStore(buckets: ["tollgate", "private"]) }
    let tokens = fixture.state.snapshot.tokens
    let app = Application(responder: buildGatewayResponder(state: fixture.state, store: store))
    try await app.test(.router) { client in
        try await body(SignedGateway(client: client, store: store, tokens: tokens))
    }
}

// MARK: Signing, with the project's own signers

/// Header-signed S3 SigV4 over the body's SHA-256 (or the `payloadHash` given, such as
/// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`), through `S3SigV4.authorization` (what `GatewayClient`
/// signs with).
private func signS3(_ request: Unsigned, _ credentials: IssuedCredentials, payloadHash given: String? = nil) throws -> HTTPFields {
    let payloadHash = try given ?? Hex.encode(Crypto.sha256(request.body))
    var signed: SignatureHeaders = [
        "host": "localhost", "x-amz-date": amzDate, "x-amz-content-sha256": payloadHash,
        "x-amz-security-token": credentials.securityToken,
    ]
    for (name, value) in request.headers { signed.add(name: name, value: value) }
    let authorization = try S3SigV4.authorization(
        method: request.method.rawValue, rawPath: request.path, rawQuery: request.query, headers: signed, payloadHash: payloadHash,
        accessKeyId: credentials.accessKeyId, secret: credentials.accessKeySecret, region: region, timestamp: amzDate)
    return fields(signed, authorization: authorization)
}

/// OSS V1: `OSS id:base64(HMAC-SHA1(secret, string to sign))`, the string from `OSSSignature`.
func signOSS(_ request: Unsigned, _ credentials: IssuedCredentials) throws -> HTTPFields {
    var signed: SignatureHeaders = ["host": "localhost", "date": httpDate, "x-oss-security-token": credentials.securityToken]
    for (name, value) in request.headers { signed.add(name: name, value: value) }
    let stringToSign = OSSSignature.stringToSignV1(method: request.method.rawValue, headers: signed, date: httpDate,
                                                   bucket: request.bucket, key: request.key, rawQuery: request.query)
    let signature = try Crypto.hmacSHA1(key: Array(credentials.accessKeySecret.utf8), data: Array(stringToSign.utf8))
    return fields(signed, authorization: "OSS \(credentials.accessKeyId):\(Base64.encode(signature))")
}

/// A presigned S3 GET URL (path and query): the query's parameters signed with
/// `S3SigV4.authorization` over `UNSIGNED-PAYLOAD`, its signature appended as `X-Amz-Signature`.
private func presignS3(_ request: Unsigned, _ credentials: IssuedCredentials, expires: Int = 300) throws -> String {
    let credential = "\(credentials.accessKeyId)%2F\(amzDate.prefix(8))%2F\(region)%2Fs3%2Faws4_request"
    let query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=\(credential)&X-Amz-Date=\(amzDate)&X-Amz-Expires=\(expires)"
        + "&X-Amz-Security-Token=\(credentials.securityToken)&X-Amz-SignedHeaders=host"
    let authorization = try S3SigV4.authorization(
        method: request.method.rawValue, rawPath: request.path, rawQuery: query, headers: ["host": "localhost"],
        payloadHash: S3PayloadMode.unsignedPayload, accessKeyId: credentials.accessKeyId, secret: credentials.accessKeySecret,
        region: region, timestamp: amzDate)
    let signature = try #require(authorization.split(separator: "=").last)
    return request.path + "?" + query + "&X-Amz-Signature=" + signature
}

func fields(_ signed: SignatureHeaders, authorization: String) -> HTTPFields {
    var fields = HTTPFields()
    // Host travels as the request's authority (`localhost` in router tests).
    for field in signed.fields where field.name != "host" {
        fields.append(HTTPField(name: HTTPField.Name(field.name)!, value: field.value))
    }
    fields[.authorization] = authorization
    return fields
}

// MARK: Checks

/// A refusal in the caller's dialect: status, code, the dialect's request id header (and not
/// the other's), S3's `Resource`, and no body for HEAD.
func expectError(_ response: TestResponse, _ dialect: Dialect, status: HTTPResponse.Status, code: String,
                         head: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.status == status, sourceLocation: sourceLocation)
    #expect(response.headers[dialect == .s3 ? .amzRequestID : .ossRequestID] != nil, sourceLocation: sourceLocation)
    #expect(response.headers[dialect == .s3 ? .ossRequestID : .amzRequestID] == nil, sourceLocation: sourceLocation)
    let body = String(buffer: response.body)
    if head {
        #expect(body.isEmpty, sourceLocation: sourceLocation)
        return
    }
    #expect(body.contains("<Code>\(code)</Code>"), "\(body)", sourceLocation: sourceLocation)
    #expect(body.contains("<Resource>") == (dialect == .s3), "\(body)", sourceLocation: sourceLocation)
}

private func deleteBody(_ keys: [String]) -> String {
    "<Delete><Quiet>false</Quiet>" + keys.map { "<Object><Key>\($0)</Key></Object>" }.joined() + "</Delete>"
}

func contentMD5(_ body: String) throws -> String {
    Base64.encode(try Crypto.md5(Array(body.utf8)))
}

// MARK: Tests

@Test("the role's grants: PUT, GET, HEAD, List and DELETE succeed and change the store", arguments: [Dialect.s3, .oss])
func roleGrantsReachTheStore(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        let put = try await gateway.send(Unsigned(.put, "tollgate", "docs/a.txt", headers: ["content-type": "text/plain"], body: "hello"),
                                         dialect, credentials)
        #expect(put.status == .ok, "\(String(buffer: put.body))")
        #expect(try await gateway.content("tollgate", "docs/a.txt") == "hello")

        let get = try await gateway.send(Unsigned(.get, "tollgate", "docs/a.txt"), dialect, credentials)
        #expect(get.status == .ok)
        #expect(String(buffer: get.body) == "hello")
        #expect(get.headers[.contentType] == "text/plain")

        let head = try await gateway.send(Unsigned(.head, "tollgate", "docs/a.txt"), dialect, credentials)
        #expect(head.status == .ok)
        #expect(head.headers[.contentLength] == "5")

        let list = try await gateway.send(Unsigned(.get, "tollgate", query: "prefix=docs%2F"), dialect, credentials)
        #expect(list.status == .ok)
        #expect(String(buffer: list.body).contains("<Key>docs/a.txt</Key>"))

        try await gateway.seed("tollgate", "tmp/t.txt", "scratch")
        let delete = try await gateway.send(Unsigned(.delete, "tollgate", "tmp/t.txt"), dialect, credentials)
        #expect(delete.status == .noContent)
        #expect(try await gateway.keys("tollgate") == ["docs/a.txt"])
    }
}

@Test("what the role does not grant is AccessDenied in the caller's dialect, and the store is unchanged", arguments: [Dialect.s3, .oss])
func roleRefusalsLeaveTheStoreAlone(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        try await gateway.seed("tollgate", "secret/s.txt", "classified")
        try await gateway.seed("tollgate", "docs/keep.txt", "kept")
        try await gateway.seed("private", "p.txt", "private")

        // No grant at all in `private`: writing, reading and listing there.
        expectError(try await gateway.send(Unsigned(.put, "private", "x.txt", body: "intruder"), dialect, credentials),
                    dialect, status: .forbidden, code: "AccessDenied")
        expectError(try await gateway.send(Unsigned(.get, "private", "p.txt"), dialect, credentials),
                    dialect, status: .forbidden, code: "AccessDenied")
        expectError(try await gateway.send(Unsigned(.get, "private"), dialect, credentials),
                    dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.keys("private") == ["p.txt"])

        // An explicit Deny beats the bucket-wide Allow, for GET and HEAD.
        let get = try await gateway.send(Unsigned(.get, "tollgate", "secret/s.txt"), dialect, credentials)
        expectError(get, dialect, status: .forbidden, code: "AccessDenied")
        #expect(!String(buffer: get.body).contains("classified"))
        expectError(try await gateway.send(Unsigned(.head, "tollgate", "secret/s.txt"), dialect, credentials),
                    dialect, status: .forbidden, code: "AccessDenied", head: true)

        // Deleting is granted only under tmp/.
        expectError(try await gateway.send(Unsigned(.delete, "tollgate", "docs/keep.txt"), dialect, credentials),
                    dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.keys("tollgate") == ["docs/keep.txt", "secret/s.txt"])
        #expect(try await gateway.content("tollgate", "docs/keep.txt") == "kept")
    }
}

@Test("a session policy narrows the role: what the role allows, the session policy can still refuse", arguments: [Dialect.s3, .oss])
func sessionPolicyNarrowsTheRole(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let narrowed = try gateway.credentials(sessionPolicy: readOnlySessionPolicy)
        try await gateway.seed("tollgate", "docs/a.txt", "hello")
        try await gateway.seed("tollgate", "tmp/t.txt", "scratch")

        let get = try await gateway.send(Unsigned(.get, "tollgate", "docs/a.txt"), dialect, narrowed)
        #expect(get.status == .ok)
        #expect(String(buffer: get.body) == "hello")

        expectError(try await gateway.send(Unsigned(.put, "tollgate", "docs/b.txt", body: "new"), dialect, narrowed),
                    dialect, status: .forbidden, code: "AccessDenied")
        expectError(try await gateway.send(Unsigned(.delete, "tollgate", "tmp/t.txt"), dialect, narrowed),
                    dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.keys("tollgate") == ["docs/a.txt", "tmp/t.txt"])

        // The same PUT with the role alone is allowed: the session policy made the difference.
        let put = try await gateway.send(Unsigned(.put, "tollgate", "docs/b.txt", body: "new"), dialect, try gateway.credentials())
        #expect(put.status == .ok)
        #expect(try await gateway.content("tollgate", "docs/b.txt") == "new")
    }
}

@Test("CopyObject needs read on its source: a denied source is 403 and the target is not written", arguments: [Dialect.s3, .oss])
func copyWithADeniedSourceWritesNothing(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        try await gateway.seed("tollgate", "docs/a.txt", "hello")
        try await gateway.seed("tollgate", "secret/s.txt", "classified")
        try await gateway.seed("private", "p.txt", "private")
        let header = dialect == .s3 ? "x-amz-copy-source" : "x-oss-copy-source"

        for source in ["/tollgate/secret/s.txt", "/private/p.txt"] {
            let copy = try await gateway.send(Unsigned(.put, "tollgate", "docs/copy.txt", headers: [header: source]), dialect, credentials)
            expectError(copy, dialect, status: .forbidden, code: "AccessDenied")
        }
        #expect(try await gateway.keys("tollgate") == ["docs/a.txt", "secret/s.txt"])

        // A readable source copies.
        let copy = try await gateway.send(Unsigned(.put, "tollgate", "docs/copy.txt", headers: [header: "/tollgate/docs/a.txt"]), dialect, credentials)
        #expect(copy.status == .ok)
        #expect(String(buffer: copy.body).contains("<CopyObjectResult"))
        #expect(try await gateway.content("tollgate", "docs/copy.txt") == "hello")
    }
}

@Test("A copy whose metadata and tags follow different directives takes the source's part from the version it copies", arguments: [Dialect.s3, .oss])
func copyTakesTagsFromTheVersionItCopies(dialect: Dialect) async throws {
    let base = MemoryObjectStore()
    _ = try await base.ensureBuckets(["tollgate", "private"])
    try await put(base, "tollgate", "docs/src.txt", "version 1".utf8, metadata: ObjectMetadata(tags: ["version": "1"]))
    // The source is replaced after the request arrived, before the store opens it.
    let racing = HookedStore(base: base, beforeCopy: { store in
        try await put(store, "tollgate", "docs/src.txt", "version 2".utf8, metadata: ObjectMetadata(tags: ["version": "2"]))
    })
    try await withSignedGateway(store: racing) { gateway in
        let prefix = dialect == .s3 ? "x-amz-" : "x-oss-"
        let copy = try await gateway.send(Unsigned(.put, "tollgate", "docs/copy.txt", headers: [
            prefix + "copy-source": "/tollgate/docs/src.txt", prefix + "metadata-directive": "REPLACE", "content-type": "text/plain",
        ]), dialect, try gateway.credentials())
        #expect(copy.status == .ok)
        let copied = try await base.headObject(bucket: "tollgate", key: "docs/copy.txt")
        #expect(try await gateway.content("tollgate", "docs/copy.txt") == "version 2")
        #expect(copied.metadata == ObjectMetadata(contentType: "text/plain", tags: ["version": "2"]))
    }
}

@Test("DeleteObjects authorizes each key: allowed keys are deleted, denied keys are AccessDenied errors and stay", arguments: [Dialect.s3, .oss])
func deleteObjectsDeniesPerKey(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        for key in ["tmp/a", "tmp/b", "docs/c", "secret/d"] { try await gateway.seed("tollgate", key, key) }
        let body = deleteBody(["tmp/a", "docs/c", "tmp/b", "secret/d"])
        let response = try await gateway.send(
            Unsigned(.post, "tollgate", query: "delete", headers: ["content-md5": try contentMD5(body), "content-type": "application/xml"], body: body),
            dialect, credentials)
        #expect(response.status == .ok)
        let result = String(buffer: response.body)
        for key in ["tmp/a", "tmp/b"] {
            #expect(result.contains("<Deleted><Key>\(key)</Key></Deleted>"), "\(result)")
        }
        for key in ["docs/c", "secret/d"] {
            #expect(result.contains("<Error><Key>\(key)</Key><Code>AccessDenied</Code>"), "\(result)")
            #expect(!result.contains("<Deleted><Key>\(key)</Key>"))
        }
        #expect(try await gateway.keys("tollgate") == ["docs/c", "secret/d"])

        // Where no key could be deleted, the request is refused whole, before its body is read.
        try await gateway.seed("private", "p.txt", "private")
        let privateBody = deleteBody(["p.txt"])
        let refused = try await gateway.send(
            Unsigned(.post, "private", query: "delete", headers: ["content-md5": try contentMD5(privateBody)], body: privateBody),
            dialect, credentials)
        expectError(refused, dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.keys("private") == ["p.txt"])
    }
}

/// A store whose bodies stream (a remote store's): the fast path asks it for a GET, cannot send
/// the body whole, and hands the request on to the responder with the read it got. The object is
/// fetched once per GET, whole or ranged, also on a kept-alive connection, and nothing stays behind.
@Test(.timeLimit(.minutes(1)))
func aGetHandedOnIsNotFetchedTwice() async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy], now: { now })
    defer { fixture.remove() }
    let base = MemoryObjectStore()
    _ = try await base.ensureBuckets(["tollgate"])
    let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
    try await put(base, "tollgate", "docs/big.bin", bytes)
    let gets = Mutex(0)
    let store = HookedStore(base: base, remoteLike: true, onGet: { gets.withLock { $0 += 1 } })
    let gateway = makeGateway(state: fixture.state, store: store, sendsFiles: false)
    let app = Application(responder: gateway, server: try pinnedHTTPServer(
        .init(), certificates: nil, beforeResponder: { logger in [GatewayFastPath(gateway: gateway, logger: logger)] }))
    let credentials = try fixture.writer()
    let url = try presignS3(Unsigned(.get, "tollgate", "docs/big.bin"), credentials)
    try await app.test(.live) { client in
        let whole = try await client.execute(uri: url, method: .get)
        #expect(whole.status == .ok && Array(buffer: whole.body) == bytes)
        #expect(gets.withLock { $0 } == 1)
        let ranged = try await client.execute(uri: url, method: .get, headers: [.range: "bytes=100-2099"])
        #expect(ranged.status == .partialContent && Array(buffer: ranged.body) == Array(bytes[100...2099]))
        #expect(gets.withLock { $0 } == 2)
        // A refused GET never reaches the store.
        let tampered = String(url.dropLast()) + (url.hasSuffix("0") ? "1" : "0")
        #expect(try await client.execute(uri: tampered, method: .get).status == .forbidden)
        #expect(gets.withLock { $0 } == 2)
    }
    #expect(gateway.prefetched.count == 0)
}

@Test("a presigned GET is authorized like a header-signed one; a tampered one is refused")
func presignedGetIsAuthorized() async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        try await gateway.seed("tollgate", "docs/a.txt", "hello")
        try await gateway.seed("tollgate", "secret/s.txt", "classified")

        let allowed = try await gateway.client.execute(uri: try presignS3(Unsigned(.get, "tollgate", "docs/a.txt"), credentials), method: .get)
        #expect(allowed.status == .ok)
        #expect(String(buffer: allowed.body) == "hello")

        let denied = try await gateway.client.execute(uri: try presignS3(Unsigned(.get, "tollgate", "secret/s.txt"), credentials), method: .get)
        expectError(denied, .s3, status: .forbidden, code: "AccessDenied")
        #expect(!String(buffer: denied.body).contains("classified"))

        let url = try presignS3(Unsigned(.get, "tollgate", "docs/a.txt"), credentials)
        let tampered = String(url.dropLast()) + (url.hasSuffix("0") ? "1" : "0")
        expectError(try await gateway.client.execute(uri: tampered, method: .get), .s3, status: .forbidden, code: "SignatureDoesNotMatch")
    }
}

@Test("a tampered signature is refused and nothing is stored", arguments: [Dialect.s3, .oss])
func tamperedSignatureStoresNothing(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let response = try await gateway.send(Unsigned(.put, "tollgate", "docs/t.txt", body: "forged"), dialect, try gateway.credentials(), tamper: true)
        expectError(response, dialect, status: .forbidden, code: "SignatureDoesNotMatch")
        #expect(try await gateway.keys("tollgate") == [])
    }
}

@Test("an expired token is refused with the dialect's code and nothing is stored", arguments: [Dialect.s3, .oss])
func expiredTokenStoresNothing(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        // Issued an hour ago for 15 minutes; the request itself is signed now.
        let expired = try gateway.credentials(issuedAt: now.addingTimeInterval(-3600))
        let response = try await gateway.send(Unsigned(.put, "tollgate", "docs/t.txt", body: "late"), dialect, expired)
        if dialect == .s3 {
            expectError(response, .s3, status: .badRequest, code: "ExpiredToken")
        } else {
            expectError(response, .oss, status: .forbidden, code: "SecurityTokenExpired")
        }
        #expect(try await gateway.keys("tollgate") == [])
    }
}

@Test("checksums through the front door: S3's verified, stored and returned when asked; OSS's CRC-64 on every write and whole read")
func checksumsThroughTheGateway() async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        let text = "checksummed bytes"
        let sha = Base64.encode(try Crypto.sha256(Array(text.utf8)))
        let checksumHeader = HTTPField.Name("x-amz-checksum-sha256")!
        let put = try await gateway.send(Unsigned(.put, "tollgate", "sums/s3", headers: ["x-amz-checksum-sha256": sha], body: text), .s3, credentials)
        #expect(put.status == .ok)
        #expect(put.headers[checksumHeader] == sha)
        // Asked for (and signed, as every x-amz- header): returned; not asked for: not.
        let asked = try await gateway.send(Unsigned(.get, "tollgate", "sums/s3", headers: ["x-amz-checksum-mode": "ENABLED"]), .s3, credentials)
        #expect(asked.headers[checksumHeader] == sha && asked.headers[HTTPField.Name("x-amz-checksum-type")!] == "FULL_OBJECT")
        #expect(try await gateway.send(Unsigned(.get, "tollgate", "sums/s3"), .s3, credentials).headers[checksumHeader] == nil)
        // A checksum of other bytes: BadDigest, and nothing is stored.
        let wrong = try await gateway.send(Unsigned(.put, "tollgate", "sums/wrong", headers: ["x-amz-checksum-sha256": sha], body: "other"), .s3, credentials)
        expectError(wrong, .s3, status: .badRequest, code: "BadDigest")
        #expect(try await !gateway.keys("tollgate").contains("sums/wrong"))

        let crcHeader = HTTPField.Name("x-oss-hash-crc64ecma")!
        let crc = String(ReflectedCRC<UInt64>.ecma.update(0, Array(text.utf8)))
        let ossPut = try await gateway.send(Unsigned(.put, "tollgate", "sums/oss", body: text), .oss, credentials)
        #expect(ossPut.headers[crcHeader] == crc)
        #expect(try await gateway.send(Unsigned(.get, "tollgate", "sums/oss"), .oss, credentials).headers[crcHeader] == crc)
        #expect(try await gateway.send(Unsigned(.head, "tollgate", "sums/oss"), .oss, credentials).headers[crcHeader] == crc)
        #expect(try await gateway.send(Unsigned(.get, "tollgate", "sums/oss", headers: ["range": "bytes=0-3"]), .oss, credentials).headers[crcHeader] == nil)
    }
}

@Test("Content-MD5 of an object's bytes (put, part, append) is checked by the store, which hashes them once: BadDigest (OSS: InvalidDigest), and nothing is stored",
      arguments: [Dialect.s3, .oss])
func contentMD5IsTheStoresCheck(dialect: Dialect) async throws {
    let code = dialect == .s3 ? "BadDigest" : "InvalidDigest"
    let stated = try contentMD5("the bytes the client meant")
    /// The three writes that carry an object's bytes, each with `Content-MD5: md5`.
    @Sendable func writes(_ gateway: SignedGateway, _ body: String, md5: String) async throws -> [(String, TestResponse)] {
        let credentials = try gateway.credentials()
        let headers = ["content-md5": md5]
        let upload = try await gateway.store.createMultipartUpload(bucket: "tollgate", key: "md5/part", metadata: ObjectMetadata(), checksum: nil)
        let uploadQuery = "partNumber=1&uploadId=\(upload.uploadID)"
        var sent = [
            ("md5/put", try await gateway.send(Unsigned(.put, "tollgate", "md5/put", headers: headers, body: body), dialect, credentials)),
            ("md5/part", try await gateway.send(Unsigned(.put, "tollgate", "md5/part", query: uploadQuery, headers: headers, body: body), dialect, credentials)),
        ]
        if dialect == .oss {
            sent.append(("md5/append", try await gateway.send(
                Unsigned(.post, "tollgate", "md5/append", query: "append&position=0", headers: headers, body: body), dialect, credentials)))
        }
        return sent
    }
    try await withSignedGateway { gateway in
        for (key, response) in try await writes(gateway, "other bytes", md5: stated) {
            expectError(response, dialect, status: .badRequest, code: code)
            #expect(try await !gateway.keys("tollgate").contains(key), "\(key)")
        }
        for (key, response) in try await writes(gateway, "the bytes the client meant", md5: stated) {
            #expect(response.status == .ok, "\(key): \(String(buffer: response.body))")
            if key != "md5/append" { #expect(response.headers[.eTag] == dialect.etag("\"" + Hex.encode(try Crypto.md5(Array("the bytes the client meant".utf8))) + "\"")) }
        }
        #expect(try await gateway.content("tollgate", "md5/put") == "the bytes the client meant")
    }
    // The gateway hands the Content-MD5 to the store and does not hash the bytes itself: a
    // store that is told and ignores it stores them.
    let told = Mutex<[[UInt8]?]>([])
    let base = MemoryObjectStore()
    _ = try await base.ensureBuckets(["tollgate", "private"])
    let ignoring = HookedStore(base: base, writeOptions: { options in
        told.withLock { $0.append(options.expectedMD5) }
        var ignored = options
        ignored.expectedMD5 = nil
        return ignored
    })
    try await withSignedGateway(store: ignoring) { gateway in
        let sent = try await writes(gateway, "other bytes", md5: stated)
        for (key, response) in sent { #expect(response.status == .ok, "\(key): \(String(buffer: response.body))") }
        #expect(told.withLock { $0 } == Array(repeating: Base64.decode(stated), count: sent.count))
    }
}

@Test("an aws-chunked PUT (boto3's over HTTPS) stores the payload of its chunks, several in one read, checked against its CRC-32 trailer and Content-MD5")
func awsChunkedPutThroughTheGateway() async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials()
        let payload = "hello, chunked world"
        let crc = try Base64.encode(StreamingChecksum.checksum(.crc32, Array(payload.utf8)))
        func chunked(_ pieces: [String], trailer: String) -> String {
            pieces.map { String($0.utf8.count, radix: 16) + "\r\n" + $0 + "\r\n" }.joined()
                + "0\r\nx-amz-checksum-crc32:\(trailer)\r\n\r\n"
        }
        func put(_ key: String, _ body: String, md5: String? = nil) async throws -> TestResponse {
            var headers = ["content-encoding": "aws-chunked", "x-amz-decoded-content-length": String(payload.utf8.count),
                           "x-amz-trailer": "x-amz-checksum-crc32"]
            if let md5 { headers["content-md5"] = md5 }
            return try await gateway.send(Unsigned(.put, "tollgate", key, headers: headers, body: body), .s3, credentials,
                                          payloadHash: S3PayloadMode.streamingUnsignedPayloadTrailer)
        }
        // Three chunks in the one buffer the test client sends: three slices of it reach the store.
        let stored = try await put("chunked/ok", chunked(["hello", ", chunk", "ed world"], trailer: crc), md5: try contentMD5(payload))
        #expect(stored.status == .ok, "\(String(buffer: stored.body))")
        #expect(stored.headers[.eTag] == "\"" + Hex.encode(try Crypto.md5(Array(payload.utf8))) + "\"")
        #expect(stored.headers[HTTPField.Name("x-amz-checksum-crc32")!] == crc)
        #expect(try await gateway.content("tollgate", "chunked/ok") == payload)
        // Other bytes under the same CRC, or the same bytes under another Content-MD5: nothing stored.
        expectError(try await put("chunked/crc", chunked(["hello, chunked worle"], trailer: crc)), .s3, status: .badRequest, code: "BadDigest")
        expectError(try await put("chunked/md5", chunked(["hello", ", chunked world"], trailer: crc), md5: try contentMD5("other")),
                    .s3, status: .badRequest, code: "BadDigest")
        #expect(try await gateway.keys("tollgate").filter { $0.hasPrefix("chunked/") } == ["chunked/ok"])
    }
}

@Test("an aws-chunked body of many tiny chunks in one read reaches the store as one buffer, not one per chunk")
func tinyChunksAreJoined() async throws {
    let base = MemoryObjectStore()
    _ = try await base.ensureBuckets(["tollgate", "private"])
    let sizes = Mutex<[Int]>([])
    let watching = HookedStore(base: base, putBuffer: { size in sizes.withLock { $0.append(size) } })
    try await withSignedGateway(store: watching) { gateway in
        let payload = String(repeating: "0123456789", count: 20)
        let crc = try Base64.encode(StreamingChecksum.checksum(.crc32, Array(payload.utf8)))
        let body = payload.map { "1\r\n\($0)\r\n" }.joined() + "0\r\nx-amz-checksum-crc32:\(crc)\r\n\r\n"
        let headers = ["content-encoding": "aws-chunked", "x-amz-decoded-content-length": "200", "x-amz-trailer": "x-amz-checksum-crc32"]
        let response = try await gateway.send(
            Unsigned(.put, "tollgate", "chunked/tiny", headers: headers, body: body),
            .s3, try gateway.credentials(), payloadHash: "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        #expect(try await gateway.content("tollgate", "chunked/tiny") == payload)
    }
    // The test client sends the body as one buffer: 200 chunks, joined.
    #expect(sizes.withLock { $0 } == [200])
}

// MARK: Bucket CORS

private let corsBody = """
    <CORSConfiguration><CORSRule><ID>web</ID><AllowedOrigin>https://app.example.com</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>\
    <AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader><ExposeHeader>x-amz-meta-owner</ExposeHeader>\
    <MaxAgeSeconds>300</MaxAgeSeconds></CORSRule><ResponseVary>true</ResponseVary></CORSConfiguration>
    """

private let corsRules = CORSConfiguration(rules: [
    CORSRule(id: "web", allowedOrigins: ["https://app.example.com"], allowedMethods: ["PUT", "GET"], allowedHeaders: ["*"],
             exposeHeaders: ["x-amz-meta-owner"], maxAgeSeconds: 300),
], responseVary: true)

@Test("PutBucketCors stores the rules, GetBucketCors answers them, DeleteBucketCors removes them (idempotent)", arguments: [Dialect.s3, .oss])
func bucketCorsRoundTrip(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials(role: "cors")
        expectError(try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, credentials),
                    dialect, status: .notFound, code: "NoSuchCORSConfiguration")

        let put = try await gateway.send(Unsigned(.put, "tollgate", query: "cors", headers: ["content-md5": try contentMD5(corsBody)], body: corsBody),
                                         dialect, credentials)
        #expect(put.status == .ok, "\(String(buffer: put.body))")
        #expect(try await gateway.store.bucketCORS("tollgate") == corsRules)

        let get = try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, credentials)
        #expect(get.status == .ok)
        let xml = String(buffer: get.body)
        #expect(xml.contains("<CORSRule><ID>web</ID><AllowedOrigin>https://app.example.com</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
            + "<AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader><ExposeHeader>x-amz-meta-owner</ExposeHeader>"
            + "<MaxAgeSeconds>300</MaxAgeSeconds></CORSRule>"), "\(xml)")
        // ResponseVary is OSS's: S3 clients are not shown it.
        #expect(xml.contains("<ResponseVary>true</ResponseVary>") == (dialect == .oss), "\(xml)")
        #expect(xml.contains("xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"") == (dialect == .s3))

        for _ in 0..<2 {
            let delete = try await gateway.send(Unsigned(.delete, "tollgate", query: "cors"), dialect, credentials)
            #expect(delete.status == .noContent)
            #expect(try await gateway.store.bucketCORS("tollgate") == nil)
        }
        expectError(try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, credentials),
                    dialect, status: .notFound, code: "NoSuchCORSConfiguration")
        for method in [HTTPRequest.Method.get, .delete] {
            expectError(try await gateway.send(Unsigned(method, "missing", query: "cors"), dialect, credentials),
                        dialect, status: .notFound, code: "NoSuchBucket")
        }
        expectError(try await gateway.send(Unsigned(.put, "missing", query: "cors", body: corsBody), dialect, credentials),
                    dialect, status: .notFound, code: "NoSuchBucket")
    }
}

@Test("a CORS body S3 would not take is MalformedXML or InvalidRequest (a negative MaxAgeSeconds: OSS's InvalidArgument) in the caller's dialect, and nothing is stored", arguments: [Dialect.s3, .oss])
func bucketCorsRefusals(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        let credentials = try gateway.credentials(role: "cors")
        let rule = { (inner: String) in "<CORSConfiguration><CORSRule>\(inner)</CORSRule></CORSConfiguration>" }
        let refusals: [(String, HTTPResponse.Status, String)] = [
            ("<CORSConfiguration/>", .badRequest, "MalformedXML"),
            (rule("<AllowedMethod>GET</AllowedMethod>"), .badRequest, "MalformedXML"),
            // Outside S3's schema; OSS's InvalidArgument.
            (rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-5</MaxAgeSeconds>"), .badRequest,
             dialect == .s3 ? "MalformedXML" : "InvalidArgument"),
            (rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod>"), .badRequest, "InvalidRequest"),
            (rule("<AllowedOrigin>https://*.*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"), .badRequest, "InvalidRequest"),
            (rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>*-*</AllowedHeader>"), .badRequest, "InvalidRequest"),
            (rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><!--\(String(repeating: "-", count: 70_000))-->"),
             .badRequest, "MaxMessageLengthExceeded"),
        ]
        for (body, status, code) in refusals {
            expectError(try await gateway.send(Unsigned(.put, "tollgate", query: "cors", body: body), dialect, credentials),
                        dialect, status: status, code: code)
        }
        #expect(try await gateway.store.bucketCORS("tollgate") == nil)
    }
}

@Test("changing or reading CORS rules needs their actions: a role without them is refused and the rules stay", arguments: [Dialect.s3, .oss])
func bucketCorsNeedsItsActions(dialect: Dialect) async throws {
    try await withSignedGateway { gateway in
        try await gateway.store.setBucketCORS("tollgate", corsRules)
        let writer = try gateway.credentials()
        let replacement = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>DELETE</AllowedMethod></CORSRule></CORSConfiguration>"
        expectError(try await gateway.send(Unsigned(.put, "tollgate", query: "cors", body: replacement), dialect, writer),
                    dialect, status: .forbidden, code: "AccessDenied")
        expectError(try await gateway.send(Unsigned(.delete, "tollgate", query: "cors"), dialect, writer),
                    dialect, status: .forbidden, code: "AccessDenied")
        expectError(try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, writer),
                    dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.store.bucketCORS("tollgate") == corsRules)
        // The CORS role may do just that, and no more.
        let cors = try gateway.credentials(role: "cors")
        expectError(try await gateway.send(Unsigned(.put, "tollgate", "k", body: "x"), dialect, cors), dialect, status: .forbidden, code: "AccessDenied")
        #expect(try await gateway.send(Unsigned(.get, "tollgate", query: "cors"), dialect, cors).status == .ok)
    }
}

/// config.json's default for every bucket: another origin than the bucket rules' above.
private let defaultCORS = #", "CORS": {"Gateway": [{"AllowedOrigins": ["https://default.example"], "AllowedMethods": ["GET"], "MaxAgeSeconds": 60}]}"#

/// A browser's preflight: unsigned, with the Access-Control-Request-* headers.
private func preflight(_ gateway: SignedGateway, _ path: String, origin: String, method: String, headers: String? = nil) async throws -> TestResponse {
    var fields: HTTPFields = [.origin: origin, .accessControlRequestMethod: method]
    if let headers { fields[.accessControlRequestHeaders] = headers }
    return try await gateway.client.execute(uri: path, method: .options, headers: fields)
}

@Test("a bucket's own CORS rules decide its preflights and CORS headers; deleting them brings config.json's default back")
func bucketRulesReplaceTheDefault() async throws {
    try await withSignedGateway(extraConfig: defaultCORS) { gateway in
        let app = "https://app.example.com", fallback = "https://default.example"
        let cors = try gateway.credentials(role: "cors"), writer = try gateway.credentials()
        try await gateway.seed("tollgate", "docs/a.txt", "hello")
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: fallback, method: "GET").status == .ok)
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: app, method: "PUT").status == .forbidden)

        let put = try await gateway.send(Unsigned(.put, "tollgate", query: "cors", body: corsBody), .s3, cors)
        #expect(put.status == .ok)
        let allowed = try await preflight(gateway, "/tollgate/docs/a.txt", origin: app, method: "PUT", headers: "content-type, x-amz-date")
        #expect(allowed.status == .ok)
        #expect(allowed.headers[.accessControlAllowOrigin] == app)
        #expect(allowed.headers[.accessControlAllowMethods] == "PUT, GET")
        #expect(allowed.headers[.accessControlAllowHeaders] == "content-type, x-amz-date")
        #expect(allowed.headers[.accessControlMaxAge] == "300")
        #expect(allowed.headers[.accessControlExposeHeaders]?.contains("x-amz-meta-owner") == true)
        // The bucket's rules replace the default for that bucket, and for it alone.
        let replaced = try await preflight(gateway, "/tollgate/docs/a.txt", origin: fallback, method: "GET")
        #expect(replaced.status == .forbidden)
        #expect(String(buffer: replaced.body).contains("<Code>AccessForbidden</Code>"))
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: app, method: "DELETE").status == .forbidden)
        #expect(try await preflight(gateway, "/private/p.txt", origin: fallback, method: "GET").status == .ok)
        #expect(try await preflight(gateway, "/private/p.txt", origin: app, method: "PUT").status == .forbidden)

        // The actual request carries the headers of the bucket's rule, and only for its origins.
        let get = try await gateway.send(Unsigned(.get, "tollgate", "docs/a.txt", headers: ["origin": app]), .oss, writer)
        #expect(get.status == .ok)
        #expect(get.headers[.accessControlAllowOrigin] == app)
        #expect(get.headers[.accessControlExposeHeaders]?.contains("x-amz-meta-owner") == true)
        let other = try await gateway.send(Unsigned(.get, "tollgate", "docs/a.txt", headers: ["origin": fallback]), .oss, writer)
        #expect(other.status == .ok && other.headers[.accessControlAllowOrigin] == nil)

        #expect(try await gateway.send(Unsigned(.delete, "tollgate", query: "cors"), .oss, cors).status == .noContent)
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: fallback, method: "GET").status == .ok)
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: app, method: "PUT").status == .forbidden)
        let restored = try await gateway.send(Unsigned(.get, "tollgate", "docs/a.txt", headers: ["origin": fallback]), .s3, writer)
        #expect(restored.headers[.accessControlAllowOrigin] == fallback)
    }
}

@Test("a bucket with neither its own CORS rules nor config.json's refuses every preflight with 403 AccessForbidden")
func noRulesNoPreflight() async throws {
    try await withSignedGateway { gateway in
        let refused = try await preflight(gateway, "/tollgate/docs/a.txt", origin: "https://app.example.com", method: "GET")
        #expect(refused.status == .forbidden)
        #expect(String(buffer: refused.body).contains("<Code>AccessForbidden</Code>"))
        #expect(refused.headers[.accessControlAllowOrigin] == nil)
        try await gateway.store.setBucketCORS("tollgate", corsRules)
        #expect(try await preflight(gateway, "/tollgate/docs/a.txt", origin: "https://app.example.com", method: "GET").status == .ok)
        #expect(try await preflight(gateway, "/private/docs/a.txt", origin: "https://app.example.com", method: "GET").status == .forbidden)
    }
}

// MARK: Answered at once

/// `GatewayFastPath` in a test channel on its own event loop, with a handler before it that
/// records the file spans it sends and the reads it passes on.
private final class FastPathChannel: Sendable {
    let channel: NIOAsyncTestingChannel
    let recorder = Recorder()

    /// Stands where the HTTP codec does: takes the fast path's `SendFile` events, counts reads.
    final class Recorder: ChannelOutboundHandler, @unchecked Sendable {
        // @unchecked: touched on the channel's event loop only.
        typealias OutboundIn = HTTPResponsePart
        var spans: [ZeroCopyRegion] = []
        var reads = 0
        func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
            guard let send = event as? HTTP1Codec.SendFile else { return context.triggerUserOutboundEvent(event, promise: promise) }
            spans.append(send.span)
            promise?.succeed()
        }

        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    init(_ gateway: Gateway) async throws {
        let recorder = self.recorder
        channel = try await NIOAsyncTestingChannel { channel in
            try channel.pipeline.syncOperations.addHandlers([recorder, GatewayFastPath(gateway: gateway, logger: Logger(label: "test"))])
        }
    }

    static func head(_ method: HTTPRequest.Method, _ target: String, _ headers: HTTPFields = [:]) -> HTTPRequestPart {
        .head(HTTPRequest(method: method, scheme: "http", authority: "localhost", path: target, headerFields: headers))
    }

    func send(_ method: HTTPRequest.Method, _ target: String, _ headers: HTTPFields = [:]) async throws {
        try await channel.writeInbound(Self.head(method, target, headers))
        try await channel.writeInbound(HTTPRequestPart.end(nil))
    }

    /// The answer written back by now: head and body; nil when nothing was written.
    func answer() async throws -> (HTTPResponse, String)? {
        guard case .head(let head)? = try await channel.readOutbound(as: HTTPResponsePart.self) else { return nil }
        return (head, try await body())
    }

    /// The next answer written back, waiting for it (an answer from the store comes later).
    func nextAnswer() async throws -> (HTTPResponse, String) {
        guard case .head(let head) = try await nextWrite() else { throw ChannelError.inappropriateOperationForState }
        return (head, try await body())
    }

    private func body() async throws -> String {
        var body = ""
        while true {
            let part = try await nextWrite()
            if case .body(let buffer) = part { body += String(buffer: buffer) }
            if case .end = part { return body }
        }
    }

    /// The next response part written, waiting up to 20 seconds for it.
    private func nextWrite() async throws -> HTTPResponsePart {
        try await waitFor { try await self.channel.readOutbound(as: HTTPResponsePart.self) }
    }

    /// The next request part handed on, waiting up to 20 seconds for it.
    func nextHandedOn() async throws -> HTTPRequestPart {
        try await waitFor { try await self.channel.readInbound(as: HTTPRequestPart.self) }
    }

    /// What `poll` gives, asked every 10 ms for up to 20 seconds, running the loop's tasks
    /// before each time (the testing loop runs a task that the loop itself enqueued, as the
    /// store's task is, only when asked to). The channel's own waits never give up, and a test
    /// that waits for what never comes must fail, not hang. (Five seconds were once too few on
    /// a CI machine busy with the whole suite and a Ceph cluster: a bound, not a timing.)
    private func waitFor<T>(_ poll: () async throws -> T?) async throws -> T {
        for _ in 0..<2000 {
            await channel.testingEventLoop.run()
            if let value = try await poll() { return value }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw NothingArrived()
    }

    struct NothingArrived: Error, CustomStringConvertible {
        var description: String { "nothing was written within 20 seconds" }
    }

    /// The bytes of the file spans sent since the last call.
    func sentFiles() async throws -> [[UInt8]] {
        try await channel.testingEventLoop.executeInContext { [recorder] in
            defer { recorder.spans.removeAll() }
            return recorder.spans.map { span in
                var bytes = [UInt8](repeating: 0, count: span.range.count)
                let read = bytes.withUnsafeMutableBytes { pread(span.descriptor, $0.baseAddress, $0.count, off_t(span.range.lowerBound)) }
                return Array(bytes.prefix(max(read, 0)))
            }
        }
    }

    /// The request parts handed on to the responder.
    func handedOn() async throws -> [HTTPRequestPart] {
        var parts: [HTTPRequestPart] = []
        while let part = try await channel.readInbound(as: HTTPRequestPart.self) { parts.append(part) }
        return parts
    }

    /// The responder's answer to a request handed on: its end is what the fast path counts.
    func respond(_ status: HTTPResponse.Status = .ok) async throws {
        try await channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: status)))
        try await channel.writeOutbound(HTTPResponsePart.end(nil))
    }
}

@Test("GETs and HEADs are answered on the connection, refusals too, in request order; the rest reach the responder",
      .timeLimit(.minutes(1)))
func getsAndHeadsAreAnsweredOnTheConnection() async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy, "cors": corsPolicy], now: { now })
    defer { fixture.remove() }
    let store = try await makeGatewayStore(buckets: ["tollgate", "private"])
    for (key, text) in [("docs/a.txt", "hello"), ("secret/s.txt", "classified")] {
        try await put(store, "tollgate", key, text.utf8, metadata: ObjectMetadata(contentType: "text/plain"))
    }
    let credentials = try fixture.writer()
    let fast = try await FastPathChannel(makeGateway(state: fixture.state, store: store, sendsFiles: false))
    let readable = try presignS3(Unsigned(.get, "tollgate", "docs/a.txt"), credentials)

    // Allowed: the object, with what Hummingbird adds to every response.
    try await fast.send(.get, readable)
    let (ok, text) = try #require(try await fast.answer())
    #expect(ok.status == .ok && text == "hello")
    #expect(ok.headerFields[.contentLength] == "5" && ok.headerFields[.contentType] == "text/plain")
    #expect(ok.headerFields[.server] == "tollgate" && ok.headerFields[.date] == httpDate && ok.headerFields[.amzRequestID] != nil)
    #expect(try await fast.handedOn().isEmpty)

    // A range and a met If-None-Match, as the responder answers them.
    let etag = try #require(ok.headerFields[.eTag])
    try await fast.send(.get, readable, [.range: "bytes=1-2"])
    let (partial, slice) = try #require(try await fast.answer())
    #expect(partial.status == .partialContent && slice == "el" && partial.headerFields[.contentRange] == "bytes 1-2/5")
    try await fast.send(.get, readable, [.ifNoneMatch: etag])
    #expect(try await fast.answer()?.0.status == .notModified)

    // HEAD of an object whose row is in memory: GET's headers without the body; a range and a
    // condition as for GET; a refusal without its XML body.
    let headable = try presignS3(Unsigned(.head, "tollgate", "docs/a.txt"), credentials)
    try await fast.send(.head, headable)
    let (headed, headedBody) = try #require(try await fast.answer())
    #expect(headed.status == .ok && headedBody.isEmpty && headed.headerFields[.eTag] == etag)
    #expect(headed.headerFields[.contentLength] == "5" && headed.headerFields[.contentType] == "text/plain")
    try await fast.send(.head, headable, [.range: "bytes=1-2"])
    let (headedPartial, _) = try #require(try await fast.answer())
    #expect(headedPartial.status == .partialContent && headedPartial.headerFields[.contentLength] == "2")
    #expect(headedPartial.headerFields[.contentRange] == "bytes 1-2/5")
    try await fast.send(.head, headable, [.ifNoneMatch: etag])
    #expect(try await fast.answer()?.0.status == .notModified)
    try await fast.send(.head, String(headable.dropLast()) + (headable.hasSuffix("0") ? "1" : "0"))
    let (headRefused, headRefusedBody) = try #require(try await fast.answer())
    #expect(headRefused.status == .forbidden && headRefusedBody.isEmpty && headRefused.headerFields[.contentLength] == "0")
    #expect(try await fast.handedOn().isEmpty)

    // Refused by the policy's Deny, or by its signature: the refusal is rendered here.
    try await fast.send(.get, try presignS3(Unsigned(.get, "tollgate", "secret/s.txt"), credentials))
    let (denied, deniedBody) = try #require(try await fast.answer())
    #expect(denied.status == .forbidden && deniedBody.contains("<Code>AccessDenied</Code>") && !deniedBody.contains("classified"))
    func forged(_ url: String) -> String { String(url.dropLast()) + (url.hasSuffix("0") ? "1" : "0") }
    try await fast.send(.get, forged(readable))
    let (refused, refusedBody) = try #require(try await fast.answer())
    #expect(refused.status == .forbidden && refusedBody.contains("<Code>SignatureDoesNotMatch</Code>"))
    // Refused the same way whether or not the object is in memory: a refusal tells nothing of it.
    try await fast.send(.get, forged(try presignS3(Unsigned(.get, "tollgate", "docs/missing.txt"), credentials)))
    #expect(try await fast.answer()?.0.status == .forbidden)
    #expect(try await fast.handedOn().isEmpty)

    // Not in memory: the store is asked, and its answer is written here, the HEAD's without a body.
    try await fast.send(.get, try presignS3(Unsigned(.get, "tollgate", "docs/missing.txt"), credentials))
    let (missing, missingBody) = try await fast.nextAnswer()
    #expect(missing.status == .notFound && missingBody.contains("<Code>NoSuchKey</Code>") && missing.headerFields[.amzRequestID] != nil)
    try await fast.send(.head, try presignS3(Unsigned(.head, "tollgate", "docs/missing.txt"), credentials))
    let (missingHead, missingHeadBody) = try await fast.nextAnswer()
    #expect(missingHead.status == .notFound && missingHeadBody.isEmpty)
    #expect(try await fast.handedOn().isEmpty)

    // Handed on (a PUT). Until its answer ends, the next GET is handed on too, so that answers
    // keep their requests' order.
    try await fast.send(.put, readable)
    try await fast.send(.get, readable)
    #expect(try await fast.answer() == nil)
    #expect(try await fast.handedOn().count == 4)
    try await fast.respond(.notFound)
    #expect(try await fast.answer()?.0.status == .notFound)
    #expect(try await fast.answer() == nil)
    try await fast.respond()
    _ = try await fast.answer()
    try await fast.send(.get, readable)
    #expect(try await fast.answer()?.1 == "hello")

    // A client that does not read its answers (the connection is not writable): handed on, so
    // that Hummingbird's responder waits for it instead of answers piling up here.
    fast.channel.isWritable = false
    try await fast.send(.get, readable)
    #expect(try await fast.answer() == nil)
    #expect(try await fast.handedOn().count == 2)
    try await fast.channel.writeOutbound(HTTPResponsePart.end(nil))
    _ = try await fast.channel.readOutbound(as: HTTPResponsePart.self)
    fast.channel.isWritable = true

    // A PUT, a GET with a body: handed on.
    for headers: HTTPFields in [[.contentLength: "3"], [.origin: "https://app.example"],
                                [.expect: "100-continue"], [.transferEncoding: "chunked"], [.accept: "*/*", .contentLength: "0", .origin: "https://app.example"]] {
        try await fast.send(.get, readable, headers)
        #expect(try await fast.answer() == nil, "\(headers)")
        #expect(try await fast.handedOn().count == 2)
        try await fast.channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try await fast.channel.readOutbound(as: HTTPResponsePart.self)
    }
    // An empty body announced, and a connection kept alive or not, do not stand in the way
    // (whether the connection stays open after an answer is HTTP1Codec's to decide, for all).
    for headers: HTTPFields in [[.contentLength: "0"], [.connection: "keep-alive"], [.connection: "close"], [.connection: "keep-alive, Close"],
                                [.accept: "*/*", .userAgent: "test"]] {
        try await fast.send(.get, readable, headers)
        #expect(try await fast.answer()?.1 == "hello", "\(headers)")
        #expect(try await fast.handedOn().isEmpty)
    }
    #expect(try await fast.channel.finish().isClean)
}

@Test("GETs of objects on disk are answered on the connection when whole at once (in memory, or one span of cached pages), pipelined ones in order; the rest reach the responder",
      .timeLimit(.minutes(1)))
func getsFromTheStoreAreAnsweredOnTheConnection() async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy], now: { now })
    defer { fixture.remove() }
    // Nothing in memory; ranges up to 1 KiB are read whole, larger bodies go out in 64 KiB spans.
    let store = try await makeLocalGatewayStore(fixture) { $0.readChunkSize = 1024; $0.sendSegmentSize = 64 * 1024; $0.cachedObjects = 0 }
    let photo = (0..<(40 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let objects: [(String, [UInt8])] = [("docs/a.txt", Array("hello".utf8)), ("docs/photo.bin", photo),
                                         ("docs/big.bin", [UInt8](repeating: 7, count: 100 * 1024))]
    for (key, bytes) in objects { try await put(store, "tollgate", key, bytes) }
    let credentials = try fixture.writer()
    let fast = try await FastPathChannel(makeGateway(state: fixture.state, store: store, sendsFiles: true))
    func url(_ method: HTTPRequest.Method, _ key: String) throws -> String { try presignS3(Unsigned(method, "tollgate", key), credentials) }
    func sent() async throws -> [[UInt8]] { try await fast.sentFiles() }

    // A small body is read whole; a larger one goes as a span of the file, for sendfile.
    try await fast.send(.get, try url(.get, "docs/a.txt"))
    let (small, text) = try await fast.nextAnswer()
    #expect(small.status == .ok && text == "hello" && small.headerFields[.contentLength] == "5")
    try await fast.send(.get, try url(.get, "docs/photo.bin"))
    let (whole, inline) = try await fast.nextAnswer()
    #expect(whole.status == .ok && inline.isEmpty && whole.headerFields[.contentLength] == "40960" && whole.headerFields[.amzRequestID] != nil)
    #expect(try await sent() == [photo])
    // A range of it, larger than a chunk, as its span; a HEAD from the store.
    try await fast.send(.get, try url(.get, "docs/photo.bin"), [.range: "bytes=1000-30999"])
    let (partial, _) = try await fast.nextAnswer()
    #expect(partial.status == .partialContent && partial.headerFields[.contentRange] == "bytes 1000-30999/40960")
    #expect(try await sent() == [Array(photo[1000...30999])])
    try await fast.send(.head, try url(.head, "docs/photo.bin"))
    let (head, headBody) = try await fast.nextAnswer()
    #expect(head.status == .ok && headBody.isEmpty && head.headerFields[.contentLength] == "40960")
    #expect(try await fast.handedOn().isEmpty)

    // Pipelined requests that arrive while the store is asked wait, in order, and so does the
    // connection's next read; nothing goes on to the responder.
    let pipelined: [HTTPRequestPart] = try ["docs/photo.bin", "docs/a.txt", "docs/missing"].flatMap { key in
        [FastPathChannel.head(.get, try url(.get, key)), .end(nil)]
    }
    let reads = try await fast.channel.testingEventLoop.executeInContext {
        for part in pipelined { fast.channel.pipeline.fireChannelRead(part) }
        let before = fast.recorder.reads
        fast.channel.pipeline.read()
        return (before, fast.recorder.reads)
    }
    #expect(reads.0 == reads.1, "a read while the store is asked waits")
    let first = try await fast.nextAnswer()
    let second = try await fast.nextAnswer()
    let third = try await fast.nextAnswer()
    #expect(first.0.headerFields[.contentLength] == "40960" && second.1 == "hello" && third.0.status == .notFound)
    #expect(try await sent() == [photo])
    #expect(try await fast.handedOn().isEmpty)
    #expect(try await fast.channel.testingEventLoop.executeInContext { fast.recorder.reads } == reads.0 + 1)

    // Longer than one span: handed on after the store was asked, and the next GET after it.
    try await fast.send(.get, try url(.get, "docs/big.bin"))
    try await fast.send(.get, try url(.get, "docs/a.txt"))
    var parts: [HTTPRequestPart] = []
    while parts.count < 4 { parts.append(try await fast.nextHandedOn()) }
    guard case .head(let bigHead) = parts[0], case .head(let nextHead) = parts[2] else { throw ChannelError.inappropriateOperationForState }
    let (bigURL, nextURL) = (try url(.get, "docs/big.bin"), try url(.get, "docs/a.txt"))
    #expect(bigHead.path == bigURL && nextHead.path == nextURL)
    #expect(try await fast.answer() == nil)
    #expect(try await sent().isEmpty)
    try await fast.respond()
    try await fast.respond()
    #expect(try await fast.answer()?.0.status == .ok)
    #expect(try await fast.answer()?.0.status == .ok)
    #expect(try await fast.channel.finish().isClean)
}

/// A store on disk in `fixture`, configured by `configure`, holding `bytes` at tollgate/`key`;
/// the fast path in front of it, sending files; and alice's presigned GET of the object.
private func fastPathOnDisk(_ fixture: Fixture, _ key: String, _ bytes: [UInt8],
                            _ configure: (inout LocalObjectStore.Configuration) -> Void) async throws -> (LocalObjectStore, FastPathChannel, String) {
    let store = try await makeLocalGatewayStore(fixture, configure)
    try await put(store, "tollgate", key, bytes)
    let fast = try await FastPathChannel(makeGateway(state: fixture.state, store: store, sendsFiles: true))
    return (store, fast, try presignS3(Unsigned(.get, "tollgate", key), try fixture.writer()))
}

extension Fixture {
    /// A token for alice in the writer role.
    func writer() throws -> IssuedCredentials {
        try state.snapshot.tokens.issue(subject: "alice", role: "writer", sessionPolicy: nil, duration: 900, now: now)
    }
}

@Test("a GET of a file the store keeps open, whose pages are cached, is answered at once as a span of it, until a write replaces it",
      .timeLimit(.minutes(1)))
func getsOfOpenFilesAreAnsweredAtOnce() async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy], now: { now })
    defer { fixture.remove() }
    let photo = (0..<(40 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let (store, fast, target) = try await fastPathOnDisk(fixture, "docs/photo.bin", photo) { $0.sendSegmentSize = 64 * 1024 }

    // The first GET asks the store, which reads it (40 KiB: in one job) and keeps its file open.
    try await fast.send(.get, target)
    let (first, firstBody) = try await fast.nextAnswer()
    #expect(first.status == .ok && firstBody == String(decoding: photo, as: UTF8.self))
    // The next ones are answered while they are received: the file's span, or a range of it.
    try await fast.send(.get, target)
    let (second, inline) = try #require(try await fast.answer(), "answered at once")
    #expect(second.status == .ok && inline.isEmpty && second.headerFields[.contentLength] == "40960")
    #expect(try await fast.sentFiles() == [photo])
    try await fast.send(.get, target, [.range: "bytes=100-199"])
    let (ranged, _) = try #require(try await fast.answer(), "answered at once")
    #expect(ranged.status == .partialContent && ranged.headerFields[.contentRange] == "bytes 100-199/40960")
    #expect(try await fast.sentFiles() == [Array(photo[100...199])])
    try await fast.send(.get, target, [.range: "bytes=50000-"])
    let (unsatisfiable, _) = try #require(try await fast.answer(), "refused at once")
    #expect(unsatisfiable.status == .rangeNotSatisfiable)

    // A write replaces it: the next GET serves the new version, never the open old file.
    let replaced = photo.reversed() as [UInt8]
    try await put(store, "tollgate", "docs/photo.bin", replaced)
    try await fast.send(.get, target)
    let (afterWrite, afterBody) = try await fast.nextAnswer()
    #expect(afterWrite.status == .ok && afterBody == String(decoding: replaced, as: UTF8.self))
    #expect(try await fast.sentFiles().isEmpty)
    try await fast.send(.get, target)
    _ = try #require(try await fast.answer(), "answered at once")
    #expect(try await fast.sentFiles() == [replaced])
    #expect(try await fast.handedOn().isEmpty)
    #expect(try await fast.channel.finish().isClean)
}

@Test("a GET of an object longer than one span is handed on to the responder at once, without asking the store, once the store has its row",
      .timeLimit(.minutes(1)))
func getsOfBodiesInPiecesAreHandedOnAtOnce() async throws {
    let fixture = try Fixture(roles: ["writer": writerPolicy], now: { now })
    defer { fixture.remove() }
    let video = (0..<(192 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let (_, fast, target) = try await fastPathOnDisk(fixture, "docs/video.bin", video) {
        $0.sendSegmentSize = 64 * 1024
        $0.readChunkSize = 16 * 1024
    }

    // The first GET asks the store (its row is not at hand yet), then goes on to the responder.
    try await fast.send(.get, target)
    #expect(try await fast.handedOn().isEmpty, "waits for the store's task")
    guard case .head = try await fast.nextHandedOn() else { throw ChannelError.inappropriateOperationForState }
    _ = try await fast.handedOn()
    try await fast.respond()
    _ = try await fast.answer()

    // The next ones go on as they are received: no store task runs in between.
    for _ in 0..<2 {
        try await fast.send(.get, target)
        let parts = try await fast.handedOn()
        #expect(parts.count == 2, "head and end, handed on at once")
        try await fast.respond()
        _ = try await fast.answer()
    }
    // A range within one span is still answered here, as a span of the open file.
    try await fast.send(.get, target, [.range: "bytes=100-199"])
    let (ranged, _) = try #require(try await fast.answer(), "answered at once")
    #expect(ranged.status == .partialContent)
    #expect(try await fast.sentFiles() == [Array(video[100...199])])
    #expect(try await fast.handedOn().isEmpty)
    #expect(try await fast.channel.finish().isClean)
}

@Test("a token's session policy is compiled once, and an invalid one is refused every time")
func sessionPoliciesAreCompiledOnce() throws {
    let role = try Policy.load(text: #"{"Version":"1","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["*"]}]}"#, file: "role")
    let marker = "session-\(UUID().uuidString)"
    let session = #"{"Version":"1","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::"# + marker + #"/*"]}]}"#
    let claims = TokenClaims(keyId: "k", accessKeyId: "STS.A", issuedAt: 0, expiresAt: .max, subject: "u", role: "r",
                             sessionName: "s", sessionPolicy: session)
    #expect(Gateway.sessionPolicies.value(for: try Gateway.SessionPolicyKey(session)) == nil)
    let first = try Gateway.effectivePolicy(claims, policies: ["r": role])
    #expect(Gateway.sessionPolicies.value(for: try Gateway.SessionPolicyKey(session)) != nil, "compiled and kept, under its digest")
    let second = try Gateway.effectivePolicy(claims, policies: ["r": role])
    #expect(first.session?.statementReferences.count == 1 && second.session?.statementReferences.count == 1)
    var invalid = claims
    invalid.sessionPolicy = "{not json"
    for _ in 0..<2 {
        #expect(throws: GatewayError.self) { try Gateway.effectivePolicy(invalid, policies: ["r": role]) }
    }
    #expect(Gateway.sessionPolicies.value(for: try Gateway.SessionPolicyKey("{not json")) == nil, "a failure is not cached")
}
