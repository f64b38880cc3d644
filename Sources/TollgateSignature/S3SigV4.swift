import Foundation
import TollgateCrypto
import Synchronization
import TollgateDates

/// How an S3 request's body is protected, from `x-amz-content-sha256`.
public enum S3PayloadMode: Sendable, Equatable {
    /// A hex SHA-256 of the body, covered by the signature: the body must hash to it.
    case sha256([UInt8])
    /// `UNSIGNED-PAYLOAD` (and every presigned request without a payload hash).
    case unsigned
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`: aws-chunked with chunk signatures.
    case streamingSigned
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`: signed chunks plus a signed trailer.
    case streamingSignedTrailer
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: aws-chunked, no chunk signatures, checksum trailer.
    case streamingUnsignedTrailer

    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    public static let streamingSignedPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    public static let streamingSignedPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    public static let streamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

    /// Parses an `x-amz-content-sha256` value; nil when it is none of the accepted forms.
    public init?(headerValue: String) {
        switch headerValue {
        case Self.unsignedPayload: self = .unsigned
        case Self.streamingSignedPayload: self = .streamingSigned
        case Self.streamingSignedPayloadTrailer: self = .streamingSignedTrailer
        case Self.streamingUnsignedPayloadTrailer: self = .streamingUnsignedTrailer
        default:
            guard headerValue.utf8.count == 64, let digest = Hex.decode(headerValue) else { return nil }
            self = .sha256(digest)
        }
    }

    /// True for the aws-chunked modes: the body must go through `AWSChunkedDecoder`.
    public var isChunked: Bool {
        switch self {
        case .streamingSigned, .streamingSignedTrailer, .streamingUnsignedTrailer: true
        case .sha256, .unsigned: false
        }
    }

    var hasTrailer: Bool { self == .streamingSignedTrailer || self == .streamingUnsignedTrailer }
    var hasChunkSignatures: Bool { self == .streamingSigned || self == .streamingSignedTrailer }
}

/// What a chunk signer needs after the headers were verified: the signing key, the scope and
/// the seed signature. Holds key material: never printed, never logged.
public struct ChunkSigningContext: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let accessKeyId: String
    let signingKey: [UInt8]
    let timestamp: String
    let scope: String
    let seedSignature: String

    public var description: String { "ChunkSigningContext(scope: \(scope), redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["scope": scope]) }
}

/// A header-verified S3 request, ready for its body.
public struct S3VerifiedRequest: Sendable {
    public var identity: VerifiedIdentity
    public var payload: S3PayloadMode
    /// `x-amz-decoded-content-length` for aws-chunked bodies.
    public var decodedContentLength: Int?
    /// The checksum the `x-amz-trailer` header announced, for trailer modes.
    public var trailerChecksum: ChecksumAlgorithm?
    /// The `x-amz-checksum-*` header value, when sent as a header.
    public var headerChecksum: ExpectedChecksum?
    /// The decoded `Content-MD5`, when sent. The body's verifier (`makePayloadVerifier()` or the
    /// chunked decoder) compares it with the MD5 of the (decoded) body: `BadDigest` on mismatch.
    /// A caller that checks it elsewhere (the gateway leaves an object's to the store, which
    /// hashes the body anyway) sets it to nil before making the verifier.
    public var contentMD5: [UInt8]?
    let chunkSigning: ChunkSigningContext?

    /// The aws-chunked decoder for this request's body, or nil when the body is not aws-chunked.
    public func makeChunkedDecoder(maxChunkSize: Int = AWSChunkedDecoder.defaultMaxChunkSize) throws(S3AuthError) -> AWSChunkedDecoder? {
        guard payload.isChunked else { return nil }
        return try AWSChunkedDecoder(request: self, maxChunkSize: maxChunkSize)
    }

