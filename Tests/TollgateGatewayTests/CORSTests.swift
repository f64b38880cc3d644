import Testing
import TollgateCORS
@testable import TollgateConfig
@testable import TollgateGateway
import TollgateIdentity

@Suite struct CORSTests {
    @Test(arguments: [
        ("*", "https://anything.example", true),
        ("https://app.example.com", "https://app.example.com", true),
        ("https://app.example.com", "https://app.example.com:8443", false),
        ("https://app.example.com", "http://app.example.com", false),
        ("https://*.example.com", "https://a.b.example.com", true),
        ("https://*.example.com", "https://example.com", false),
        ("https://*.example.com", "https://evil.com/.example.com", false),
        ("http://localhost:*", "http://localhost:3000", true),
    ])
    func originPatterns(pattern: String, origin: String, matches: Bool) {
        #expect(CORSRule.matches(pattern, origin) == matches)
    }

    @Test func ruleAdmitsMethodsAndRequestedHeaders() {
        let rule = CORSRule(allowedOrigins: ["https://app.example.com"], allowedMethods: ["GET", "PUT"],
                            allowedHeaders: ["Content-Type", "x-amz-*"], exposeHeaders: ["x-amz-version-id"], maxAgeSeconds: 60)
        #expect(rule.admits(origin: "https://app.example.com", method: "PUT", requestHeaders: ["content-type", "X-Amz-Date"]))
        #expect(!rule.admits(origin: "https://app.example.com", method: "DELETE"))
        #expect(!rule.admits(origin: "https://other.example.com", method: "GET"))
        #expect(!rule.admits(origin: "https://app.example.com", method: "PUT", requestHeaders: ["authorization"]))
        #expect(rule.allowOrigin(for: "https://app.example.com") == "https://app.example.com")
        #expect(CORSRule(allowedOrigins: ["*"], allowedMethods: ["GET"]).allowOrigin(for: "https://x") == "*")
    }

    @Test func settingsParse() throws {
        let settings = try CORSSettings.parse(.object([
            "Gateway": .array([.object(["AllowedOrigins": .array([.string("https://app.example.com")]), "AllowedMethods": .array([.string("GET")]),
                                        "MaxAgeSeconds": .number(600)])]),
            "TokenEndpoint": .array([.string("https://app.example.com")]),
        ]), file: "config.json")
        #expect(settings.gateway.count == 1 && settings.gateway[0].maxAgeSeconds == 600)
        #expect(settings.tokenEndpointAdmits("https://app.example.com") && !settings.tokenEndpointAdmits("https://evil.example"))
        #expect(try CORSSettings.parse(nil, file: "c") == CORSSettings())
    }

    /// Each mistake is refused with the key that holds it.
    @Test(arguments: [
        (JSONValue.string("yes"), "CORS must be an object"),
        (.object(["Gateway": .object([:])]), "CORS.Gateway must be an array"),
        (.object(["Origins": .array([])]), "CORS: unknown key \"Origins\""),
        (.object(["Gateway": .array([.object(["AllowedOrigins": .array([.string("app.example.com")]), "AllowedMethods": .array([.string("GET")])])])]),
         "CORS.Gateway[0].AllowedOrigins: \"app.example.com\" is not an origin"),
        (.object(["Gateway": .array([.object(["AllowedOrigins": .array([.string("*")]), "AllowedMethods": .array([.string("PATCH")])])])]),
         "CORS.Gateway[0].AllowedMethods: \"PATCH\""),
        (.object(["Gateway": .array([.object(["AllowedOrigins": .array([.string("*")])])])]), "CORS.Gateway[0] needs AllowedOrigins and AllowedMethods"),
        (.object(["Gateway": .array([.object(["AllowedOrigins": .array([.string("*")]), "AllowedMethods": .array([.string("GET")]), "MaxAgeSeconds": .number(-1)])])]),
         "CORS.Gateway[0].MaxAgeSeconds"),
        (.object(["TokenEndpoint": .array([.string("https://a.*.*.com")])]), "CORS.TokenEndpoint: \"https://a.*.*.com\""),
    ])
    func settingsRefusals(value: JSONValue, message: String) {
        do {
            _ = try CORSSettings.parse(value, file: "config.json")
            Issue.record("accepted: \(value)")
        } catch {
            #expect(error.message.hasPrefix(message), "\(error.message)")
        }
    }
}
