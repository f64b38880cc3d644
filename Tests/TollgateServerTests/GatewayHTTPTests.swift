import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
import TollgateDates
import TollgateStore
@testable import TollgateServer

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
