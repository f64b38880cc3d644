import TollgateCrypto

/// The SigV4 family: AWS Signature Version 4 (S3, and Tollgate's own `sts` and `tollgate`
/// endpoints) and OSS V4. Every member signs
///
///     <algorithm>\n<timestamp>\n<date>/<region>/<service>/<terminator>\n<hex SHA-256 of the canonical request>
///
/// with kSigning = HMAC(HMAC(HMAC(HMAC(<key prefix> + secret, date), region), service), terminator),
/// and names its credential `<access key id>/<date>/<region>/<service>/<terminator>`. A flavor
/// holds what tells the members apart; the canonical requests (S3 signs the path, OSS the bucket
/// and key) stay with `S3SigV4` and `OSSSignature`.
public struct SigV4Flavor: Sendable {
    /// `AWS4-HMAC-SHA256`, `OSS4-HMAC-SHA256`: the Authorization scheme and the first line signed.
    public let algorithm: String
    /// Prepended to the secret for the first HMAC: `AWS4`, `aliyun_v4`.
    let keyPrefix: String
    /// The service a gateway request's scope names: `s3`, `oss`.
    public let service: String
    /// The scope's last part: `aws4_request`, `aliyun_v4_request`.
    let terminator: String
    /// The prefix of the headers that belong to the protocol: `x-amz-`, `x-oss-`.
    let headerPrefix: String
    /// `x-amz-date`, `x-oss-date`.
    let dateHeader: String
    /// `x-amz-content-sha256`, `x-oss-content-sha256`.
    let contentSHA256Header: String

    init(algorithm: String, keyPrefix: String, service: String, terminator: String, headerPrefix: String) {
        self.algorithm = algorithm
        self.keyPrefix = keyPrefix
        self.service = service
        self.terminator = terminator
        self.headerPrefix = headerPrefix
        dateHeader = headerPrefix + "date"
        contentSHA256Header = headerPrefix + "content-sha256"
    }

    public static let aws = SigV4Flavor(algorithm: "AWS4-HMAC-SHA256", keyPrefix: "AWS4", service: "s3",
                                        terminator: "aws4_request", headerPrefix: "x-amz-")
    public static let oss = SigV4Flavor(algorithm: "OSS4-HMAC-SHA256", keyPrefix: "aliyun_v4", service: "oss",
                                        terminator: "aliyun_v4_request", headerPrefix: "x-oss-")
}

/// A parsed credential: `<access key id>/<scope>`.
struct SigV4Credential: Equatable {
    var accessKeyId: String
    var date: String
    var region: String
    var service: String
    /// `<date>/<region>/<service>/<terminator>`.
    var scope: String
}

