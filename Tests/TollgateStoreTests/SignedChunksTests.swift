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
