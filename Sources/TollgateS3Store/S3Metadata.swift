import Foundation
import NIOHTTP1
import TollgateCrypto
import TollgateDates
import TollgateSignature
import TollgateStore

/// How an object's metadata travels to and from the backend. Standard headers and user metadata
/// go as themselves where S3 keeps them exactly; what the backend cannot hold natively goes in
/// reserved `x-amz-meta-tg-*` names that the gateway never shows clients and that a copy carries
/// along: the S3 additional checksum, the CRC-64, the range of an appended object the CRC-64
/// covers, a multipart upload's checksum algorithm, whether a type was given at all, and the
/// user metadata that S3 would not return exactly (names with upper case or odd characters,
/// values that are not plain ASCII, names that start with `tg-`), as JSON.
enum S3Metadata {
    static let userPrefix = "x-amz-meta-"
    /// Reserved names, after `x-amz-meta-`.
    static let reservedPrefix = "tg-"
    static let checksumName = "tg-cks"
    static let crc64Name = "tg-crc64"
    static let crc64LengthName = "tg-crc64-len"
    static let uploadChecksumName = "tg-upck"
    static let userJSONName = "tg-md"
    static let noTypeName = "tg-noct"
    /// The object's Content-Encoding: RGW keeps `aws-chunked` as the encoding of an object
    /// uploaded in signed chunks, so the real one rides here too.
    static let encodingName = "tg-ce"

    /// What the headers of a write carry: the metadata, and the reserved values.
    struct Reserved: Sendable, Equatable {
        var checksums = ObjectChecksums.none
        /// For an appended object: the bytes the CRC-64 covers (the object's size when it is current).
        var crc64Length: Int64?
        var uploadChecksum: UploadChecksum?
    }

    /// The headers that store `metadata` (tags excluded) and `reserved` with a write.
    static func headers(_ metadata: ObjectMetadata, _ reserved: Reserved) -> [(String, String)] {
        var headers: [(String, String)] = []
        if let value = metadata.contentType {
            headers.append(("content-type", value))
        } else {
            // S3 would give it one: the gateway answers with the dialect's default instead.
            headers.append((userPrefix + noTypeName, "1"))
        }
        if let value = metadata.contentEncoding {
            headers.append(("content-encoding", value))
            headers.append((userPrefix + encodingName, value))
        }
        if let value = metadata.contentDisposition { headers.append(("content-disposition", value)) }
        if let value = metadata.cacheControl { headers.append(("cache-control", value)) }
        if let value = metadata.expires { headers.append(("expires", value)) }
        if let value = metadata.contentLanguage { headers.append(("content-language", value)) }
        var inexact: [String: String] = [:]
        for (name, value) in metadata.userMetadata {
            if isNative(name: name, value: value) {
                headers.append((userPrefix + name, value))
            } else {
                inexact[name] = value
            }
        }
        if !inexact.isEmpty, let json = try? JSONEncoder().encode(inexact) {
            headers.append((userPrefix + userJSONName, Base64.encodeURL(Array(json))))
        }
        headers += reservedHeaders(reserved)
        return headers
    }

    static func reservedHeaders(_ reserved: Reserved) -> [(String, String)] {
        var headers: [(String, String)] = []
        if let additional = reserved.checksums.additional {
            var value = additional.algorithm.rawValue + ":" + Base64.encodeURL(additional.digest)
            if let count = additional.partCount { value += ":\(count)" }
            headers.append((userPrefix + checksumName, value))
        }
        if let crc = reserved.checksums.crc64ecma {
            headers.append((userPrefix + crc64Name, String(crc)))
            if let length = reserved.crc64Length { headers.append((userPrefix + crc64LengthName, String(length))) }
        }
        if let upload = reserved.uploadChecksum {
            headers.append((userPrefix + uploadChecksumName, upload.algorithm.rawValue + ":" + (upload.fullObject ? "full" : "composite")))
        }
        return headers
    }

