import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Testing
@testable import TollgateServer

/// `HTTP1Codec` makes the very request NIO's codec makes of every target: origin form taken as
/// it stands, anything else through NIO's conversion.
@Test(arguments: [
    "/", "/bucket/key", "/bucket/key?X-Amz-Signature=abc&X-Amz-Credential=A%2F20261124%2Fus-east-1%2Fs3%2Faws4_request",
    "//bucket//key", "/a%20b/%zz?x=%", "/?acl", "/path#fragment", "/a:b/c?d=e:f",
    "http://example.com/bucket/key?x=1", "http://example.com", "https://example.com:9000/b?uploads", "*", "bucket/key",
])
func theCodecMakesTheRequestNIOsCodecMakes(target: String) throws {
    var headers = HTTPHeaders([("Host", "gateway.example:9000"), ("X-Amz-Date", "20261124T000000Z"), ("Cookie", "a=1; b=2")])
    headers.add(name: "x-amz-meta-twice", value: "1")
    headers.add(name: "X-Amz-Meta-Twice", value: "2")
    for method in [HTTPMethod.GET, .PUT, .HEAD, .RAW(value: "PROPFIND")] {
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)
        let ours = try HTTP1Codec.request(head)
        let nio = try HTTPRequest(head, secure: false, splitCookie: false)
        #expect(ours == nio, "\(method) \(target)")
    }
}

/// Both listeners' connections convert HTTP/1 with `HTTP1Codec`, and NIO's codec is gone.
@Test func connectionsUseTheGatewaysCodec() async throws {
    let router = Router(context: TollgateRequestContext.self)
    router.get("/codec") { _, context in
        let channel = context.channel
        return try await channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            let ours = (try? pipeline.handler(type: HTTP1Codec.self)) != nil
            let nio = (try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self)) != nil
            return "\(ours) \(nio)"
        }.get()
    }
    let app = Application(router: router, server: try pinnedHTTPServer(.init(), certificates: nil))
    try await app.test(.live) { client in
        try await client.execute(uri: "/codec?x=1", method: .get) { response in
            #expect(String(buffer: response.body) == "true false")
        }
    }
}
