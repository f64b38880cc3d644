import Foundation
import Testing
import TollgateToken

private let t0: Int64 = 1_795_000_000

private func claims(ak: String = "STS.AAAAAAAAAAAAAAAAAAAAAAAA", iat: Int64 = t0, subject: String? = "alice", role: String = "readwrite") -> TokenClaims {
    TokenClaims(keyId: "k", accessKeyId: ak, issuedAt: iat, expiresAt: iat + 900, subject: subject, role: role, sessionName: ak)
}

struct MatchCase: Sendable, CustomTestStringConvertible {
    let name: String
    let entries: [Revocation]
    let claims: TokenClaims
    let expected: RevocationKind?
    var testDescription: String { name }
}

private let matchCases: [MatchCase] = [
    .init(name: "empty list refuses nothing", entries: [], claims: claims(), expected: nil),
    .init(name: "subject, token issued before", entries: [.init(kind: .subject, value: "alice", revokedAt: t0 + 10)],
          claims: claims(iat: t0), expected: .subject),
    .init(name: "subject, token issued in the same second", entries: [.init(kind: .subject, value: "alice", revokedAt: t0)],
          claims: claims(iat: t0), expected: .subject),
    .init(name: "subject, token issued after", entries: [.init(kind: .subject, value: "alice", revokedAt: t0)],
          claims: claims(iat: t0 + 1), expected: nil),
    .init(name: "subject, another user", entries: [.init(kind: .subject, value: "alice", revokedAt: t0 + 10)],
          claims: claims(subject: "bob"), expected: nil),
    .init(name: "subject, anonymous token", entries: [.init(kind: .subject, value: "alice", revokedAt: t0 + 10)],
          claims: claims(subject: nil), expected: nil),
    .init(name: "subject is case-sensitive", entries: [.init(kind: .subject, value: "Alice", revokedAt: t0 + 10)],
          claims: claims(subject: "alice"), expected: nil),
    .init(name: "subject entry does not match a role of that name", entries: [.init(kind: .subject, value: "readwrite", revokedAt: t0 + 10)],
          claims: claims(subject: "bob", role: "readwrite"), expected: nil),
    .init(name: "access key, whenever issued", entries: [.init(kind: .accessKeyId, value: "STS.AAAAAAAAAAAAAAAAAAAAAAAA", revokedAt: t0 - 100)],
          claims: claims(iat: t0), expected: .accessKeyId),
    .init(name: "access key, another key", entries: [.init(kind: .accessKeyId, value: "STS.BBBBBBBBBBBBBBBBBBBBBBBB", revokedAt: t0 + 10)],
          claims: claims(), expected: nil),
    .init(name: "role, token issued before", entries: [.init(kind: .role, value: "readwrite", revokedAt: t0 + 5)],
          claims: claims(iat: t0), expected: .role),
    .init(name: "role, token issued after", entries: [.init(kind: .role, value: "readwrite", revokedAt: t0 - 1)],
          claims: claims(iat: t0), expected: nil),
    .init(name: "role, another role", entries: [.init(kind: .role, value: "read", revokedAt: t0 + 5)],
          claims: claims(role: "readwrite"), expected: nil),
    .init(name: "access key wins over subject", entries: [.init(kind: .subject, value: "alice", revokedAt: t0 + 5),
                                                          .init(kind: .accessKeyId, value: "STS.AAAAAAAAAAAAAAAAAAAAAAAA", revokedAt: t0)],
          claims: claims(), expected: .accessKeyId),
]

@Test(arguments: matchCases)
func revocationMatching(_ c: MatchCase) {
    let list = RevocationList(c.entries)
    #expect(list.match(c.claims)?.kind == c.expected)
    // The entry-level predicate agrees with the indexed list.
    #expect(c.entries.contains { $0.matches(c.claims) } == (c.expected != nil))
}

@Test func revokingAgainKeepsTheLaterTime() {
    var list = RevocationList()
    list.add(.init(kind: .subject, value: "alice", revokedAt: t0))
    let kept = list.add(.init(kind: .subject, value: "alice", revokedAt: t0 - 50))
    #expect(kept.revokedAt == t0, "an older duplicate must not shorten a revocation")
    list.add(.init(kind: .subject, value: "alice", revokedAt: t0 + 50))
    #expect(list.count == 1)
    #expect(list.match(claims(iat: t0 + 20))?.revokedAt == t0 + 50)
}

