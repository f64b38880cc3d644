import Foundation
import Testing
@testable import TollgateSignature
import TollgateCrypto

enum ExpectedS3Mode: Sendable {
    case sha256, unsigned, streamingSigned, streamingSignedTrailer, streamingUnsignedTrailer
}

enum OSSVersion: Sendable { case v1, v2, v4 }

/// A request signed by botocore (or by the documented AWS algorithm), from GeneratedVectors.swift.
struct S3Vector: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var path: String
    var query: String
    var headers: [(String, String)]
    var accessKeyId: String
    var secret: String
    var token: String?
    var region: String
    var mode: ExpectedS3Mode
    var presigned: Bool
    var body: String
    var decoded: String

    var testDescription: String { name }
    var bodyBytes: [UInt8] { Base64.decode(body)! }
    var decodedBytes: [UInt8] { Base64.decode(decoded)! }

    func request(now: Date = Date(timeIntervalSince1970: generatedNow)) -> SignatureRequest {
        SignatureRequest(method: method, rawPath: path, rawQuery: query, headers: SignatureHeaders(headers), now: now)
    }

    func lookup(secretSuffix: String = "") -> SecretLookup {
        { query throws(CredentialLookupError) in
            guard query.accessKeyId == accessKeyId else { throw .unknownAccessKey }
            if let token {
                guard let sent = query.securityToken else { throw .missingSecurityToken }
                guard sent == token else { throw .invalidSecurityToken }
            }
            return secret + secretSuffix
        }
    }
}

/// A request signed by oss2, from GeneratedVectors.swift.
struct OSSVector: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var path: String
    var query: String
    var headers: [(String, String)]
    var bucket: String?
    var key: String?
    var accessKeyId: String
    var secret: String
    var token: String?
    var version: OSSVersion
    var presigned: Bool
    var region: String?
    /// V2: the string oss2 signed (from its log).
    var stringToSign: String? = nil

    var testDescription: String { name }

    func request(now: Date = Date(timeIntervalSince1970: generatedNow)) -> SignatureRequest {
        SignatureRequest(method: method, rawPath: path, rawQuery: query, headers: SignatureHeaders(headers), now: now)
    }

    func lookup(secretSuffix: String = "") -> SecretLookup {
        { query throws(CredentialLookupError) in
            guard query.accessKeyId == accessKeyId else { throw .unknownAccessKey }
            if let token {
                guard let sent = query.securityToken else { throw .missingSecurityToken }
                guard sent == token else { throw .invalidSecurityToken }
            }
            return secret + secretSuffix
        }
    }
}

/// Runs `body` and returns the S3 error it threw, or nil.
func s3Error<T>(_ body: () throws(S3AuthError) -> T) -> S3AuthError? {
    do { _ = try body(); return nil } catch { return error }
}

func isSignatureMismatch(_ error: S3AuthError?) -> Bool {
    if case .signatureDoesNotMatch = error { return true }
    return false
}

/// Replaces the last hex digit of `signature` with a different one.
func flipLastHex(_ signature: String) -> String {
    let last = signature.last!
    return String(signature.dropLast()) + (last == "0" ? "1" : "0")
}

extension Array where Element == (String, String) {
    func replacing(_ name: String, with transform: (String) -> String) -> [(String, String)] {
        map { $0.0.lowercased() == name.lowercased() ? ($0.0, transform($0.1)) : $0 }
    }
}

/// Replaces the value of query parameter `name` in a raw query string.
func replacingQueryValue(_ query: String, _ name: String, _ transform: (String) -> String) -> String {
    query.split(separator: "&").map { part -> String in
        let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard pieces.count == 2, pieces[0] == name else { return String(part) }
        return "\(pieces[0])=\(transform(String(pieces[1])))"
    }.joined(separator: "&")
}
