import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TollgateConfig
import TollgateDates
import TollgateHTTP
import TollgateSignature
import TollgateXML

/// Bucket administration through a running gateway, as an S3 client signed with the root
/// credentials (what `tollgate bucket` uses).
///
/// The CLI does not open the store itself: opening it runs crash recovery, which would delete
/// a running server's in-flight upload files, and the server's object cache assumes it is the
/// only writer. Going through the gateway keeps one writer, and a change is visible to every
/// client at once.
public struct GatewayClient: Sendable {
    /// `http(s)://HOST:PORT`, without a trailing slash.
    public let endpoint: String
    public let root: RootCredentials
    let region = "us-east-1"

    public init(endpoint: String, root: RootCredentials) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.root = root
    }

    /// The gateway as this machine reaches it (see `LocalHTTP.baseURL`).
    public static func endpoint(for config: TollgateConfig) -> String {
        LocalHTTP.baseURL(address: config.gatewayAddress, port: config.gatewayPort, tls: config.gatewayTLS != nil)
    }

    public struct Bucket: Sendable, Equatable {
        public var name: String
        /// As the gateway lists it, ISO 8601.
        public var creationDate: String
    }

    /// Why a call failed: the gateway's S3 error, or no answer at all.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// The S3 error code (`BucketNotEmpty`, `InvalidBucketName`, …); nil when the gateway
        /// did not answer or answered something else.
        public var code: String?
        public var message: String
        public var description: String { code.map { "\($0): \(message)" } ?? message }

        public init(code: String?, message: String) {
            self.code = code
            self.message = message
        }
    }

    public func listBuckets() async throws(Failure) -> [Bucket] {
        let body = try await send(.GET, path: "/")
        let document: TollgateXML.XMLDocument
        do { document = try XMLReader.parse(body, limits: XMLLimits(maxBytes: 16 * 1024 * 1024, maxDepth: 8, maxElements: 1_000_000)) } catch {
            throw Failure(code: nil, message: "the gateway's ListBuckets answer is not XML (\(error))")
        }
        guard let list = document.child(of: document.root, named: "Buckets") else { return [] }
        return document.children(of: list, named: "Bucket").map { entry in
            Bucket(name: document.child(of: entry, named: "Name")?.text ?? "",
                   creationDate: document.child(of: entry, named: "CreationDate")?.text ?? "")
        }
    }

    public func createBucket(_ name: String) async throws(Failure) {
        _ = try await send(.PUT, path: "/" + name)
    }

    public func deleteBucket(_ name: String) async throws(Failure) {
        _ = try await send(.DELETE, path: "/" + name)
    }

    /// One signed request without a body; returns the response body of a 2xx answer.
    func send(_ method: HTTPMethod, path: String, now: Date = Date()) async throws(Failure) -> [UInt8] {
        guard let schemeEnd = endpoint.range(of: "://"), !endpoint[schemeEnd.upperBound...].isEmpty else {
            throw Failure(code: nil, message: "invalid gateway endpoint \(endpoint): expected http(s)://HOST:PORT")
        }
        let authority = String(endpoint[schemeEnd.upperBound...])
        let timestamp = WireDate.iso8601Basic(now)
        let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        let signed: SignatureHeaders = ["host": authority, "x-amz-date": timestamp, "x-amz-content-sha256": emptySHA256]
        var request = HTTPClientRequest(url: endpoint + path)
        request.method = method
        do {
            let authorization = try S3SigV4.authorization(
                method: method.rawValue, rawPath: path, rawQuery: "", headers: signed, payloadHash: emptySHA256,
                accessKeyId: root.accessKeyID, secret: root.accessKeySecret, region: region, timestamp: timestamp
            )
            for field in signed.fields { request.headers.add(name: field.name, value: field.value) }
            request.headers.add(name: "Authorization", value: authorization)
        } catch {
            throw Failure(code: nil, message: "cannot sign the request: \(error)")
        }
        let status: UInt
        let body: [UInt8]
        do {
            (status, body) = try await LocalHTTP.withClient(for: endpoint) { client in
                let response = try await client.execute(request, timeout: .seconds(30))
                return (response.status.code, Array(buffer: try await response.body.collect(upTo: 16 * 1024 * 1024)))
            }
        } catch {
            throw Failure(code: nil, message: "no gateway answers at \(endpoint) (is `tollgate serve` running? \(error))")
        }
        guard (200..<300).contains(status) else {
            let document = try? XMLReader.parse(body, limits: XMLLimits(maxBytes: 64 * 1024, maxDepth: 4, maxElements: 64))
            let code = document.flatMap { $0.child(of: $0.root, named: "Code")?.text }
            let message = document.flatMap { $0.child(of: $0.root, named: "Message")?.text }
            throw Failure(code: code, message: message ?? "the gateway answered HTTP \(status)")
        }
        return body
    }
}
