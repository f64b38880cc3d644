import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import TollgateCrypto
import TollgateDates
@testable import TollgateGateway
import TollgateStore
@testable import TollgateServer
@testable import TollgateTokenService

/// The gateway's refusals that need no signature: they must still answer in the caller's
/// dialect, with a request id, and store nothing.
private func withGateway(_ body: @Sendable (any TestClientProtocol, any ObjectStore) async throws -> Void) async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    let store = try await makeGatewayStore(buckets: ["tollgate"])
    let app = Application(responder: buildGatewayResponder(state: fixture.state, store: store))
    try await app.test(.router) { client in try await body(client, store) }
}

@Test func anonymousRequestsAreDeniedInS3XML() async throws {
    try await withGateway { client, store in
        try await client.execute(uri: "/tollgate/x.txt", method: .put, body: ByteBuffer(string: "data")) { response in
            #expect(response.status == .forbidden)
            let body = String(buffer: response.body)
            #expect(body.contains("<Code>AccessDenied</Code>"))
            #expect(body.contains("<Resource>/tollgate/x.txt</Resource>"))
            #expect(body.contains("<RequestId>"))
            #expect(response.headers[.amzRequestID] != nil)
        }
        await #expect(throws: StoreError.self) { try await store.headObject(bucket: "tollgate", key: "x.txt") }
    }
}

@Test func ossRequestsGetOSSErrors() async throws {
    try await withGateway { client, _ in
        try await client.execute(uri: "/tollgate/x.txt", method: .get, headers: [.authorization: "OSS STS.unknown:c2lnbmF0dXJl", .date: WireDate.httpDate(Date())]) { response in
            #expect(response.status == .forbidden)
            #expect(response.headers[.ossRequestID] != nil)
            let body = String(buffer: response.body)
            #expect(body.contains("<Code>InvalidSecurityToken</Code>") || body.contains("<Code>InvalidAccessKeyId</Code>"), "\(body)")
            #expect(!body.contains("<Resource>"))
        }
    }
}

@Test func unknownSchemesAreRefusedClearly() async throws {
    try await withGateway { client, _ in
        try await client.execute(uri: "/tollgate/x.txt", method: .get, headers: [.authorization: "Bearer c2ln"]) { response in
            #expect(response.status == .badRequest)
            #expect(String(buffer: response.body).contains("<Code>InvalidRequest</Code>"))
        }
        // SigV2 is verified: an undated, unknown key is refused in S3 XML.
        try await client.execute(uri: "/tollgate/x.txt", method: .get, headers: [.authorization: "AWS AKID:c2ln"]) { response in
            #expect(response.status == .forbidden)
            #expect(String(buffer: response.body).contains("<Code>AccessDenied</Code>"))
        }
    }
}

@Test func unsupportedSubresourceIsNotImplemented() async throws {
    try await withGateway { client, _ in
        try await client.execute(uri: "/tollgate?acl", method: .put) { response in
            #expect(response.status == .notImplemented)
            #expect(String(buffer: response.body).contains("<Code>NotImplemented</Code>"))
        }
    }
}

@Test func headErrorsHaveNoBody() async throws {
    try await withGateway { client, _ in
        try await client.execute(uri: "/tollgate/x.txt", method: .head) { response in
            #expect(response.status == .forbidden)
            #expect(response.body.readableBytes == 0)
        }
    }
}

@Test("a full disk is 507 XMinioStorageFull in both dialects, not a retryable 500", arguments: [Dialect.s3, .oss])
func storageFullRendersInTheCallersDialect(dialect: Dialect) {
    let error = Gateway.gatewayError(StoreError.storageFull("write: No space left on device"), dialect: dialect, bucket: "b", key: "k")
    #expect(error.status.code == 507)
    #expect(error.code == "XMinioStorageFull")
    #expect(!error.message.contains("No space"), "the file system's detail is for the log, not the client")
    let response = error.response(dialect: dialect, requestID: "r1", resource: "/b/k", isHead: false)
    #expect(response.status.code == 507)
    #expect(response.headers[dialect == .s3 ? .amzRequestID : .ossRequestID] == "r1")
}

/// With an AnonymousPolicyFile, unsigned requests are decided by it, whatever the operation: a
/// public-read prefix is read, and nothing else is (no write, no multi-delete, no other key).
@Test func anAnonymousPolicyDecidesUnsignedRequests() async throws {
    let publicRead = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::tollgate/public/*","arn:aws:s3:::tollgate"],"Condition":{"StringLikeIfExists":{"s3:prefix":"public/*"}}}]}"#
    let fixture = try Fixture(roles: ["public": publicRead], extraConfig: #", "AnonymousPolicyFile": "policy/public.json""#)
    defer { fixture.remove() }
    let store = try await makeGatewayStore(buckets: ["tollgate"])
    try await put(store, "tollgate", "public/hello.txt", Array("hello".utf8))
    try await put(store, "tollgate", "private/secret.txt", Array("secret".utf8))
    let app = Application(responder: buildGatewayResponder(state: fixture.state, store: store))
    try await app.test(.router) { client in
        try await client.execute(uri: "/tollgate/public/hello.txt", method: .get) { response in
            #expect(response.status == .ok && String(buffer: response.body) == "hello")
        }
        try await client.execute(uri: "/tollgate?list-type=2&prefix=public/", method: .get) { response in
            #expect(response.status == .ok && String(buffer: response.body).contains("<Key>public/hello.txt</Key>"))
        }
        for (uri, method) in [("/tollgate/private/secret.txt", HTTPRequest.Method.get), ("/tollgate?list-type=2&prefix=private/", .get),
                              ("/tollgate?list-type=2", .get), ("/tollgate/public/hello.txt", .put), ("/tollgate/public/hello.txt", .delete), ("/", .get)] {
            try await client.execute(uri: uri, method: method, body: method == .put ? ByteBuffer(string: "x") : nil) { response in
                #expect(response.status == .forbidden, "\(method) \(uri)")
            }
        }
        let delete = "<Delete><Object><Key>public/hello.txt</Key></Object><Object><Key>private/secret.txt</Key></Object></Delete>"
        try await client.execute(uri: "/tollgate?delete", method: .post, headers: [.contentMD5: Base64.encode(try Crypto.md5(Array(delete.utf8)))],
                                 body: ByteBuffer(string: delete)) { response in
            #expect(String(buffer: response.body).contains("AccessDenied") || response.status == .forbidden)
        }
    }
    #expect(try await store.headObject(bucket: "tollgate", key: "public/hello.txt").size == 5)
    #expect(try await store.headObject(bucket: "tollgate", key: "private/secret.txt").size == 6)
}
