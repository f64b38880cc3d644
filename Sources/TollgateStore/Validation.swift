import Foundation
import TollgateCrypto

/// Name rules. Keys never become file names, so these rules are about S3 compatibility, not
/// about path safety: the storage layout is safe by construction.
public enum StoreNames {
    /// S3 bucket naming rules: 3–63 characters of lowercase letters, digits, `-` and `.`,
    /// starting and ending with a letter or digit, no `..`, not an IPv4 address, no `xn--`
    /// prefix and no `-s3alias` / `--ol-s3` suffix.
    public static func isValidBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        func isLowerAlnum(_ c: UInt8) -> Bool {
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
        }
        for c in bytes where !(isLowerAlnum(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")) { return false }
        guard isLowerAlnum(bytes.first!), isLowerAlnum(bytes.last!) else { return false }
        if name.contains("..") || name.contains(".-") || name.contains("-.") { return false }
        if name.hasPrefix("xn--") || name.hasPrefix("sthree-") || name.hasSuffix("-s3alias") || name.hasSuffix("--ol-s3") { return false }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) {
            return false
        }
        return true
    }

    package static let maxKeyBytes = 1024

    /// Keys are any UTF-8 of 1...1024 bytes except NUL (which XML listings cannot carry).
    package static func validateKey(_ key: String) throws(StoreError) {
        let count = key.utf8.count
        if count == 0 { throw .emptyKey }
        if count > maxKeyBytes { throw .keyTooLong }
        if key.utf8.contains(0) { throw .keyContainsNUL }
    }

    package static func validateBucket(_ name: String) throws(StoreError) {
        guard isValidBucketName(name) else { throw .invalidBucketName(bucket: name) }
    }
}

/// A single HTTP byte range. Multiple ranges are not supported (S3 does not either).
public enum ByteRange: Sendable, Equatable {
    /// `bytes=a-b` (inclusive).
    case closed(Int64, Int64)
    /// `bytes=a-`
    case from(Int64)
    /// `bytes=-n`: the last n bytes.
    case suffix(Int64)

    /// Parses a `Range` header value. Returns nil for anything that is not a single valid
    /// byte range; per RFC 9110 the caller then ignores the header and serves the whole object.
    public static func parse(_ header: String) -> ByteRange? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        func number(_ s: String) -> Int64? {
            guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
            return Int64(s)
        }
        switch (first.isEmpty, last.isEmpty) {
        case (true, true): return nil
        case (true, false):
            guard let n = number(last) else { return nil }
            return .suffix(n)
        case (false, true):
            guard let a = number(first) else { return nil }
            return .from(a)
        case (false, false):
            guard let a = number(first), let b = number(last), a <= b else { return nil }
            return .closed(a, b)
        }
    }

    /// The half-open range of an object of `size` bytes; throws `invalidRange` when unsatisfiable.
    public func resolve(size: Int64) throws(StoreError) -> Range<Int64> {
        switch self {
        case .closed(let a, let b):
            guard a < size else { throw .invalidRange(size: size) }
            return a..<(min(b, size - 1) + 1)
        case .from(let a):
            guard a < size else { throw .invalidRange(size: size) }
            return a..<size
        case .suffix(let n):
            guard n > 0, size > 0 else { throw .invalidRange(size: size) }
            return max(0, size - n)..<size
        }
    }
}

extension WritePreconditions {
    /// If-Match / If-None-Match against the current version (nil: none), at the commit.
    package func check(against current: ObjectInfo?) throws(StoreError) {
        if let ifMatch {
            guard let current, ETag.matches(ifMatch, current.etag) else { throw .preconditionFailed }
        }
        if let ifNoneMatch, let current, ETag.matches(ifNoneMatch, current.etag) {
            throw .preconditionFailed
        }
    }
}

extension ObjectInfo {
    /// Why an append at `position` to this object is refused, or nil when it may proceed.
    package func appendRefusal(position: Int64) -> StoreError? {
        if !isAppendable { return .objectNotAppendable }
        if size != position { return .positionNotEqualToLength(next: size) }
        return nil
    }
}

