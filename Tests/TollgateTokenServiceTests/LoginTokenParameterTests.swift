import Testing
@testable import TollgateTokenService

@Suite("the login token in an Authorization header")
struct LoginTokenParameterTests {
    static let cases: [(value: String, token: String?)] = [
        ("Bearer eyJhbGciOi.x.y", "eyJhbGciOi.x.y"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("BeArEr abc", "abc"),
        ("Bearer    abc", "abc"),
        ("Bearer \t abc", "abc"),
        ("Bearer abc def", "abc def"),
        ("Bearer ", nil),
        ("Bearer \t", nil),
        ("Bearer", nil),
        ("Bearerabc", nil),
        ("Bearer\tabc", nil),
        ("Bearer\u{0}abc", nil),
        ("Bearer@abc", nil),
        ("Bearex abc", nil),
        ("Basic dXNlcjpwYXNz", nil),
        ("AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=00", nil),
        ("", nil),
        ("Béarer abc", nil),
        ("Bearer é", "é"),
    ]

    @Test(arguments: cases)
    func bearerToken(_ value: String, _ token: String?) {
        #expect(TokenController.Parameters.bearerToken(value) == token)
    }
}
