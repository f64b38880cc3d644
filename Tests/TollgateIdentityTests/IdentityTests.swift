import Foundation
import JWTKit
import Synchronization
import Testing
@testable import TollgateIdentity

/// Claims a test token carries; nil fields are left out.
struct TestClaims: JWTPayload {
    var iss: String? = "https://login.example.com"
    var aud: [String]? = ["photos-app"]
    var sub: String? = "alice"
    var exp: Double? = 2_000_000_000
    var nbf: Double?
    var iat: Double?
    var groups: [String]?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A provider and its keys, signing test tokens with jwt-kit (the interop tests use PyJWT).
struct Fixture {
    let key = ES256PrivateKey()
    let otherKey = ES256PrivateKey()
    let now = Date(timeIntervalSince1970: 1_900_000_000)
    var provider = ProviderSettings(name: "app", issuer: "https://login.example.com", jwksURL: "https://login.example.com/jwks",
                                    discoveryURL: nil, audiences: ["photos-app"], algorithms: [.es256, .rs256], leewaySeconds: 60)

    static func jwk(_ key: ES256PrivateKey, kid: String) -> String {
        let p = key.publicKey.parameters!
        return #"{"kty":"EC","crv":"P-256","x":"\#(p.x)","y":"\#(p.y)","kid":"\#(kid)","use":"sig"}"#
    }

    var jwksJSON: String { #"{"keys":[\#(Self.jwk(key, kid: "k1"))]}"# }
    var jwks: JWKS { try! JSONDecoder().decode(JWKS.self, from: Data(jwksJSON.utf8)) }

    func token(_ claims: some JWTPayload = TestClaims(), kid: String? = "k1", key: ES256PrivateKey? = nil) async throws -> String {
        let keys = await JWTKeyCollection().add(ecdsa: key ?? self.key)
        var header = JWTHeader()
        header.kid = kid
        return try await keys.sign(claims, header: header)
    }

    func verify(_ token: String, provider: ProviderSettings? = nil) async throws(IdentityError) -> VerifiedIdentity {
        try await JWTVerifier.verify(token, provider: provider ?? self.provider, keys: jwks, now: now)
    }

    /// The refusal of a token signed with `claims` (nil when it verifies).
    func refusal(_ claims: some JWTPayload = TestClaims(), kid: String? = "k1", key: ES256PrivateKey? = nil) async throws -> IdentityError? {
        let token = try await self.token(claims, kid: kid, key: key)
        return await error { () async throws(IdentityError) in try await verify(token) }
    }
}

private func error(_ body: () async throws(IdentityError) -> VerifiedIdentity) async -> IdentityError? {
    do { _ = try await body(); return nil } catch { return error }
}

private func b64(_ text: String) -> String {
    Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
}

@Suite("JWT verification")
struct JWTVerificationTests {
    let f = Fixture()

    @Test func aValidTokenNamesItsSubject() async throws {
        let identity = try await f.verify(try await f.token(TestClaims(groups: ["editors", "staff"])))
        #expect(identity.subject == "alice")
        #expect(identity.issuer == "https://login.example.com")
        #expect(identity.claims["groups"]?.strings == ["editors", "staff"])
        #expect(identity.carriedClaims(["groups"])["sub"] == "alice")
    }

    @Test func refusals() async throws {
        var claims = TestClaims()
        claims.aud = ["other-app"]
        #expect(try await f.refusal(claims)?.code == "InvalidIdentityToken")
        #expect(try await f.refusal(TestClaims(iss: "https://evil.example.com"))?.code == "InvalidIdentityToken")
        #expect(try await f.refusal(TestClaims(exp: f.now.timeIntervalSince1970 - 61)) == .expired)
        #expect(try await f.refusal(TestClaims(exp: f.now.timeIntervalSince1970 - 59)) == nil, "inside the leeway")
        #expect(try await f.refusal(TestClaims(nbf: f.now.timeIntervalSince1970 + 61))?.code == "InvalidIdentityToken")
        #expect(try await f.refusal(TestClaims(exp: nil))?.code == "InvalidIdentityToken")
        // Signed by a key the provider does not publish, under its kid: the signature fails.
        #expect(try await f.refusal(key: f.otherKey)?.code == "InvalidIdentityToken")
        // A kid the key set does not have.
        #expect(try await f.refusal(kid: "k2")?.code == "InvalidIdentityToken")
        // A tampered payload.
        let token = try await f.token()
        let parts = token.split(separator: ".")
        let forged = "\(parts[0]).\(b64(#"{"iss":"https://login.example.com","aud":["photos-app"],"sub":"bob","exp":2000000000}"#)).\(parts[2])"
        #expect(await error { () async throws(IdentityError) in try await f.verify(forged) }?.code == "InvalidIdentityToken")
    }