    /// A verifier for a plain (not aws-chunked) body: SHA-256, Content-MD5 and checksum header.
    public func makePayloadVerifier() throws(S3AuthError) -> S3PayloadVerifier {
        var sha: [UInt8]?
        if case .sha256(let digest) = payload { sha = digest }
        return try S3PayloadVerifier(expectedSHA256: sha, contentMD5: contentMD5, checksum: headerChecksum)
    }
}

/// AWS Signature Version 4 verification for S3 (Authorization header and presigned URLs).
public enum S3SigV4 {
    /// AWS4-HMAC-SHA256, `AWS4` key prefix, `s3`, `aws4_request`, `x-amz-` headers.
    public static let flavor = SigV4Flavor.aws
    public static let maxPresignedExpires = 604_800
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// Verifies the request's SigV4 signature (header or presigned) and decodes its payload
    /// mode. Does not read the body: use `makeChunkedDecoder()` or `makePayloadVerifier()`.
    /// `service` is the one the credential scope must name: `s3` for the gateway; Tollgate's
    /// own signed endpoints pass theirs (`sts`, `tollgate`), so a signature for one service is
    /// not accepted by another. `bodySHA256` is the hash of a body the caller already read, the
    /// payload hash when the client sent no `x-amz-content-sha256` (AWS's generic signers don't).
    public static func verify(_ request: SignatureRequest, service: String = flavor.service, bodySHA256: String? = nil,
                              lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        let query = request.query
        let authorization = request.headers["authorization"]
        let presigned = query.contains(named: "X-Amz-Algorithm")
        if authorization != nil, presigned {
            throw .invalidRequest("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
        }
        if let authorization {
            return try verifyHeader(request, authorization: authorization, service: service, bodySHA256: bodySHA256, lookup: lookup)
        }
        if presigned {
            return try verifyPresigned(request, query: query, service: service, lookup: lookup)
        }
        throw .accessDenied("Access Denied")
    }

    // MARK: Authorization header

    /// `host;x-amz-date`: non-empty, lower-case names; nil otherwise.
    static func parseSignedHeaders(_ value: String) -> [String]? {
        let names = value.splitASCII(UInt8(ascii: ";"))
        for name in names where name.isEmpty || name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
            return nil
        }
        return names.map(String.init)
    }

