import Foundation
import NIOCore
import Testing
import TollgateCrypto
import TollgateSignature
@testable import TollgateS3Store
@testable import TollgateStore

/// The S3 store's uploads in signed chunks: exactly the bytes announced, each chunk's payload
/// signed after the one before (the scheme RGW and S3 check), the final chunk only after the
/// source ended, and never when the source fails or has another length.
@Suite struct SignedChunksTests {
    static let signer = S3RequestSigner(accessKeyId: "AKID", secret: "secret", region: "us-east-1")

    func encode(_ bytes: [UInt8], pieces: Int = 7, length: Int64? = nil) async throws -> [UInt8] {
        let step = Swift.max(1, bytes.count / pieces)
        let parts = stride(from: 0, to: bytes.count, by: step).map { Array(bytes[$0..<Swift.min($0 + step, bytes.count)]) }
        let body = UploadBody(Chunks(parts), length: length ?? Int64(bytes.count))
        let chunks = SignedChunks(base: body, length: length ?? Int64(bytes.count),
                                  signer: try Self.signer.chunkSigner(timestamp: "20261128T000000Z", seedSignature: String(repeating: "0", count: 64)))
        var out: [UInt8] = []
        for try await chunk in chunks { out += chunk.readableBytesView }
        return out
    }

    @Test(arguments: [0, 1, 4096, SignedChunks.chunkSize, SignedChunks.chunkSize + 1, 3 * SignedChunks.chunkSize + 12345])
    func chunksCarryTheBodyAndAreSignedInAChain(size: Int) async throws {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let encoded = try await encode(bytes)
        #expect(Int64(encoded.count) == SignedChunks.encodedLength(Int64(size)))
        // Parse them back, checking each signature against the chain.
        var signer = try Self.signer.chunkSigner(timestamp: "20261128T000000Z", seedSignature: String(repeating: "0", count: 64))
        var payload: [UInt8] = []
        var rest = encoded[...]
        var sizes: [Int] = []
        while true {
            let line = rest.firstIndex(of: UInt8(ascii: "\r"))!
            let header = String(decoding: rest[rest.startIndex..<line], as: UTF8.self)
            let fields = header.split(separator: ";")
            let length = Int(fields[0], radix: 16)!
            let signature = String(fields[1].dropFirst("chunk-signature=".count))
            rest = rest[(line + 2)...]
            let data = Array(rest.prefix(length))
            #expect(signature == (try signer.sign(payloadSHA256: try Crypto.sha256(data))))
            payload += data
            sizes.append(length)
            rest = rest.dropFirst(length + 2)
            if length == 0 { break }
        }
        #expect(rest.isEmpty && payload == bytes)
        #expect(sizes.dropLast().allSatisfy { $0 > 0 } && sizes.last == 0)
        #expect(sizes.dropLast(2).allSatisfy { $0 == SignedChunks.chunkSize })
    }

    @Test func aBodyOfAnotherLengthOrThatFailsNeverGetsItsFinalChunk() async throws {
        let bytes = [UInt8](repeating: 7, count: 1000)
        await #expect(throws: UploadBody.SourceFailed.self) { _ = try await encode(bytes, length: 1001) }
        await #expect(throws: UploadBody.SourceFailed.self) { _ = try await encode(bytes, length: 999) }
        // A source that fails at its end (a checksum that does not match): the chunks before went,
        // the final one never does.
        let failing = UploadBody(FailingBody(chunk: Array(repeating: 1, count: 500), good: 2), length: 1000)
        let chunks = SignedChunks(base: failing, length: 1000,
                                  signer: try Self.signer.chunkSigner(timestamp: "20261128T000000Z", seedSignature: String(repeating: "0", count: 64)))
        var sent: [ByteBuffer] = []
        await #expect(throws: UploadBody.SourceFailed.self) { for try await chunk in chunks { sent.append(chunk) } }
        #expect(!sent.contains { $0.readableBytesView.starts(with: Array("0;".utf8)) })
    }
}