extension SigV4Flavor {
    /// `<access key id>/<date>/<region>/<service>/<terminator>`; the key id may hold slashes, so
    /// the four fixed parts are taken from the end. nil when the terminator is not this
    /// flavor's, the key id is empty or the date is not eight digits; the caller checks the service.
    func parseCredential(_ value: String) -> SigV4Credential? {
        var value = value
        return value.withUTF8 { bytes -> SigV4Credential? in
            // The last four slashes, from the end: before the terminator, service, region and date.
            var slashes = (terminator: -1, service: -1, region: -1, date: -1)
            var index = bytes.count
            while slashes.date < 0, index > 0 {
                index -= 1
                guard bytes[index] == UInt8(ascii: "/") else { continue }
                if slashes.terminator < 0 { slashes.terminator = index }
                else if slashes.service < 0 { slashes.service = index }
                else if slashes.region < 0 { slashes.region = index }
                else { slashes.date = index }
            }
            // Four slashes found, the first not at the start (the key id is not empty).
            guard slashes.date > 0 else { return nil }
            func part(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[range]) }
            func string(_ range: Range<Int>) -> String { String(decoding: part(range), as: UTF8.self) }
            let date = (slashes.date + 1)..<slashes.region
            guard part((slashes.terminator + 1)..<bytes.count).elementsEqual(terminator.utf8), date.count == 8,
                  part(date).allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else { return nil }
            return SigV4Credential(accessKeyId: string(0..<slashes.date), date: string(date),
                                   region: string((slashes.region + 1)..<slashes.service),
                                   service: string((slashes.service + 1)..<slashes.terminator), scope: string((slashes.date + 1)..<bytes.count))
        }
    }

    /// The `Name=value` fields of an Authorization header after `<algorithm> `, separated by
    /// commas, blanks around each field ignored (`Credential=…, SignedHeaders=…, Signature=…`).
    /// nil when a field has no `=`, or a name comes twice: no client sends one twice, and
    /// which of two a server took would be a guess.
    static func parseAuthorizationFields(_ rest: Substring) -> [String: String]? {
        var fields: [String: String] = [:]
        for part in rest.split(separator: ",") {
            let item = part.trimmingASCIIWhitespace()
            guard let eq = item.firstIndex(of: "=") else { return nil }
            let key = String(item[..<eq])
            guard fields[key] == nil else { return nil }
            fields[key] = String(item[item.index(after: eq)...])
        }
        return fields
    }

    /// `<algorithm>\n<timestamp>\n<scope>\n<hex SHA-256 of canonicalRequest>`.
    func stringToSign(timestamp: String, scope: String, canonicalRequest: [UInt8]) throws(CryptoError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(algorithm.utf8.count + timestamp.utf8.count + scope.utf8.count + 67)
        out += algorithm.utf8
        out.append(UInt8(ascii: "\n"))
        out += timestamp.utf8
        out.append(UInt8(ascii: "\n"))
        out += scope.utf8
        out.append(UInt8(ascii: "\n"))
        // The hash goes from a stack buffer straight into hex: no array for it.
        let hashed: Result<Void, CryptoError> = canonicalRequest.withUnsafeBytes { bytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { hash in
                Result { () throws(CryptoError) in
                    let length = try Crypto.digest(.sha256, bytes, into: UnsafeMutableRawBufferPointer(hash))
                    Hex.append(UnsafeBufferPointer(rebasing: hash[..<length]), to: &out)
                }
            }
        }
        try hashed.get()
        return out
    }

    /// The signing key, derived once per secret, date, region and service (`SigningKeyCache`).
    func signingKey(secret: String, date: String, region: String, service: String) throws(CryptoError) -> DerivedSigningKey {
        try SigningKeyCache.shared.key(for: .init(keyPrefix: keyPrefix, secret: secret, date: date, region: region, service: service)) { () throws(CryptoError) in
            try DerivedSigningKey(deriveSigningKey(secret: secret, date: date, region: region, service: service))
        }
    }

    /// kSigning = HMAC(HMAC(HMAC(HMAC(<key prefix> + secret, date), region), service), terminator).
    func deriveSigningKey(secret: String, date: String, region: String, service: String) throws(CryptoError) -> [UInt8] {
        let kDate = try Crypto.hmacSHA256(key: Array((keyPrefix + secret).utf8), date)
        let kRegion = try Crypto.hmacSHA256(key: kDate, region)
        let kService = try Crypto.hmacSHA256(key: kRegion, service)
        return try Crypto.hmacSHA256(key: kService, terminator)
    }

    /// Whether `provided` (hex, either case) is the HMAC of `stringToSign`, compared in constant time.
    static func signatureMatches(key: DerivedSigningKey, stringToSign: [UInt8], provided: String) throws(CryptoError) -> Bool {
        // Both MACs in one stack buffer, the computed one first: no arrays.
        var provided = provided
        let matches: Result<Bool, CryptoError> = provided.withUTF8 { hex in
            stringToSign.withUnsafeBytes { bytes in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { scratch in
                    Result { () throws(CryptoError) in
                        let expected = UnsafeMutableBufferPointer(rebasing: scratch[..<32])
                        let length = try key.mac.authenticate(bytes, into: UnsafeMutableRawBufferPointer(expected))
                        let given = UnsafeMutableBufferPointer(rebasing: scratch[32...])
                        guard length == 32, Hex.decode(hex, into: given) else { return false }
                        return Crypto.constantTimeEqual(UnsafeRawBufferPointer(expected), UnsafeRawBufferPointer(given))
                    }
                }
            }
        }
        return try matches.get()
    }
}