    static func verifyHeader(_ request: SignatureRequest, authorization: String, service: String = flavor.service,
                             bodySHA256: String? = nil, lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        let prefix = flavor.algorithm + " "
        guard authorization.hasPrefix(prefix) else {
            throw .authorizationHeaderMalformed("the authorization mechanism is not supported; expecting AWS4-HMAC-SHA256.")
        }
        guard let fields = SigV4Flavor.parseAuthorizationFields(authorization.dropFirst(prefix.count)),
              let credentialValue = fields["Credential"], let signedValue = fields["SignedHeaders"],
              let signature = fields["Signature"]
        else {
            throw .authorizationHeaderMalformed("expecting Credential, SignedHeaders and Signature.")
        }
        guard let credential = flavor.parseCredential(credentialValue) else {
            throw .authorizationHeaderMalformed("the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
        }
        guard credential.service == service else {
            throw .authorizationHeaderMalformed("incorrect service \"\(credential.service)\". This endpoint belongs to \"\(service)\".")
        }
        guard let signedHeaders = parseSignedHeaders(signedValue) else {
            throw .authorizationHeaderMalformed("the SignedHeaders are mal-formed.")
        }

        // Time: x-amz-date wins over Date.
        let timestamp: String
        let requestTime: Date
        if let amzDate = request.headers[flavor.dateHeader] {
            guard let parsed = WireDate.parseISO8601Basic(amzDate.trimmingASCIIWhitespace()) else {
                throw .accessDenied("AWS authentication requires a valid Date or x-amz-date header")
            }
            timestamp = amzDate.trimmingASCIIWhitespace()
            requestTime = parsed
        } else if let date = request.headers["date"], let parsed = WireDate.parseHTTPDate(date) {
            timestamp = WireDate.iso8601Basic(parsed)
            requestTime = parsed
        } else {
            throw .accessDenied("AWS authentication requires a valid Date or x-amz-date header")
        }
        guard timestamp.hasPrefix(credential.date) else {
            throw .authorizationHeaderMalformed("Invalid credential date \"\(credential.date)\". This date is not the same as X-Amz-Date: \"\(timestamp.prefix(8))\".")
        }
        if abs(requestTime.timeIntervalSince(request.now)) > maxClockSkewSeconds {
            throw .requestTimeTooSkewed(requestTime: requestTime, serverTime: request.now)
        }

        try checkSignedHeaderCoverage(request.headers, signedHeaders: signedHeaders, presigned: false)

        guard let contentSHA = request.headers[flavor.contentSHA256Header]?.trimmingASCIIWhitespace() ?? bodySHA256 else {
            throw .invalidRequest("Missing required header for this request: x-amz-content-sha256")
        }
        guard let payload = S3PayloadMode(headerValue: contentSHA) else { throw .invalidContentSHA256(contentSHA) }
        // A body the caller read must be the one signed: no UNSIGNED-PAYLOAD, no other hash.
        if let bodySHA256, contentSHA.lowercased() != bodySHA256 {
            throw .contentSHA256Mismatch(clientComputed: contentSHA, serverComputed: bodySHA256)
        }

        return try verifySignature(
            request, presigned: false, credential: credential, timestamp: timestamp,
            requestTime: requestTime, expires: nil, signedHeaders: signedHeaders, signature: signature,
            token: request.headers["x-amz-security-token"], payloadHash: contentSHA, payload: payload, lookup: lookup
        )
    }

    // MARK: Presigned

    /// The query parameters of a presigned request, in the order `verifyPresigned` reads them.
    static let presignedParameters = [
        "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature",
        "X-Amz-Content-Sha256", "X-Amz-Security-Token",
    ].map { Array($0.utf8) }

    static func verifyPresigned(_ request: SignatureRequest, query: RawQuery, service: String = flavor.service,
                                lookup: SecretLookup) throws(S3AuthError) -> S3VerifiedRequest {
        let parameters = query.firstValues(named: presignedParameters)
        guard let algorithmValue = parameters[0], let credentialValue = parameters[1], let dateValue = parameters[2],
              let expiresValue = parameters[3], let signedValue = parameters[4], let signature = parameters[5]
        else {
            throw .authorizationQueryParametersError("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
        }
        guard algorithmValue == flavor.algorithm else {
            throw .authorizationQueryParametersError("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
        }
        guard let credential = flavor.parseCredential(credentialValue) else {
            throw .authorizationQueryParametersError("Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
        }
        guard credential.service == service else {
            throw .authorizationQueryParametersError("Error parsing the X-Amz-Credential parameter; incorrect service \"\(credential.service)\". This endpoint belongs to \"\(service)\".")
        }
        guard let requestTime = WireDate.parseISO8601Basic(dateValue) else {
            throw .authorizationQueryParametersError("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
        }
        guard dateValue.hasPrefix(credential.date) else {
            throw .authorizationQueryParametersError("Invalid credential date \"\(credential.date)\". This date is not the same as X-Amz-Date: \"\(dateValue.prefix(8))\".")
        }
        guard let expiresSeconds = Int(expiresValue), expiresValue.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .authorizationQueryParametersError("X-Amz-Expires should be a number")
        }
        guard expiresSeconds >= 1 else {
            throw .authorizationQueryParametersError("X-Amz-Expires must be non-negative")
        }
        guard expiresSeconds <= maxPresignedExpires else {
            throw .authorizationQueryParametersError("X-Amz-Expires must be less than a week (in seconds) that is; the maximum expires is 604800 seconds")
        }
        guard let signedHeaders = parseSignedHeaders(signedValue) else {
            throw .authorizationQueryParametersError("Error parsing the X-Amz-SignedHeaders parameter.")
        }
        if requestTime.timeIntervalSince(request.now) > maxClockSkewSeconds {
            throw .accessDenied("Request is not valid yet")
        }
        let expires = requestTime.addingTimeInterval(TimeInterval(expiresSeconds))
        if request.now > expires {
            throw .requestExpired(expires: expires, serverTime: request.now, expiresSeconds: expiresSeconds)
        }
        try checkSignedHeaderCoverage(request.headers, signedHeaders: signedHeaders, presigned: true)

        // The payload hash of a presigned request: a signed X-Amz-Content-Sha256 parameter or
        // header if the signer put one there, UNSIGNED-PAYLOAD otherwise.
        let payloadHash = parameters[6]
            ?? request.headers[flavor.contentSHA256Header]?.trimmingASCIIWhitespace()
            ?? S3PayloadMode.unsignedPayload
        guard let payload = S3PayloadMode(headerValue: payloadHash) else { throw .invalidContentSHA256(payloadHash) }
        guard !payload.hasChunkSignatures else {
            throw .invalidRequest("Chunk signatures are not supported with presigned requests")
        }

        return try verifySignature(
            request, presigned: true, credential: credential, timestamp: dateValue,
            requestTime: requestTime, expires: expires, signedHeaders: signedHeaders, signature: signature,
            token: parameters[7] ?? request.headers["x-amz-security-token"],
            payloadHash: payloadHash, payload: payload, lookup: lookup
        )
    }

    // MARK: Shared steps

    /// The common end of both forms: the secret, the canonical request (without
    /// `X-Amz-Signature` for presigned requests), the signature check, and the payload mode.
    static func verifySignature(
        _ request: SignatureRequest, presigned: Bool, credential: SigV4Credential, timestamp: String,
        requestTime: Date, expires: Date?, signedHeaders: [String], signature: String, token: String?,
        payloadHash: String, payload: S3PayloadMode, lookup: SecretLookup
    ) throws(S3AuthError) -> S3VerifiedRequest {
        let secret = try lookupSecret(credential.accessKeyId, token: token, lookup: lookup)
        let canonical = canonicalRequest(method: request.method, rawPath: request.rawPath, query: request.query,
                                         excludingSignature: presigned, headers: request.headers,
                                         signedHeaders: signedHeaders, payloadHash: payloadHash)
        let key: DerivedSigningKey
        let stringToSign: [UInt8]
        let matches: Bool
        do {
            stringToSign = try flavor.stringToSign(timestamp: timestamp, scope: credential.scope, canonicalRequest: canonical)
            key = try flavor.signingKey(secret: secret, date: credential.date, region: credential.region, service: credential.service)
            matches = try SigV4Flavor.signatureMatches(key: key, stringToSign: stringToSign, provided: signature)
        } catch {
            throw .internalError
        }
        guard matches else {
            throw .signatureDoesNotMatch(SignatureMismatch(
                accessKeyId: credential.accessKeyId, stringToSign: String(decoding: stringToSign, as: UTF8.self),
                signatureProvided: signature, canonicalRequest: String(decoding: canonical, as: UTF8.self)))
        }
        let identity = VerifiedIdentity(accessKeyId: credential.accessKeyId, dialect: .s3SigV4, securityToken: token,
                                        presigned: presigned, region: credential.region, signedHeaders: signedHeaders,
                                        requestTime: requestTime, expires: expires)
        let context = payload.hasChunkSignatures
            ? ChunkSigningContext(accessKeyId: credential.accessKeyId, signingKey: key.bytes, timestamp: timestamp,
                                  scope: credential.scope, seedSignature: signature.lowercased())
            : nil
        return try finishPayload(request, identity: identity, payload: payload, chunkSigning: context)
    }

    /// `host` must always be signed, and so must every `x-amz-*` header present: those are the
    /// headers that change what a request does (`x-amz-copy-source*`, `x-amz-metadata-directive`,
    /// `x-amz-tagging`, `x-amz-acl`, checksums, `x-amz-server-side-*`, …), so a presigned PUT
    /// cannot be turned into a copy by its holder. For a presigned request the payload hash may
    /// come from an unsigned `x-amz-content-sha256` header: its value is the last line of the
    /// canonical request, so the signature covers it all the same.
    static func checkSignedHeaderCoverage(_ headers: SignatureHeaders, signedHeaders: [String], presigned: Bool) throws(S3AuthError) {
        var unsigned: [String] = []
        for field in headers.fields where field.name.hasPrefix(flavor.headerPrefix) && !signedHeaders.contains(field.name)
            && !(presigned && field.name == flavor.contentSHA256Header) && !unsigned.contains(field.name) {
            unsigned.append(field.name)
        }
        let hostSigned = signedHeaders.contains("host")
        if !unsigned.isEmpty || !hostSigned {
            let missing = (hostSigned ? [] : ["host"]) + unsigned.sorted()
            throw .accessDenied("There were headers present in the request which were not signed: \(missing.joined(separator: ", "))")
        }
    }

    static func lookupSecret(_ accessKeyId: String, token: String?, dialect: SignatureDialect = .s3SigV4,
                             lookup: SecretLookup) throws(S3AuthError) -> String {
        do {
            return try lookup(CredentialQuery(accessKeyId: accessKeyId, securityToken: token, dialect: dialect))
        } catch {
            throw S3AuthError(error, accessKeyId: accessKeyId)
        }
    }

    static func finishPayload(_ request: SignatureRequest, identity: VerifiedIdentity, payload: S3PayloadMode,
                              chunkSigning: ChunkSigningContext?) throws(S3AuthError) -> S3VerifiedRequest {
        var decodedLength: Int?
        var trailer: ChecksumAlgorithm?
        if payload.isChunked {
            guard let value = request.headers["x-amz-decoded-content-length"] else { throw .missingDecodedContentLength }
            guard let length = Int(value.trimmingASCIIWhitespace()), length >= 0 else {
                throw .invalidRequest("Invalid x-amz-decoded-content-length")
            }
            decodedLength = length
        }
        if payload.hasTrailer {
            guard let name = request.headers["x-amz-trailer"]?.trimmingASCIIWhitespace(), !name.isEmpty else {
                throw .invalidRequest("The x-amz-trailer header is required with \(payload == .streamingUnsignedTrailer ? S3PayloadMode.streamingUnsignedPayloadTrailer : S3PayloadMode.streamingSignedPayloadTrailer)")
            }
            guard let algorithm = ChecksumAlgorithm(headerName: name) else {
                throw .invalidRequest("The value specified in the x-amz-trailer header is not supported")
            }
            trailer = algorithm
        }
        let headerChecksum = try parseChecksumHeader(request.headers)
        var md5: [UInt8]?
        if let value = request.headers["content-md5"] {
            guard let digest = ContentMD5.parse(value) else { throw .invalidDigest }
            md5 = digest
        }
        return S3VerifiedRequest(identity: identity, payload: payload, decodedContentLength: decodedLength,
                                 trailerChecksum: trailer, headerChecksum: headerChecksum, contentMD5: md5,
                                 chunkSigning: chunkSigning)
    }

    /// The single `x-amz-checksum-<algorithm>` header, if any.
    public static func parseChecksumHeader(_ headers: SignatureHeaders) throws(S3AuthError) -> ExpectedChecksum? {
        guard headers.fields.contains(where: { $0.name.hasPrefix("x-amz-checksum-") }) else { return nil }
        let present = ChecksumAlgorithm.allCases.filter { headers.contains($0.headerName) }
        guard let algorithm = present.first else { return nil }
        guard present.count == 1 else {
            throw .invalidRequest("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
        }
        guard let expected = ExpectedChecksum(algorithm: algorithm, base64: headers[algorithm.headerName] ?? "") else {
            throw .invalidChecksumValue(name: algorithm.headerName, trailer: false)
        }
        return expected
    }

    // MARK: Canonical forms (public for tests and error bodies)

    /// S3's canonical URI: each path segment percent-decoded once, then encoded with
    /// `UriEncode` (unreserved kept). S3 neither double-encodes nor normalises `.`/`..`/`//`.
    public static func canonicalURI(rawPath: String) -> String {
        var out: [UInt8] = []
        appendCanonicalURI(rawPath, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendCanonicalURI(_ rawPath: String, to out: inout [UInt8]) {
        if rawPath.isEmpty { out.append(UInt8(ascii: "/")); return }
        var rawPath = rawPath
        rawPath.withUTF8 { PercentEncoding.appendCanonical($0, plusIsSpace: false, keepLiteralSlash: true, to: &out) }
    }

    /// Canonical query: every parameter decoded then `UriEncode`d, sorted by encoded name then
    /// value, `name=value` joined by `&` (`=` kept even when the value is empty), over the items
    /// `RawQuery` split.
    static func canonicalQuery(rawQuery: String, excludingSignature: Bool) -> String {
        var out: [UInt8] = []
        appendCanonicalQuery(RawQuery(rawQuery), excludingSignature: excludingSignature, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static let signatureParameter = Array("X-Amz-Signature".utf8)

    static func appendCanonicalQuery(_ query: RawQuery, excludingSignature: Bool, to out: inout [UInt8]) {
        guard !query.isEmpty else { return }
        // Every name and value in canonical form in one buffer; the pairs are sorted as ranges of it.
        var arena: [UInt8] = []
        arena.reserveCapacity(query.text.utf8.count * 3)
        var pairs: [(name: Range<Int>, value: Range<Int>)] = []
        pairs.reserveCapacity(query.count)
        query.forEachRawItem { raw, rawName, rawValue in
            let nameStart = arena.count
            PercentEncoding.appendCanonical(UnsafeBufferPointer(rebasing: raw[rawName]), plusIsSpace: true, keepLiteralSlash: false, to: &arena)
            let name = nameStart..<arena.count
            if excludingSignature && name.count == signatureParameter.count
                && arena.withUnsafeBufferPointer({ memcmp($0.baseAddress! + name.lowerBound, signatureParameter, name.count) == 0 }) {
                arena.removeSubrange(name)
                return
            }
            if let rawValue {
                PercentEncoding.appendCanonical(UnsafeBufferPointer(rebasing: raw[rawValue]), plusIsSpace: true, keepLiteralSlash: false, to: &arena)
            }
            pairs.append((name, name.upperBound..<arena.count))
        }
        arena.withUnsafeBufferPointer { arena in
            pairs.sort { lhs, rhs in
                let byName = compareBytes(arena, lhs.name, rhs.name)
                return byName != 0 ? byName < 0 : compareBytes(arena, lhs.value, rhs.value) < 0
            }
            for (index, pair) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: "&")) }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[pair.name]))
                out.append(UInt8(ascii: "="))
                out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[pair.value]))
            }
        }
    }

    /// Byte-wise order of two ranges of `bytes`: negative, zero or positive.
    static func compareBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ lhs: Range<Int>, _ rhs: Range<Int>) -> Int {
        let common = min(lhs.count, rhs.count)
        if common > 0, let base = bytes.baseAddress {
            let order = memcmp(base + lhs.lowerBound, base + rhs.lowerBound, common)
            if order != 0 { return Int(order) }
        }
        return lhs.count - rhs.count
    }