/// A streamed upload that carries the client's `Content-MD5` goes as it is (`UNSIGNED-PAYLOAD`):
/// the backend checks every byte against that MD5, so signing each chunk's SHA-256 as well would
/// cost CPU on both sides and check nothing more. Without one it goes in signed chunks.
@Suite struct UploadSigningTests {
    static let size = 256 * 1024  // above `UploadBody.smallBody`: streamed, not gathered
    static let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    static func stating(_ md5: [UInt8]?) -> WriteOptions {
        WriteOptions(contentLength: Int64(size), expectedMD5: md5)
    }

    @Test func aBodyWithTheClientsMD5GoesUnsignedAndOneWithoutInSignedChunks() async throws {
        let backend = try await CountingBackend.start(bodySize: 0)
        let store = try S3ObjectStore(configuration: S3StoreConfiguration(
            endpoint: "http://127.0.0.1:\(backend.port)", accessKeyID: "TESTKEY", secretAccessKey: "test-secret"
        ))
        let md5 = try Crypto.md5(Self.bytes)
        _ = try await store.putObject(bucket: "bucket", key: "plain", body: Chunks(Self.bytes), metadata: ObjectMetadata(), options: Self.stating(nil))
        _ = try await store.putObject(bucket: "bucket", key: "stated", body: Chunks(Self.bytes), metadata: ObjectMetadata(), options: Self.stating(md5))
        try await store.close()
        try await backend.stop()

        let heads = Dictionary(backend.requests.map { (String($0.uri.prefix { $0 != "?" }), $0.headers) }, uniquingKeysWith: { first, _ in first })
        let plain = try #require(heads["/bucket/plain"])
        #expect(plain["x-amz-content-sha256"] == ["STREAMING-AWS4-HMAC-SHA256-PAYLOAD"])
        #expect(plain["content-encoding"] == ["aws-chunked"])
        #expect(plain["x-amz-decoded-content-length"] == [String(Self.size)])
        let stated = try #require(heads["/bucket/stated"])
        #expect(stated["x-amz-content-sha256"] == ["UNSIGNED-PAYLOAD"])
        #expect(stated["content-md5"] == [Base64.encode(md5)])
        #expect(stated["content-encoding"].isEmpty && stated["x-amz-decoded-content-length"].isEmpty)
        #expect(stated["content-length"] == [String(Self.size)])
        // The MD5 is signed: nobody between the gateway and the backend can swap it.
        #expect(stated["authorization"].first?.contains("content-md5") == true)
    }

    /// Against the real backend: a streamed body whose MD5 is not the one stated is refused
    /// (`badDigest`) and nothing is stored, for an object and for a part; the right one is stored.
    @Test(.enabled(if: S3TestBackend.current != nil))
    func theBackendRefusesAStreamedBodyWithAnotherMD5() async throws {
        let store = try S3TestBackend.current!.store()
        try await store.createBucket("digests")
        let wrong = try Crypto.md5(Self.bytes + [0])
        #expect(await storeError {
            _ = try await store.putObject(bucket: "digests", key: "k", body: Chunks(Self.bytes), metadata: ObjectMetadata(), options: Self.stating(wrong))
        } == .badDigest)
        #expect(await storeError { _ = try await store.headObject(bucket: "digests", key: "k") } == .noSuchKey(bucket: "digests", key: "k"))
        let upload = try await store.createMultipartUpload(bucket: "digests", key: "m", metadata: ObjectMetadata())
        #expect(await storeError {
            _ = try await store.uploadPart(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumber: 1,
                                           body: Chunks(Self.bytes), options: Self.stating(wrong))
        } == .badDigest)
        #expect(try await store.listParts(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumberMarker: 0, maxParts: 1000).parts.isEmpty)

        let right = try Crypto.md5(Self.bytes)
        let stored = try await store.putObject(bucket: "digests", key: "k", body: Chunks(Self.bytes), metadata: ObjectMetadata(), options: Self.stating(right))
        #expect(try stored.etag == quotedMD5(Self.bytes))
        #expect(try await collect(store.getObject(bucket: "digests", key: "k", range: nil).body) == Self.bytes)
        let part = try await store.uploadPart(bucket: "digests", key: "m", uploadID: upload.uploadID, partNumber: 1,
                                              body: Chunks(Self.bytes), options: Self.stating(right))
        #expect(try part.etag == quotedMD5(Self.bytes))
        try await store.abortMultipartUpload(bucket: "digests", key: "m", uploadID: upload.uploadID)
        try await store.close()
    }
}
