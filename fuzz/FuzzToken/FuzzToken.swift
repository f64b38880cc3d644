// libFuzzer target: security token verification (TollgateToken).
// Input, by its first byte:
//   `{`  claims JSON: the harness signs it as TokenService does (the MAC is checked before the
//        claims are parsed, so unsigned claims never reach the JSON decoder), then verifies.
//   `!`  issue round trip: lines subject, role, session name, session policy, `name=value` claims
//        (`;`-separated), duration; issue, verify, and the claims must come back unchanged.
//   else a token as a client sends it.
// The clock is fixed; the root secret must match fuzz/make_corpus.py (its seed tokens verify).
import Foundation
import TollgateCrypto
import TollgateToken

private let rootSecret = "fuzz-root-secret-0123456789abcdefghijklmn"
private let now = Date(timeIntervalSince1970: 1_773_500_966)
private let service = try! TokenService(rootSecret: rootSecret, previousSecrets: ["previous-root-secret-0123456789abcdefghij"])
/// HMAC(HMAC(root, "tollgate/token-mac/v1"), "TG1.<key id>.<claims>"), as SigningKey computes it.
private let macKey = try! HMACKey(.sha256, key: try! Crypto.hmacSHA256(key: Array(rootSecret.utf8), "tollgate/token-mac/v1"))

private func sign(claims: [UInt8]) -> String {
    let signed = "\(TokenService.prefix).\(service.current.id).\(Base64.encodeURL(claims))"
    return signed + "." + Base64.encodeURL(try! macKey.authenticate(signed))
}

/// The harness signs the way the service does; if that ever drifts, fail at once instead of
/// silently fuzzing only the bad-signature path.
private let checked: Bool = {
    let issued = try! service.issue(subject: "alice", role: "default", duration: 900, now: now)
    let claims = Base64.decodeURLStrict(issued.securityToken.split(separator: ".")[2])!
    precondition(sign(claims: claims) == issued.securityToken, "FuzzToken: the harness no longer signs as TokenService does")
    return true
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    precondition(checked)
    let bytes = UnsafeBufferPointer(start: data, count: size)
    switch bytes.first {
    case UInt8(ascii: "{"):
        _ = try? service.verify(sign(claims: Array(bytes)), now: now)
    case UInt8(ascii: "!"):
        roundTrip(String(decoding: bytes.dropFirst(), as: UTF8.self))
    default:
        _ = try? service.verify(String(decoding: bytes, as: UTF8.self), now: now)
    }
    return 0
}

private func roundTrip(_ text: String) {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let field = { (index: Int) -> String? in index < lines.count && !lines[index].isEmpty ? lines[index] : nil }
    var extra: [String: String]?
    if let pairs = field(4) {
        extra = [:]
        for pair in pairs.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            extra?[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
    }
    let duration = field(5).flatMap { Int64($0) }.map { min(max($0, 1), 43_200) } ?? 900
    guard let issued = try? service.issue(subject: field(0), role: field(1) ?? "default", sessionName: field(2),
                                          sessionPolicy: field(3), claims: extra, duration: duration, now: now) else {
        preconditionFailure("FuzzToken: issue failed")
    }
    let verified: (claims: TokenClaims, secret: String)
    do { verified = try service.verify(issued.securityToken, now: now) } catch {
        preconditionFailure("FuzzToken: an issued token does not verify: \(error)")
    }
    precondition(verified.claims == issued.claims, "FuzzToken: claims changed in the round trip")
    precondition(verified.secret == issued.accessKeySecret, "FuzzToken: the temporary secret changed in the round trip")
}