    @Test(arguments: ["none", "None", "NONE", "HS256", "ES384", "XX"])
    func algorithmsOutsideTheProvidersListAreRefused(_ alg: String) async throws {
        let header = b64(#"{"alg":"\#(alg)","kid":"k1","typ":"JWT"}"#)
        let payload = b64(#"{"iss":"https://login.example.com","aud":"photos-app","sub":"alice","exp":2000000000}"#)
        for signature in ["", "c2ln"] {
            let e = await error { () async throws(IdentityError) in try await f.verify("\(header).\(payload).\(signature)") }
            #expect(e?.code == "InvalidIdentityToken", "\(alg) with signature \(signature.isEmpty ? "empty" : "present")")
        }
    }

    /// HS256 signed with the provider's public key as the HMAC secret: refused, because a
    /// published key is never an HMAC secret, and this provider has none.
    @Test func hmacConfusionIsRefused() async throws {
        var provider = f.provider
        provider.algorithms.append(.hs256)
        let secret = Array(f.jwksJSON.utf8)
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        var header = JWTHeader()
        header.kid = "k1"
        let token = try await keys.sign(TestClaims(), header: header)
        #expect(await error { () async throws(IdentityError) in try await f.verify(token, provider: provider) }?.code == "InvalidIdentityToken")
        // With an HMAC secret configured, the same algorithm verifies with that secret only.
        provider.hmacSecret = Array("a-shared-secret-of-at-least-32-bytes!!".utf8)
        let goodKeys = await JWTKeyCollection().add(hmac: HMACKey(from: provider.hmacSecret!), digestAlgorithm: .sha256)
        let good = try await goodKeys.sign(TestClaims())
        #expect(await error { () async throws(IdentityError) in try await f.verify(good, provider: provider) } == nil)
        #expect(await error { () async throws(IdentityError) in try await f.verify(token, provider: provider) }?.code == "InvalidIdentityToken")
    }

    @Test func aKeyOfTheWrongTypeForTheAlgorithmIsRefused() async throws {
        // The header says RS256 and names the EC key.
        let header = b64(#"{"alg":"RS256","kid":"k1"}"#)
        let payload = b64(#"{"iss":"https://login.example.com","aud":"photos-app","sub":"alice","exp":2000000000}"#)
        #expect(await error { () async throws(IdentityError) in try await f.verify("\(header).\(payload).AAAA") }?.code == "InvalidIdentityToken")
    }

    /// One grapheme: "e" and 4,000 combining acute accents, 8,001 bytes. The limit counts bytes.
    static let longGrapheme = "e" + String(repeating: "\u{301}", count: 4000)

    @Test(arguments: ["", "a/b", "*", "al?ce", "$x", "..", "a..b", "a\u{0}b", "a\nb", String(repeating: "x", count: 129), "a\\b",
                      longGrapheme, String(repeating: "é", count: 65)])
    func subjectsThatCouldWidenAPolicyAreRefused(_ subject: String) async throws {
        #expect(try await f.refusal(TestClaims(sub: subject))?.code == "IDPRejectedClaim")
    }

    @Test(arguments: ["alice", "alice@example.com", "Ålice-1_2.3", String(repeating: "x", count: 128)])
    func ordinarySubjectsAreAccepted(_ subject: String) {
        #expect(Subject.problem(subject) == nil)
    }

    @Test func theLimitIsInBytes() {
        #expect(Self.longGrapheme.count == 1 && Self.longGrapheme.utf8.count == 8001)
        #expect(Subject.problem(Self.longGrapheme) == "the subject is longer than 128 bytes")
        #expect(Subject.problem(String(repeating: "é", count: 64)) == nil, "64 two-byte characters are 128 bytes")
    }

    /// RFC 7519's `sub` is a string: a number or a boolean names no user, and must not become one
    /// ("12" would fill `${user}` like a name).
    struct OddSubject<Value: Codable & Sendable>: JWTPayload {
        var iss = "https://login.example.com"
        var aud = ["photos-app"]
        var sub: Value
        var exp = 2_000_000_000.0
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test func aProvidersPrefixIsPartOfTheSubject() async throws {
        var provider = f.provider
        provider.subjectPrefix = "google:"
        let identity = try await f.verify(try await f.token(), provider: provider)
        #expect(identity.subject == "google:alice")
        #expect(identity.carriedClaims([])["sub"] == "google:alice")
        // The claim alone must be a name: an empty one is not made one by the prefix.
        let empty = try await f.token(TestClaims(sub: ""))
        #expect(await error { () async throws(IdentityError) in try await f.verify(empty, provider: provider) }?.code == "IDPRejectedClaim")
        // The whole name counts against the limit.
        let long = try await f.token(TestClaims(sub: String(repeating: "x", count: 125)))
        #expect(await error { () async throws(IdentityError) in try await f.verify(long, provider: provider) }?.code == "IDPRejectedClaim")
        let webhook = try Webhook.identity(from: Array(#"{"user":"alice"}"#.utf8), now: f.now, subjectPrefix: "app:")
        #expect(webhook.subject == "app:alice" && webhook.claims["sub"] == .string("app:alice"))
    }

    @Test func aSubjectThatIsNotAStringIsRefused() async throws {
        for refusal in [try await f.refusal(OddSubject(sub: 12)), try await f.refusal(OddSubject(sub: true)),
                        try await f.refusal(OddSubject(sub: ["alice"])), try await f.refusal(OddSubject(sub: 1.5))] {
            #expect(refusal?.code == "IDPRejectedClaim")
            #expect(refusal?.description.contains("not a string") == true)
        }
        #expect(try await f.refusal(OddSubject(sub: "12")) == nil, "a string of digits is a name")
    }

    @Test(arguments: [
        (#"{"user":"hugo","maxValiditySeconds":1e19}"#, 43200), (#"{"user":"hugo","maxValiditySeconds":1e308}"#, 43200),
        (#"{"user":"hugo","maxValiditySeconds":-1e19}"#, nil), (#"{"user":"hugo","maxValiditySeconds":1.5}"#, nil),
        (#"{"user":"hugo","maxValiditySeconds":600}"#, 600), (#"{"user":"hugo","maxValiditySeconds":"600"}"#, nil),
    ] as [(String, Int?)])
    func aWebhooksValidityIsAnyNumberWithoutATrap(_ answer: String, _ validity: Int?) throws {
        let identity = try Webhook.identity(from: Array(answer.utf8), now: f.now)
        #expect(identity.maxValiditySeconds == validity)
        #expect(identity.expiresAt <= f.now.addingTimeInterval(43200))
    }

    @Test func malformedTokens() async {
        for token in ["", "a.b", "a.b.c.d", "....", "eyJ.eyJ.x", String(repeating: "a", count: 20000)] {
            #expect(await error { () async throws(IdentityError) in try await f.verify(token) }?.code == "InvalidIdentityToken", "\(token.prefix(20))")
        }
    }
}

@Suite("role rules")
struct RoleRuleTests {
    static let settings = AuthenticationSettings(
        allowAnonymous: false, providers: [],
        roleRules: [
            RoleRule(claim: "groups", match: .contains, value: "edit", role: "readwrite"),
            RoleRule(claim: "email", match: .like, value: "*@admin.example.com", role: "admin"),
            RoleRule(claim: "tier", match: .equals, value: "gold", role: "gold"),
            RoleRule(claim: "dept", match: .startsWith, value: "eng-", role: "eng"),
        ],
        defaultRole: "isolated")

    typealias RoleCase = (claims: [String: JSONValue], requested: String?, expected: String?)
    static let editors: [String: JSONValue] = ["groups": .array([.string("editors")])]
    static let roleCases: [RoleCase] = [
        (["groups": .array([.string("staff"), .string("editors")])], nil, "readwrite"),
        (["groups": .array([.string("staff")])], nil, "isolated"),
        (["email": .string("root@admin.example.com")], nil, "admin"),
        (["email": .string("root@admin.example.com.evil")], nil, "isolated"),
        (["tier": .string("gold")], nil, "gold"),
        (["tier": .string("golden")], nil, "isolated"),
        (["dept": .string("eng-web")], nil, "eng"),
        (["groups": .array([.string("editors")]), "tier": .string("gold")], nil, "readwrite"),
        (editors, "isolated", "isolated"),
        (editors, "readwrite", "readwrite"),
        (editors, "admin", nil),
        ([:], "readwrite", nil),
        (["tier": .number(1)], nil, "isolated"),
    ]

    @Test(arguments: roleCases)
    func roles(_ claims: [String: JSONValue], _ requested: String?, _ expected: String?) {
        #expect((try? Self.settings.role(for: claims, requested: requested)) == expected)
    }

    @Test func withoutADefaultRoleAnUnmatchedCallerIsRefused() {
        var settings = Self.settings
        settings.defaultRole = nil
        #expect(throws: IdentityError.self) { try settings.role(for: [:], requested: nil) }
    }

    @Test(arguments: [("*", "", true), ("a*c", "abc", true), ("a?c", "abc", true), ("a?c", "ac", false),
                      ("*@x.com", "me@x.com", true), ("*@x.com", "me@x.com.y", false), ("a**b", "ab", true)])
    func like(_ pattern: String, _ text: String, _ expected: Bool) {
        #expect(RoleRule.glob(Array(pattern.unicodeScalars), Array(text.unicodeScalars)) == expected)
    }
}

@Suite("JWKS cache")
struct JWKSCacheTests {
    final class Source: Sendable {
        let body = Mutex<String?>(nil)
        let fetches = Mutex(0)
        func fetch(_ url: String) async throws -> [UInt8] {
            fetches.withLock { $0 += 1 }
            guard let body = body.withLock({ $0 }) else { throw URLError(.cannotConnectToHost) }
            return Array(body.utf8)
        }
    }

    final class Clock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_900_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
    }

    @Test func unknownKidsRefetchAtMostOncePerCooldownAndAStaleSetKeepsServing() async throws {
        let f = Fixture()
        let source = Source(), clock = Clock()
        source.body.withLock { $0 = f.jwksJSON }
        let cache = JWKSCache(provider: f.provider, fetch: { try await source.fetch($0) }, refreshInterval: 3600,
                              unknownKeyCooldown: 30, clock: { clock.now.withLock { $0 } })
        _ = try await cache.keys(for: "k1")
        _ = try await cache.keys(for: "k1")
        #expect(source.fetches.withLock { $0 } == 1)
        // A flood of unknown kids: one refetch, then nothing until the cooldown passes.
        for i in 0..<100 { _ = try await cache.keys(for: "unknown-\(i)") }
        #expect(source.fetches.withLock { $0 } == 1, "the first fetch was less than the cooldown ago")
        clock.advance(31)
        for i in 0..<100 { _ = try await cache.keys(for: "unknown-\(i)") }
        #expect(source.fetches.withLock { $0 } == 2)
        // Rotation: the provider publishes k2; after the cooldown a token naming k2 finds it.
        source.body.withLock { $0 = #"{"keys":[\#(Fixture.jwk(f.otherKey, kid: "k2"))]}"# }
        clock.advance(31)
        let rotated = try await cache.keys(for: "k2")
        #expect(rotated.keys.first?.keyIdentifier?.string == "k2")
        // The provider goes away: the stale set keeps serving after its refresh interval.
        source.body.withLock { $0 = nil }
        clock.advance(7200)
        let stale = try await cache.keys(for: "k2")
        #expect(stale.keys.first?.keyIdentifier?.string == "k2")
    }

    @Test func withNothingCachedAnUnreachableProviderIsACommunicationError() async {
        let f = Fixture()
        let source = Source()
        let cache = JWKSCache(provider: f.provider, fetch: { try await source.fetch($0) })
        do {
            _ = try await cache.keys(for: "k1")
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == "IDPCommunicationError")
        }
    }

    @Test func discoveryFindsTheKeySet() async throws {
        var f = Fixture()
        f.provider.jwksURL = nil
        f.provider.discoveryURL = "https://login.example.com/.well-known/openid-configuration"
        let jwks = f.jwksJSON
        let cache = JWKSCache(provider: f.provider, fetch: { url in
            if url.hasSuffix("openid-configuration") {
                return Array(#"{"issuer":"https://login.example.com","jwks_uri":"https://login.example.com/keys"}"#.utf8)
            }
            #expect(url == "https://login.example.com/keys")
            return Array(jwks.utf8)
        })
        #expect(try await cache.keys(for: "k1").keys.count == 1)
    }
}

@Suite("identity verifier")
struct IdentityVerifierTests {
    @Test func aVerifiedTokenIsReusedUntilItExpiresAndNotAfter() async throws {
        let f = Fixture()
        let jwks = f.jwksJSON
        let settings = AuthenticationSettings(allowAnonymous: false, providers: [f.provider], roleRules: [], defaultRole: nil)
        let verifier = IdentityVerifier(settings: settings, fetch: { _ in Array(jwks.utf8) })
        let token = try await f.token(TestClaims(exp: f.now.timeIntervalSince1970 + 600))
        #expect(try await verifier.verify(token, now: f.now).subject == "alice")
        #expect(try await verifier.verify(token, now: f.now.addingTimeInterval(300)).subject == "alice")
        do {
            _ = try await verifier.verify(token, now: f.now.addingTimeInterval(700))
            Issue.record("an expired token verified from the cache")
        } catch {
            #expect(error == .expired)
        }
        // A token from an issuer no provider has is refused before any key is fetched.
        let stranger = try await f.token(TestClaims(iss: "https://other.example.com"))
        await #expect(throws: IdentityError.self) { try await verifier.verify(stranger, now: f.now) }
    }
}