@Test func pruningDropsOnlyEntriesWhoseTokensHaveAllExpired() {
    let lifetime: Int64 = 43200
    let list = RevocationList([
        .init(kind: .subject, value: "old", revokedAt: t0 - lifetime - TokenService.allowedClockSkew),
        .init(kind: .subject, value: "recent", revokedAt: t0 - lifetime),
        .init(kind: .accessKeyId, value: "STS.X", revokedAt: t0 - lifetime - TokenService.allowedClockSkew - 1),
        .init(kind: .role, value: "r", revokedAt: t0),
    ])
    let pruned = list.pruned(now: t0, maxTokenLifetime: lifetime)
    #expect(pruned.entries.map(\.value) == ["recent", "r"])
    // A token issued by a clock up to a minute ahead, with the longest lifetime, may still be
    // valid now: its entry must stay.
    #expect(pruned.match(claims(iat: t0 - lifetime, subject: "recent"))?.kind == .subject)
}

@Test func fileRoundTripsAndRefusesWhatItDidNotWrite() throws {
    let list = RevocationList([
        .init(kind: .role, value: "read", revokedAt: t0),
        .init(kind: .subject, value: "alice \"quoted\" /slash", revokedAt: t0 + 1),
        .init(kind: .accessKeyId, value: "STS.ABC", revokedAt: t0 + 2),
    ])
    let data = list.encoded()
    #expect(try RevocationList.decode(data) == list)
    let text = String(decoding: data, as: UTF8.self)
    #expect(text.contains("\"Version\" : 1"))
    #expect(text.contains("\"Type\" : \"Subject\""))

    for bad in [
        "", "[]", "{\"Version\":2,\"Revocations\":[]}", "{\"Revocations\":[]}",
        "{\"Version\":1,\"Revocations\":[{\"Type\":\"Group\",\"Value\":\"x\",\"RevokedAt\":1}]}",
        "{\"Version\":1,\"Revocations\":[{\"Type\":\"Subject\",\"Value\":\"\",\"RevokedAt\":1}]}",
        "{\"Version\":1,\"Revocations\":[{\"Type\":\"Subject\",\"Value\":\"a\"}]}",
    ] {
        #expect(throws: RevocationError.self, "\(bad)") { try RevocationList.decode(Data(bad.utf8)) }
    }
    #expect(try RevocationList.decode(Data("{\"Version\":1,\"Revocations\":[]}".utf8)).isEmpty)
}

@Test func validationRefusesEmptyControlAndRootKeys() {
    #expect(throws: RevocationError.self) { try Revocation.validate(kind: .subject, value: "") }
    #expect(throws: RevocationError.self) { try Revocation.validate(kind: .subject, value: "a\nb") }
    #expect(throws: RevocationError.self) { try Revocation.validate(kind: .role, value: String(repeating: "r", count: 1025)) }
    #expect(throws: RevocationError.self) { try Revocation.validate(kind: .accessKeyId, value: "TG0123456789ABCDEF01") }
    #expect(throws: Never.self) { try Revocation.validate(kind: .accessKeyId, value: "STS.AAAAAAAAAAAAAAAAAAAAAAAA") }
    #expect(throws: Never.self) { try Revocation.validate(kind: .subject, value: "alice@example.com") }
}

@Test func aRealTokenIsRefusedByItsSubjectUntilANewOneIsIssued() throws {
    let service = try TokenService(rootSecret: "k3J9mQ2xV7pL0sT5wZ8cF1hN4bR6yD3gA0eU2iO9")
    let now = Date(timeIntervalSince1970: TimeInterval(t0))
    let before = try service.issue(subject: "alice", role: "default", duration: 900, now: now)
    let list = RevocationList([.init(kind: .subject, value: "alice", revokedAt: t0)])
    #expect(list.match(try service.verify(before.securityToken, now: now).claims) != nil)
    let after = try service.issue(subject: "alice", role: "default", duration: 900, now: now.addingTimeInterval(1))
    #expect(list.match(try service.verify(after.securityToken, now: now.addingTimeInterval(1)).claims) == nil)
}