    /// Stored as itself: a lower-case token name outside the reserved space, a printable ASCII
    /// value without spaces at its ends (what an HTTP header keeps exactly).
    static func isNative(name: String, value: String) -> Bool {
        guard !name.isEmpty, !name.hasPrefix(reservedPrefix) else { return false }
        for c in name.utf8 {
            switch c {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                continue
            default:
                return false
            }
        }
        guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return false }
        if let first = value.utf8.first, first == UInt8(ascii: " ") { return false }
        if let last = value.utf8.last, last == UInt8(ascii: " ") { return false }
        return true
    }

    /// What the gateway reads from an answer's headers (HEAD, GET) in one pass over them: each name is
    /// compared without case, and the first of repeated headers counts.
    struct Wire {
        var metadata = ObjectMetadata()
        var reserved = Reserved()
        var etag: String?
        var lastModified: String?
        var objectType: String?
        var tagCount: String?

        init(_ headers: HTTPHeaders) {
            var noType = false
            var encoding: String?
            var nativeType: String?
            var nativeEncoding: String?
            var crc: UInt64?
            for header in headers {
                let name = header.name.lowercased()
                let value = header.value
                guard name.hasPrefix(userPrefix) else {
                    switch name {
                    case "content-type": nativeType = nativeType ?? value
                    case "content-encoding": nativeEncoding = nativeEncoding ?? value
                    case "content-disposition": metadata.contentDisposition = metadata.contentDisposition ?? value
                    case "cache-control": metadata.cacheControl = metadata.cacheControl ?? value
                    case "expires": metadata.expires = metadata.expires ?? value
                    case "content-language": metadata.contentLanguage = metadata.contentLanguage ?? value
                    case "etag": etag = etag ?? value
                    case "last-modified": lastModified = lastModified ?? value
                    case "x-rgw-object-type": objectType = objectType ?? value
                    case "x-amz-tagging-count": tagCount = tagCount ?? value
                    default: break
                    }
                    continue
                }
                let short = String(name.dropFirst(userPrefix.count))
                guard short.hasPrefix(reservedPrefix) else {
                    metadata.userMetadata[short] = value
                    continue
                }
                switch short {
                case noTypeName:
                    noType = true
                case encodingName:
                    encoding = value
                case userJSONName:
                    if let bytes = Base64.decode(value), let map = try? JSONDecoder().decode([String: String].self, from: Data(bytes)) {
                        metadata.userMetadata.merge(map) { _, given in given }
                    }
                case checksumName:
                    reserved.checksums.additional = parseChecksum(value)
                case crc64Name:
                    crc = UInt64(value)
                case crc64LengthName:
                    reserved.crc64Length = Int64(value)
                case uploadChecksumName:
                    let parts = value.split(separator: ":")
                    if parts.count == 2, let algorithm = ChecksumAlgorithm(rawValue: String(parts[0])) {
                        reserved.uploadChecksum = UploadChecksum(algorithm: algorithm, fullObject: parts[1] == "full")
                    }
                default:
                    continue
                }
            }
            reserved.checksums.crc64ecma = crc
            if !noType { metadata.contentType = nativeType }
            metadata.contentEncoding = encoding ?? nativeEncoding.flatMap { native in
                // What an upload in signed chunks leaves behind is the transfer's, not the object's.
                let rest = native.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0 != "aws-chunked" && !$0.isEmpty }
                return rest.isEmpty ? nil : rest.joined(separator: ",")
            }
        }
    }

    static func parseChecksum(_ value: String) -> AdditionalChecksum? {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, let algorithm = ChecksumAlgorithm(rawValue: String(parts[0])),
              let digest = Base64.decode(parts[1]), digest.count == algorithm.digestSize else { return nil }
        let count = parts.count == 3 ? Int(parts[2]) : nil
        if parts.count == 3, count == nil { return nil }
        return AdditionalChecksum(algorithm: algorithm, digest: digest, partCount: count)
    }

    /// The object an answer to HEAD or GET describes.
    static func info(bucket: String, key: String, headers: HTTPHeaders, size: Int64) -> ObjectInfo {
        let wire = Wire(headers)
        var checksums = wire.reserved.checksums
        // An appended object's CRC-64 is its own only when it covers all of it.
        if let covered = wire.reserved.crc64Length, covered != size { checksums.crc64ecma = nil }
        let modified = wire.lastModified.flatMap(WireDate.parseHTTPDate) ?? Date(timeIntervalSince1970: 0)
        let appendable = wire.objectType?.lowercased() == "appendable"
        let tagCount = wire.tagCount.flatMap { Int($0) } ?? 0
        return ObjectInfo(bucket: bucket, key: key, size: size, etag: quoted(wire.etag ?? ""), lastModified: modified,
                          metadata: wire.metadata, isAppendable: appendable, checksums: checksums, tagCount: tagCount)
    }

    /// An ETag as the gateway sends it: in quotes.
    static func quoted(_ etag: String) -> String {
        let bare = ETag.normalize(etag)
        return "\"" + bare + "\""
    }

    /// `x-amz-tagging`'s value: `k=v&…`, URL-encoded.
    static func tagging(_ tags: [String: String]) -> String {
        tags.sorted { $0.key < $1.key }.map { PercentEncoding.encode($0.key) + "=" + PercentEncoding.encode($0.value) }.joined(separator: "&")
    }
}
