/// Why an upstream did not vend credentials, in the token endpoint's terms: the status the phone
/// gets (502 the upstream refused or answered nonsense, 503 it is down or throttling, 504 it
/// did not answer in time), the code (the upstream's own when it gave one) and a message that
/// names the upstream. Nothing in it comes from Tollgate's keys: the upstream's message is
/// kept only as far as it is printable text, and cut at 256 bytes.
public struct UpstreamFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// The upstream answered with an error of its own (4xx, or a 5xx that is not 503).
        case refused
        /// It said to slow down (`Throttling`, `Throttling.User`, HTTP 429).
        case throttled
        /// It could not be reached (connection refused, no route, TLS), or answered 503.
        case unavailable
        /// No answer within the timeout.
        case timeout
        /// An answer that is not what the protocol documents.
        case malformed
    }

    public let kind: Kind
    /// The upstream's error code, or Tollgate's for what has none (`UpstreamUnreachable`,
    /// `UpstreamTimeout`, `UpstreamMalformedAnswer`).
    public let code: String
    public let message: String
    /// The HTTP status the upstream answered with, when it answered.
    public let upstreamStatus: Int?

    public init(kind: Kind, code: String, message: String, upstreamStatus: Int? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.upstreamStatus = upstreamStatus
    }

    /// The token endpoint's status for this failure.
    public var httpStatus: Int {
        switch kind {
        case .refused, .malformed: 502
        case .throttled, .unavailable: 503
        case .timeout: 504
        }
    }

    /// Worth another try after a pause: throttling, a 5xx, no connection. A refusal (bad keys,
    /// a denied role, a policy the upstream rejects) answers the same every time.
    public var isRetryable: Bool {
        switch kind {
        case .throttled, .unavailable: true
        case .refused: (upstreamStatus ?? 0) >= 500
        case .timeout, .malformed: false
        }
    }

    public var description: String { "\(code): \(message)" }

    // MARK: Makers

    /// An error answer: the upstream's code and message (both cleaned), classified by code and status.
    public static func answered(upstream: String, status: Int, code: String?, message: String?) -> UpstreamFailure {
        let code = code.map(cleanCode) ?? ""
        let detail = message.map { clean($0, limit: 256) } ?? ""
        let kind: Kind
        if code.hasPrefix("Throttling") || code == "RequestLimitExceeded" || code == "SlowDown" || status == 429 {
            kind = .throttled
        } else if status == 503 || code == "ServiceUnavailable" {
            kind = .unavailable
        } else {
            kind = .refused
        }
        let shownCode = code.isEmpty ? "UpstreamHTTP\(status)" : code
        let text = "The upstream STS \(upstream) answered HTTP \(status) \(shownCode)" + (detail.isEmpty ? "." : ": \(detail)")
        return UpstreamFailure(kind: kind, code: shownCode, message: text, upstreamStatus: status)
    }

    public static func malformed(upstream: String, _ reason: String) -> UpstreamFailure {
        UpstreamFailure(kind: .malformed, code: "UpstreamMalformedAnswer",
                        message: "The upstream STS \(upstream) answered something unexpected: \(reason).")
    }

    public static func unreachable(upstream: String, _ reason: String) -> UpstreamFailure {
        UpstreamFailure(kind: .unavailable, code: "UpstreamUnreachable",
                        message: "The upstream STS \(upstream) could not be reached (\(clean(reason, limit: 160))).")
    }

    public static func timeout(upstream: String, milliseconds: Int) -> UpstreamFailure {
        UpstreamFailure(kind: .timeout, code: "UpstreamTimeout",
                        message: "The upstream STS \(upstream) did not answer within \(milliseconds) ms.")
    }

    /// Printable ASCII and letters of other scripts; control characters become spaces; cut at
    /// `limit` bytes on a character boundary.
    static func clean(_ text: String, limit: Int) -> String {
        var out = ""
        var bytes = 0
        for character in text {
            let shown: Character = character.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F } ? character : " "
            let size = String(shown).utf8.count
            if bytes + size > limit {
                out += "…"
                break
            }
            out.append(shown)
            bytes += size
        }
        return out
    }

    /// An error code as a label: letters, digits, `.`, `_`, `-`, at most 64 of them.
    static func cleanCode(_ code: String) -> String {
        String(code.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_".unicodeScalars.contains($0)) }
            .prefix(64).map(Character.init))
    }
}
