import TollgateCrypto

/// `RoleSessionName` from the app user's subject, within what both STSs accept: 2 to
/// `maxLength` of `A–Z a–z 0–9 . @ - _` (Alibaba's set, which AWS's `[\w+=,.@-]` contains).
/// The upstream's logs and `AssumedRoleUser` show it, so it reads as the user where it can.
public enum SessionName {
    /// The name of callers without a subject (anonymous, the default role).
    public static let anonymous = "tollgate"

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "@"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    /// The subject itself when it fits; otherwise its allowed characters (others as `_`), cut to
    /// leave room for `-` and 12 hex digits of its SHA-256, so that two subjects that read the
    /// same once cleaned still get different names. No subject: `tollgate`.
    public static func derive(subject: String?, maxLength: Int) -> String {
        guard let subject, !subject.isEmpty else { return anonymous }
        let bytes = Array(subject.utf8)
        if (2...maxLength).contains(bytes.count), bytes.allSatisfy(isAllowed) { return subject }
        let digest = (try? Crypto.sha256(bytes)).map { Hex.encode($0.prefix(6)) } ?? "000000000000"
        let cleaned = bytes.map { isAllowed($0) ? $0 : UInt8(ascii: "_") }
        let kept = cleaned.prefix(max(0, maxLength - 13))
        return String(decoding: kept, as: UTF8.self) + "-" + digest
    }
}
