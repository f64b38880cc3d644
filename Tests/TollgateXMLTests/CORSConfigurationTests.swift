import Testing
import TollgateCORS
@testable import TollgateXML

private func parse(_ xml: String) throws(XMLReadError) -> CORSConfiguration {
    try CORSConfiguration.parse(Array(xml.utf8))
}

private func rules(_ body: String, vary: String = "") -> String {
    "<CORSConfiguration>" + body + vary + "</CORSConfiguration>"
}

@Test func corsConfigurationAsBoto3SendsIt() throws {
    // boto3's put_bucket_cors: S3's namespace, elements in its own order.
    let xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><CORSRule><ID>web</ID>
        <AllowedHeader>*</AllowedHeader><AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod>
        <AllowedOrigin>https://app.example.com</AllowedOrigin><AllowedOrigin> http://localhost:* </AllowedOrigin>
        <ExposeHeader>x-amz-meta-owner</ExposeHeader><MaxAgeSeconds>3000</MaxAgeSeconds></CORSRule>
        <CORSRule><AllowedMethod>GET</AllowedMethod><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>
        """
    let configuration = try parse(xml)
    #expect(configuration == CORSConfiguration(rules: [
        CORSRule(id: "web", allowedOrigins: ["https://app.example.com", "http://localhost:*"], allowedMethods: ["PUT", "GET"],
                 allowedHeaders: ["*"], exposeHeaders: ["x-amz-meta-owner"], maxAgeSeconds: 3000),
        CORSRule(allowedOrigins: ["*"], allowedMethods: ["GET"]),
    ]))
    #expect(configuration.refusal == nil)
}

@Test func corsConfigurationAsOss2SendsIt() throws {
    let xml = rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>HEAD</AllowedMethod><MaxAgeSeconds>0</MaxAgeSeconds></CORSRule>",
                    vary: "<ResponseVary>TRUE</ResponseVary>")
    let configuration = try parse(xml)
    #expect(configuration.responseVary == true)
    #expect(configuration.rules == [CORSRule(allowedOrigins: ["*"], allowedMethods: ["HEAD"], maxAgeSeconds: 0)])
    #expect(try parse(rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>")).responseVary == nil)
}

/// Not what S3's schema accepts: `MalformedXML`.
@Test(arguments: [
    "<CORSConfiguration/>",
    "<CORSConfiguration></CORSConfiguration>",
    "<CORSRules><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSRules>",
    rules("<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>"),
    rules("<CORSRule><AllowedOrigin> </AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"),
    rules("<CORSRule><AllowedOrigins>*</AllowedOrigins><AllowedMethod>GET</AllowedMethod></CORSRule>"),
    rules("<CORSRule><AllowedOrigin><Value>*</Value></AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>--1</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-2147483649</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>+5</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>1.5</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>2147483648</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>1</MaxAgeSeconds><MaxAgeSeconds>2</MaxAgeSeconds></CORSRule>"),
    rules("<CORSRule><ID>a</ID><ID>b</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>", vary: "<ResponseVary>yes</ResponseVary>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule><Other/>"),
    rules("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"),
])
func corsConfigurationMalformed(_ xml: String) {
    #expect(throws: XMLReadError.self) { try parse(xml) }
}

/// A negative MaxAgeSeconds is read, for the gateway to refuse in each dialect's way (S3's
/// schema: `MalformedXML`; OSS: `InvalidArgument`).
@Test func negativeMaxAgeIsReadAndNamed() throws {
    func rule(_ maxAge: String) -> String {
        "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>\(maxAge)</MaxAgeSeconds></CORSRule>"
    }
    let negative = try parse(rules(rule("60") + rule("-1")))
    #expect(negative.rules.map { $0.maxAgeSeconds } == [60, -1])
    #expect(negative.negativeMaxAgeSeconds == -1)
    #expect(try parse(rules(rule("-2147483648"))).negativeMaxAgeSeconds == -2_147_483_648)
    #expect(try parse(rules(rule("0"))).negativeMaxAgeSeconds == nil)
}

/// Well-formed, but refused by S3 with `InvalidRequest` and this message.
@Test(arguments: [
    ("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule>",
     "Found unsupported HTTP method in CORS config. Unsupported method is PATCH"),
    ("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod></CORSRule>",
     "Found unsupported HTTP method in CORS config. Unsupported method is get"),
    ("<CORSRule><AllowedOrigin>https://*.*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>",
     "AllowedOrigin \"https://*.*.example.com\" can not have more than one wildcard."),
    ("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>x-*-*</AllowedHeader></CORSRule>",
     "AllowedHeader \"x-*-*\" can not have more than one wildcard."),
    ("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><ExposeHeader>x-amz-*</ExposeHeader></CORSRule>",
     "ExposeHeader \"x-amz-*\" contains wildcard."),
    ("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><ExposeHeader>a b</ExposeHeader></CORSRule>",
     "ExposeHeader \"a b\" is not a header name."),
    ("<CORSRule><ID>\(String(repeating: "i", count: 256))</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>",
     "The ID of a CORS rule is longer than 255 characters."),
    (String(repeating: "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>", count: 101),
     "The CORS configuration has more than 100 rules."),
])
func corsConfigurationRefused(body: String, message: String) throws {
    let refusal = try parse(rules(body)).refusal
    #expect(refusal?.hasPrefix(message) == true, "\(refusal ?? "accepted")")
}

@Test func corsConfigurationLimits() throws {
    let rule = "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"
    let hundred = try parse(rules(String(repeating: rule, count: 100)))
    #expect(hundred.rules.count == 100 && hundred.refusal == nil)
    let id = try parse(rules("<CORSRule><ID>\(String(repeating: "i", count: 255))</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"))
    #expect(id.refusal == nil)
    // Past S3's 64 KiB the body is not read at all.
    let padded = rules(rule + "<!--" + String(repeating: " ", count: CORSConfiguration.maxBytes) + "-->")
    #expect(throws: XMLReadError.self) { try parse(padded) }
}
