// What the signature fuzzers share: one text form of an HTTP request, one fixed clock and the
// credentials of the test vectors (Tests/TollgateSignatureTests/GeneratedVectors.swift).
import Foundation
import TollgateSignature

public enum FuzzSupport {
    /// The instant the test vectors were signed at, so seeds taken from them verify and the
    /// fuzzer starts from requests that pass every check. Never the clock: a crash must replay.
    public static let now = Date(timeIntervalSince1970: 1_773_500_966)

    /// The vectors' secrets by access key id; any other id gets a fixed secret (so a mutated key
    /// id still reaches signature checking) except the empty one, which is unknown.
    public static func lookup(_ query: CredentialQuery) throws(CredentialLookupError) -> String {
        switch query.accessKeyId {
        case "": throw .unknownAccessKey
        case "AKIDEXAMPLE": return "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        case "STS.NUgYrLnoC37mZZCNnAbez": return "Tm90IGEgcmVhbCBzZWNyZXQ+Lw=="
        case "UNKNOWN": throw .unknownAccessKey
        default: return "fuzz-secret-0123456789abcdefghijklmnop"
        }
    }

    /// Parses the corpus' request form:
    ///
    ///     METHOD TARGET
    ///     Name: value
    ///     …
    ///
    /// Lines end with `\n`; TARGET is path and query as sent on the request line; a header's value
    /// is what follows `": "` (or `":"`), kept byte for byte. Lines after the first without a
    /// colon are ignored. Never fails: any bytes make some request.
    public static func request(_ text: Substring) -> SignatureRequest {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        let requestLine = lines.popFirst() ?? ""
        let method: Substring
        let target: Substring
        if let space = requestLine.firstIndex(of: " ") {
            method = requestLine[..<space]
            target = requestLine[requestLine.index(after: space)...]
        } else {
            method = requestLine
            target = "/"
        }
        var headers = SignatureHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            var value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
            headers.add(name: String(line[..<colon]), value: String(value))
        }
        let mark = target.firstIndex(of: "?")
        return SignatureRequest(method: String(method), rawPath: String(target[..<(mark ?? target.endIndex)]),
                                rawQuery: mark.map { String(target[target.index(after: $0)...]) } ?? "", headers: headers, now: now)
    }

    /// The input as text; invalid UTF-8 is repaired, as String(decoding:) does.
    public static func text(_ data: UnsafePointer<UInt8>, _ size: Int) -> String {
        String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    }
}
