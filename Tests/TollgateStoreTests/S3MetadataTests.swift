import Foundation
import NIOHTTP1
import Testing
import TollgateCrypto
@testable import TollgateS3Store
import TollgateStore

/// How an object's metadata goes to the backend in headers and comes back from its answers,
/// without a backend: the conformance suite over RGW covers the same through a real one.
@Suite struct S3MetadataTests {
    /// The backend's answer to a write of `metadata`: the stored headers, their names in the case
    /// `rename` gives, among the headers any answer has.
    static func answer(_ metadata: ObjectMetadata, _ reserved: S3Metadata.Reserved, rename: (String) -> String = { $0 },
                       extra: [(String, String)] = []) -> HTTPHeaders {
        var headers = HTTPHeaders([("Content-Length", "5"), ("Date", "Mon, 30 Nov 2026 03:00:00 GMT")])
        for (name, value) in S3Metadata.headers(metadata, reserved) { headers.add(name: rename(name), value: value) }
        for (name, value) in extra { headers.add(name: name, value: value) }
        return headers
    }

    static let full = ObjectMetadata(
        contentType: "image/png", contentEncoding: "gzip", contentDisposition: "attachment; filename=\"a.png\"", cacheControl: "no-cache",
        expires: "Thu, 01 Jan 2027 00:00:00 GMT", contentLanguage: "de",
        userMetadata: ["plain": "value", "Upper": "kept", "tg-mine": "reserved-looking", "spaced": " edge ", "utf8": "grüße"]
    )
    static let reserved = S3Metadata.Reserved(
        checksums: ObjectChecksums(additional: AdditionalChecksum(algorithm: .crc32c, digest: [1, 2, 3, 4], partCount: 3), crc64ecma: 42),
        crc64Length: 5, uploadChecksum: UploadChecksum(algorithm: .crc64nvme, fullObject: true)
    )

    @Test("metadata comes back exactly, whatever case the backend gives the names in", arguments: ["as sent", "upper", "title"])
    func roundTrip(naming: String) {
        let rename: (String) -> String = switch naming {
        case "upper": { $0.uppercased() }
        case "title": { $0.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "-") }
        default: { $0 }
        }
        let wire = S3Metadata.Wire(Self.answer(Self.full, Self.reserved, rename: rename))
        #expect(wire.metadata == Self.full)
        #expect(wire.reserved == Self.reserved)
    }

    @Test func noTypeAndNoEncodingStayAbsent() {
        let wire = S3Metadata.Wire(Self.answer(ObjectMetadata(), S3Metadata.Reserved(), extra: [
            // What S3 adds to an object stored without a type, and RGW keeps of a chunked upload.
            ("Content-Type", "binary/octet-stream"), ("Content-Encoding", "aws-chunked"),
        ]))
        #expect(wire.metadata == ObjectMetadata())
        #expect(wire.reserved == S3Metadata.Reserved())
    }

    @Test func aChunkedUploadsEncodingIsDroppedFromTheNativeOne() {
        let headers = HTTPHeaders([("content-encoding", "aws-chunked, br")])
        #expect(S3Metadata.Wire(headers).metadata.contentEncoding == "br")
    }

    @Test func theFirstOfRepeatedHeadersCounts() {
        let headers = HTTPHeaders([
            ("Cache-Control", "first"), ("cache-control", "second"), ("ETag", "\"a\""), ("etag", "\"b\""),
            ("Content-Type", "text/plain"), ("content-type", "text/html"),
        ])
        let wire = S3Metadata.Wire(headers)
        #expect(wire.metadata.cacheControl == "first" && wire.metadata.contentType == "text/plain" && wire.etag == "\"a\"")
    }

    @Test func infoReadsTheObjectsOwnHeaders() {
        let headers = Self.answer(Self.full, Self.reserved, extra: [
            ("ETag", "  W/\"ABC\" "), ("Last-Modified", "Mon, 30 Nov 2026 03:00:00 GMT"), ("X-RGW-Object-Type", "Appendable"),
            ("x-amz-tagging-count", "2"),
        ])
        let info = S3Metadata.info(bucket: "b", key: "k", headers: headers, size: 5)
        #expect(info.etag == "\"abc\"")
        #expect(info.lastModified == Date(timeIntervalSince1970: 1_796_007_600))
        #expect(info.isAppendable && info.tagCount == 2 && info.metadata == Self.full)
        #expect(info.checksums == Self.reserved.checksums)
        // The CRC-64 of an appended object that has grown since is not its own.
        #expect(S3Metadata.info(bucket: "b", key: "k", headers: headers, size: 9).checksums.crc64ecma == nil)
        let bare = S3Metadata.info(bucket: "b", key: "k", headers: HTTPHeaders(), size: 0)
        #expect(!bare.isAppendable && bare.tagCount == 0 && bare.lastModified == Date(timeIntervalSince1970: 0) && bare.etag == "\"\"")
    }
}