    /// `Trimall`: trims and collapses runs of whitespace to one space.
    static func trimAll(_ value: String) -> String {
        var out: [UInt8] = []
        appendTrimmedAll(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendTrimmedAll(_ value: String, to out: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendTrimmedAll($0, to: &out) }
    }

    private static func appendTrimmedAll(_ value: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        func isSpace(_ c: UInt8) -> Bool {
            c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r")
        }
        // Almost every signed value (host, dates, hashes) has no whitespace at all.
        if !value.contains(where: isSpace) {
            out.append(contentsOf: value)
            return
        }
        var pendingSpace = false
        var wroteAny = false
        for c in value {
            if c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") {
                pendingSpace = wroteAny
            } else {
                if pendingSpace { out.append(UInt8(ascii: " ")); pendingSpace = false }
                out.append(c)
                wroteAny = true
            }
        }
    }

    public static func canonicalRequest(method: String, rawPath: String, rawQuery: String, headers: SignatureHeaders,
                                        signedHeaders: [String], payloadHash: String, presigned: Bool) -> String {
        String(decoding: canonicalRequest(method: method, rawPath: rawPath, query: RawQuery(rawQuery),
                                          excludingSignature: presigned, headers: headers, signedHeaders: signedHeaders,
                                          payloadHash: payloadHash),
               as: UTF8.self)
    }