/// Multipart rules every store applies.
package enum MultipartRules {
    package static let maxPartNumber = 10_000

    package static func validatePartNumber(_ n: Int) throws(StoreError) {
        guard (1...maxPartNumber).contains(n) else { throw .invalidPartNumber(n) }
    }

    /// Checks a CompleteMultipartUpload part list on its own: not empty, valid numbers, ascending.
    package static func validate(_ parts: [CompletedPart]) throws(StoreError) {
        guard !parts.isEmpty else { throw .noPartsGiven }
        for part in parts { try validatePartNumber(part.partNumber) }
        for (a, b) in zip(parts, parts.dropFirst()) where b.partNumber <= a.partNumber { throw .invalidPartOrder }
    }

    /// Picks the uploaded part for each completed part (`invalidPart` when missing or its ETag
    /// differs) and checks that every part but the last has `minimumPartSize` bytes.
    package static func choose<Part>(
        _ parts: [CompletedPart], from uploaded: [Int: Part], info: (Part) -> PartInfo, minimumPartSize: Int64
    ) throws(StoreError) -> [Part] {
        var chosen: [Part] = []
        for part in parts {
            guard let found = uploaded[part.partNumber], ETag.normalize(part.etag) == ETag.normalize(info(found).etag) else {
                throw .invalidPart(partNumber: part.partNumber)
            }
            // A checksum listed with the part must be the part's own.
            if let claimed = part.checksum, claimed != info(found).checksums.additional { throw .invalidPart(partNumber: part.partNumber) }
            chosen.append(found)
        }
        for part in chosen.dropLast() where info(part).size < minimumPartSize {
            throw .entityTooSmall(partNumber: info(part).partNumber)
        }
        return chosen
    }

    /// A part's checksum must be of its upload's algorithm (a part without one is accepted; the
    /// object then gets no checksum of that algorithm).
    package static func checkPartChecksum(_ checksums: ObjectChecksums, upload: MultipartUpload) throws(StoreError) {
        if let expected = upload.checksum?.algorithm, let actual = checksums.additional?.algorithm, actual != expected {
            throw .checksumAlgorithmMismatch(expected: expected, actual: actual)
        }
    }

    /// The object's checksums from its parts', without their bytes: the CRC-64 when every part
    /// has one (combined); the upload's checksum when every part has one of its algorithm
    /// (FULL_OBJECT: the CRCs combined; COMPOSITE: the digest of the parts' digests). Refuses
    /// (`checksumMismatch`) an expected checksum the parts do not give.
    package static func checksums(of parts: [PartInfo], upload: UploadChecksum?, expected: AdditionalChecksum?) throws -> ObjectChecksums {
        var result = ObjectChecksums()
        let crcs = parts.compactMap(\.checksums.crc64ecma)
        if crcs.count == parts.count, let first = crcs.first {
            result.crc64ecma = zip(crcs, parts).dropFirst().reduce(first) { ReflectedCRC<UInt64>.ecma.combine($0, $1.0, secondLength: $1.1.size) }
        }
        if let upload {
            let digests = parts.compactMap { $0.checksums.additional?.algorithm == upload.algorithm ? $0.checksums.additional?.digest : nil }
            if digests.count == parts.count, let first = digests.first {
                if upload.fullObject {
                    var folded: [UInt8]? = first
                    for (digest, part) in zip(digests, parts).dropFirst() {
                        folded = folded.flatMap { upload.algorithm.combine($0, digest, secondLength: part.size) }
                    }
                    result.additional = folded.map { AdditionalChecksum(algorithm: upload.algorithm, digest: $0) }
                } else {
                    let composite = try StreamingChecksum(upload.algorithm)
                    for digest in digests { try composite.update(digest) }
                    result.additional = AdditionalChecksum(algorithm: upload.algorithm, digest: try composite.finalize(), partCount: parts.count)
                }
            }
        }
        if let expected, expected.algorithm != result.additional?.algorithm || expected.digest != result.additional?.digest {
            throw StoreError.checksumMismatch(expected.algorithm)
        }
        return result
    }

    /// Whether a CompleteMultipartUpload of an upload that is gone repeats the one that completed
    /// it: same bucket and key, a part list giving the same ETag, and that object still there.
    package static func isRetry(bucket: String, key: String, parts: [CompletedPart], completed: CompletedUploadRecord?, current: ObjectInfo?) -> Bool {
        guard let completed, completed.bucket == bucket, completed.key == key, let current, current.etag == completed.etag else { return false }
        return (try? etag(of: parts.map(\.etag))) == completed.etag
    }

    package static func etag(_ parts: [PartInfo]) throws -> String {
        try etag(of: parts.map(\.etag))
    }

    /// S3's multipart ETag: the MD5 of the parts' MD5s, then `-` and the number of parts.
    package static func etag(of partETags: [String]) throws -> String {
        let digest = try StreamingDigest(.md5)
        for partETag in partETags {
            guard let md5 = Hex.decode(ETag.normalize(partETag)) else { throw StoreError.corrupted("stored part ETag is not hex") }
            try digest.update(md5)
        }
        return "\"" + Hex.encode(try digest.finalize()) + "-\(partETags.count)\""
    }
}

extension ETag {
    /// The quoted ETag of a body with this MD5.
    package static func quoted(md5: [UInt8]) -> String { "\"" + Hex.encode(md5) + "\"" }
}

/// What the store remembers of a completed multipart upload, to answer its retries.
package struct CompletedUploadRecord: Sendable, Equatable {
    package let bucket: String
    package let key: String
    package let etag: String

    package init(bucket: String, key: String, etag: String) {
        self.bucket = bucket
        self.key = key
        self.etag = etag
    }
}

/// Millisecond timestamps, as the stores keep them.
package enum Millis {
    package static func from(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    package static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
}
