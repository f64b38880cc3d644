import Foundation
import Testing
import TollgateToken

private let root = "k3J9mQ2xV7pL0sT5wZ8cF1hN4bR6yD3gA0eU2iO9"
private let now = Date(timeIntervalSince1970: 1_795_000_000)

@Test func issuedTokenVerifiesWithItsClaimsAndSecret() throws {
    let service = try TokenService(rootSecret: root)
    let issued = try service.issue(subject: "alice", role: "default", duration: 900, now: now)
    #expect(issued.accessKeyId.hasPrefix("STS."))
    #expect(issued.accessKeyId.count == 28)
    #expect(issued.accessKeySecret.count >= 40)
    let (claims, secret) = try service.verify(issued.securityToken, now: now.addingTimeInterval(10))
    #expect(claims == issued.claims)
    #expect(claims.subject == "alice")
    #expect(claims.role == "default")
    #expect(claims.expiresAt - claims.issuedAt == 900)
    #expect(secret == issued.accessKeySecret, "the gateway re-derives the same temporary secret")
}

@Test func twoInstancesWithTheSameRootSecretAgree() throws {
    let issuer = try TokenService(rootSecret: root)
    let verifier = try TokenService(rootSecret: root)
    let issued = try issuer.issue(subject: nil, role: "r", duration: 900, now: now)
    #expect(try verifier.verify(issued.securityToken, now: now).secret == issued.accessKeySecret)
}

@Test func eachTokenHasItsOwnAccessKeyAndSecret() throws {
    let service = try TokenService(rootSecret: root)
    let a = try service.issue(subject: "u", role: "r", duration: 900, now: now)
    let b = try service.issue(subject: "u", role: "r", duration: 900, now: now)
    #expect(a.accessKeyId != b.accessKeyId)
    #expect(a.accessKeySecret != b.accessKeySecret)
}

@Test func changingAnySingleByteOfARealTokenMakesItFail() throws {
    let service = try TokenService(rootSecret: root)
    let issued = try service.issue(
        subject: "alice", role: "default", sessionPolicy: #"{"Version":"1","Statement":[]}"#,
        claims: ["jwt:sub": "alice"], duration: 3600, now: now
    )
    let token = Array(issued.securityToken.utf8)
    var failures: [String: Int] = [:]
    for position in token.indices {
        for replacement in Set([token[position] ^ 0x01, token[position] ^ 0x20, UInt8(ascii: "A"), UInt8(ascii: "-"), UInt8(ascii: ".")])
        where replacement != token[position] {
            var changed = token
            changed[position] = replacement
            do {
                _ = try service.verify(String(decoding: changed, as: UTF8.self), now: now)
                Issue.record("byte \(position) changed to \(replacement) still verified")
            } catch {
                failures["\(error)".prefix(9).description, default: 0] += 1
            }
        }
    }
    #expect(failures.values.reduce(0, +) >= token.count)
    #expect(failures["bad signa"] != nil, "changes to the claims or the MAC are signature failures")
}

@Test func expiryAndNotBefore() throws {
    let service = try TokenService(rootSecret: root)
    let issued = try service.issue(subject: nil, role: "r", duration: 900, now: now)
    #expect(throws: TokenError.expired(at: issued.claims.expiresAt)) {
        try service.verify(issued.securityToken, now: now.addingTimeInterval(900))
    }
    _ = try service.verify(issued.securityToken, now: now.addingTimeInterval(899))
    #expect(throws: TokenError.notYetValid(from: issued.claims.issuedAt)) {
        try service.verify(issued.securityToken, now: now.addingTimeInterval(-61))
    }
    _ = try service.verify(issued.securityToken, now: now.addingTimeInterval(-60))
}

@Test func rotation() throws {
    let oldSecret = "old-root-secret-0123456789abcdefghijklmnop"
    let old = try TokenService(rootSecret: oldSecret)
    let issuedByOld = try old.issue(subject: "bob", role: "r", duration: 900, now: now)

    let rotated = try TokenService(rootSecret: root, previousSecrets: [oldSecret])
    let (claims, secret) = try rotated.verify(issuedByOld.securityToken, now: now)
    #expect(claims.subject == "bob")
    #expect(secret == issuedByOld.accessKeySecret)
    #expect(rotated.current.id != old.current.id)
    #expect(try rotated.issue(subject: nil, role: "r", duration: 900, now: now).claims.keyId == rotated.current.id)

    let unrelated = try TokenService(rootSecret: root)
    #expect(throws: TokenError.unknownKey(old.current.id)) {
        try unrelated.verify(issuedByOld.securityToken, now: now)
    }
}

@Test("malformed tokens", arguments: ["", "TG1", "TG1.a.b", "TG2.a.b.c", "TG1...", "not a token at all", "TG1.x.y.z.w"])
func malformed(token: String) throws {
    let service = try TokenService(rootSecret: root)
    #expect(throws: TokenError.self) { try service.verify(token, now: now) }
}

@Test func foreignSignatureWithTheSameKeyIdIsRefused() throws {
    // An attacker who knows the key id (it is public) but not the secret cannot mint tokens.
    let service = try TokenService(rootSecret: root)
    let real = try service.issue(subject: "alice", role: "admin", duration: 900, now: now)
    let parts = real.securityToken.split(separator: ".")
    let forged = "\(parts[0]).\(parts[1]).\(parts[2]).\(String(repeating: "A", count: parts[3].count))"
    #expect(throws: TokenError.badSignature) { try service.verify(forged, now: now) }
}