    static func canonicalRequest(method: String, rawPath: String, query: RawQuery, excludingSignature: Bool,
                                 headers: SignatureHeaders, signedHeaders: [String], payloadHash: String) -> [UInt8] {
        var out: [UInt8] = []
        // Path and query in canonical form are about as long as sent (a presigned URL's query
        // alone is 400 bytes or more); the headers and payload hash fit in the rest.
        out.reserveCapacity(384 + (rawPath.utf8.count + query.text.utf8.count) * 5 / 4)
        out += method.utf8
        out.append(UInt8(ascii: "\n"))
        appendCanonicalURI(rawPath, to: &out)
        out.append(UInt8(ascii: "\n"))
        appendCanonicalQuery(query, excludingSignature: excludingSignature, to: &out)
        out.append(UInt8(ascii: "\n"))
        headers.appendCanonicalLines(signedHeaders, to: &out, appendValue: appendTrimmedAll)
        for (index, name) in signedHeaders.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ";")) }
            out += name.utf8
        }
        out.append(UInt8(ascii: "\n"))
        out += payloadHash.utf8
        return out
    }

    public static func stringToSign(timestamp: String, scope: String, canonicalRequest: String) -> String {
        let bytes = try? flavor.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: Array(canonicalRequest.utf8))
        return String(decoding: bytes ?? [], as: UTF8.self)
    }

    /// Signs a request in header form, as an S3 client does (Tollgate's own CLI uses it to talk to
    /// a running gateway). `headers` must hold `host`, `x-amz-date` (`timestamp`) and
    /// `x-amz-content-sha256` (`payloadHash`); every header given is signed. Returns the
    /// `Authorization` value.
    public static func authorization(method: String, rawPath: String, rawQuery: String, headers: SignatureHeaders,
                                     payloadHash: String, accessKeyId: String, secret: String, region: String,
                                     timestamp: String, service: String = flavor.service) throws(S3AuthError) -> String {
        let signed = headers.names.sorted()
        let scope = "\(timestamp.prefix(8))/\(region)/\(service)/\(flavor.terminator)"
        let canonical = canonicalRequest(method: method, rawPath: rawPath, query: RawQuery(rawQuery), excludingSignature: false,
                                         headers: headers, signedHeaders: signed, payloadHash: payloadHash)
        let signature: [UInt8]
        do {
            let key = try flavor.deriveSigningKey(secret: secret, date: String(timestamp.prefix(8)), region: region, service: service)
            signature = try Crypto.hmacSHA256(key: key, data: flavor.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonical))
        } catch {
            throw .internalError
        }
        return "\(flavor.algorithm) Credential=\(accessKeyId)/\(scope), SignedHeaders=\(signed.joined(separator: ";")), Signature=\(Hex.encode(signature))"
    }
}

