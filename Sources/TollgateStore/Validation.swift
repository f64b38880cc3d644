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

    static let maxKeyBytes = 1024

    /// Keys are any UTF-8 of 1...1024 bytes except NUL (which XML listings cannot carry).
    static func validateKey(_ key: String) throws(StoreError) {
        let count = key.utf8.count
        if count == 0 { throw .invalidArgument("Object key must not be empty.") }
        if count > maxKeyBytes { throw .keyTooLong }
        if key.utf8.contains(0) { throw .invalidArgument("Object key must not contain NUL.") }
    }

    static func validateBucket(_ name: String) throws(StoreError) {
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
