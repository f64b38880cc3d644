import TollgateCrypto

/// The S3 wire names of the additional checksums.
extension ChecksumAlgorithm {
    /// `x-amz-checksum-crc32`, …
    public var headerName: String { "x-amz-checksum-\(rawValue)" }

    /// Parses `x-amz-checksum-crc32` (any case) into `.crc32`.
    public init?(headerName: String) {
        let lower = headerName.lowercased()
        guard lower.hasPrefix("x-amz-checksum-") else { return nil }
        self.init(rawValue: String(lower.dropFirst("x-amz-checksum-".count)))
    }
}

/// An expected checksum value, as sent in an `x-amz-checksum-*` header or trailer.
public struct ExpectedChecksum: Sendable, Equatable {
    public var algorithm: ChecksumAlgorithm
    /// The raw digest bytes.
    public var digest: [UInt8]

    public init(algorithm: ChecksumAlgorithm, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    /// Decodes the base64 value; nil when it is not base64 of the algorithm's digest size.
    public init?(algorithm: ChecksumAlgorithm, base64 value: String) {
        guard let digest = Base64.decode(value.trimmingASCIIWhitespace()), digest.count == algorithm.digestSize
        else { return nil }
        self.init(algorithm: algorithm, digest: digest)
    }

    public var base64: String { Base64.encode(digest) }
}

extension StringProtocol {
    /// Trims spaces and horizontal tabs (HTTP optional whitespace) at both ends.
    func trimmingASCIIWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