/// `Content-MD5` handling.
public enum ContentMD5 {
    /// The 16 digest bytes of a `Content-MD5` header value, or nil when it is not base64 of 16
    /// bytes (S3 `InvalidDigest`, OSS `InvalidDigest`).
    public static func parse(_ value: String) -> [UInt8]? {
        guard let digest = Base64.decode(value.trimmingASCIIWhitespace()), digest.count == 16 else { return nil }
        return digest
    }
}

/// Signs requests as an S3 client signs them (SigV4 in the `Authorization` header), with
/// `aws-chunked` bodies whose every chunk is signed (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`): the S3
/// store's requests to its backend. The signing key is derived once a day. Never printed: its
/// description names the access key id and the region only.
public final class S3RequestSigner: Sendable, CustomStringConvertible {
    public let accessKeyId: String
    public let region: String
    public let service: String
    private let secret: String
    private let key = Mutex<(date: String, key: [UInt8])?>(nil)

    public init(accessKeyId: String, secret: String, region: String, service: String = S3SigV4.flavor.service) {
        self.accessKeyId = accessKeyId
        self.secret = secret
        self.region = region
        self.service = service
    }

    public var description: String { "S3RequestSigner(accessKeyId: \(accessKeyId), region: \(region))" }

    /// The payload hash of an `aws-chunked` body whose chunks are signed.
    public static let streamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// The key for `timestamp`'s day (`YYYYMMDD…`).
    func signingKey(_ date: String) throws(S3AuthError) -> [UInt8] {
        if let cached = key.withLock({ $0 }), cached.date == date { return cached.key }
        do {
            let derived = try S3SigV4.flavor.deriveSigningKey(secret: secret, date: date, region: region, service: service)
            key.withLock { $0 = (date, derived) }
            return derived
        } catch {
            throw .internalError
        }
    }

    /// The `Authorization` value for a request whose `headers` (every one of them signed) hold
    /// `host`, `x-amz-date` (`timestamp`) and `x-amz-content-sha256` (`payloadHash`); and the
    /// signature, which seeds the chunk signatures of a streaming body.
    public func sign(method: String, rawPath: String, rawQuery: String, headers: SignatureHeaders, payloadHash: String,
                     timestamp: String) throws(S3AuthError) -> (authorization: String, signature: String) {
        let signed = headers.names.sorted()
        let date = String(timestamp.prefix(8))
        let scope = "\(date)/\(region)/\(service)/\(S3SigV4.flavor.terminator)"
        let canonical = S3SigV4.canonicalRequest(method: method, rawPath: rawPath, query: RawQuery(rawQuery), excludingSignature: false,
                                                 headers: headers, signedHeaders: signed, payloadHash: payloadHash)
        let signature: String
        do {
            let mac = try Crypto.hmacSHA256(key: try signingKey(date),
                                            data: S3SigV4.flavor.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonical))
            signature = Hex.encode(mac)
        } catch {
            throw .internalError
        }
        let authorization = "\(S3SigV4.flavor.algorithm) Credential=\(accessKeyId)/\(scope), SignedHeaders=\(signed.joined(separator: ";")), Signature=\(signature)"
        return (authorization, signature)
    }

    /// The signer of a streaming body's chunks, after the request's own `signature`.
    public func chunkSigner(timestamp: String, seedSignature: String) throws(S3AuthError) -> AWSChunkSigner {
        let date = String(timestamp.prefix(8))
        return AWSChunkSigner(key: try signingKey(date), timestamp: timestamp,
                              scope: "\(date)/\(region)/\(service)/\(S3SigV4.flavor.terminator)", previous: seedSignature)
    }
}

/// Signs the chunks of one `aws-chunked` body in order: each signature covers the chunk's
/// SHA-256 and the signature before it (the request's, for the first chunk).
public struct AWSChunkSigner: Sendable {
    let key: [UInt8]
    let timestamp: String
    let scope: String
    var previous: String

    /// The next chunk's signature (hex), given the SHA-256 of its payload (an empty payload for
    /// the final chunk).
    public mutating func sign(payloadSHA256 digest: [UInt8]) throws(S3AuthError) -> String {
        let stringToSign = "AWS4-HMAC-SHA256-PAYLOAD\n\(timestamp)\n\(scope)\n\(previous)\n\(S3SigV4.emptySHA256)\n\(Hex.encode(digest))"
        do {
            previous = Hex.encode(try Crypto.hmacSHA256(key: key, stringToSign))
        } catch {
            throw .internalError
        }
        return previous
    }
}
