import Testing
@testable import TollgatePolicy

struct DiagCase: CustomTestStringConvertible, Sendable {
    var name: String
    var text: String
    var line: Int
    var column: Int
    var fragment: String
    init(_ name: String, _ text: String, _ line: Int, _ column: Int, _ fragment: String) {
        self.name = name
        self.text = text
        self.line = line
        self.column = column
        self.fragment = fragment
    }
    var testDescription: String { name }
}

/// Loads `text` and returns its diagnostics (empty when it loads).
func diagnostics(_ text: String, file: String = "p.json", variables: [String: String] = [:]) -> [PolicyDiagnostic] {
    do {
        _ = try Policy.load(text: text, file: file, variables: variables)
        return []
    } catch {
        return error.diagnostics
    }
}

// Expected positions were computed independently (marker offsets in the text), not by this parser.
let diagnosticCases: [DiagCase] = [
    DiagCase("trailing comma", "{\"Version\":\"1\",}", 1, 16, "expected a string key"),
    DiagCase("missing colon", "{\"Version\" \"1\"}", 1, 12, "expected ':'"),
    DiagCase("bad literal", "{\"Version\":tru}", 1, 12, "invalid literal"),
    DiagCase("unterminated string", "{\"Version\":\"1", 1, 12, "unterminated string"),
    DiagCase("garbage after", "{\"Version\":\"1\"} x", 1, 17, "after the JSON document"),
    DiagCase("duplicate key", "{\"Version\":\"1\",\"Version\":\"1\"}", 1, 16, "duplicate key"),
    DiagCase("wrong version", "{\"Version\":\"2\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\"}]}", 1, 12, "unsupported Version"),
    DiagCase("numeric version", "{\"Version\":1,\"Statement\":{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\"}}", 1, 12, "unsupported Version"),
    DiagCase("effect permit", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Permit\",\"Action\":\"oss:*\",\"Resource\":\"*\"}]}", 1, 39, "Effect must be"),
    DiagCase("missing action", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Resource\":\"*\"}]}", 1, 29, "neither Action nor NotAction"),
    DiagCase("action and notaction", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"NotAction\":\"oss:PutObject\",\"Resource\":\"*\"}]}", 1, 64, "both Action"),
    DiagCase("missing resource", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\"}]}", 1, 29, "neither Resource nor NotResource"),
    DiagCase("resource and notresource", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"NotResource\":\"acs:oss:*:*:b\"}]}", 1, 79, "both Resource"),
    DiagCase("malformed resource", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":[\"*\",\"acs:ecs:*:*:b\"]}]}", 1, 80, "malformed resource"),
    DiagCase("malformed arn", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"arn:aws:s3:us-east-1::b\"}]}", 1, 75, "malformed resource"),
    DiagCase("empty resource tail", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"acs:oss:*:*:\"}]}", 1, 75, "malformed resource"),
    DiagCase("foreign action", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":[\"oss:GetObject\",\"ecs:RunInstances\"],\"Resource\":\"*\"}]}", 1, 73, "outside the oss: and s3: namespaces"),
    DiagCase("action no namespace", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"GetObject\",\"Resource\":\"*\"}]}", 1, 56, "malformed action"),
    DiagCase("action bad chars", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:Get Object\",\"Resource\":\"*\"}]}", 1, 56, "malformed action"),
    DiagCase("unknown operator", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"StringMatches\":{\"aws:username\":\"a\"}}}]}", 1, 92, "unknown condition operator"),
    DiagCase("numeric on ip", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"NumericLessThan\":{\"acs:SourceIp\":\"10\"}}}]}", 1, 111, "cannot be used with key"),
    DiagCase("ip on string", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"IpAddress\":{\"aws:username\":\"10.0.0.0/8\"}}}]}", 1, 105, "cannot be used with key"),
    DiagCase("bool on prefix", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"Bool\":{\"oss:Prefix\":\"true\"}}}]}", 1, 100, "cannot be used with key"),
    DiagCase("string on securetransport", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"StringEquals\":{\"aws:SecureTransport\":\"true\"}}}]}", 1, 108, "cannot be used with key"),
    DiagCase("numeric value", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"NumericLessThan\":{\"s3:max-keys\":\"ten\"}}}]}", 1, 125, "needs a number"),
    DiagCase("invalid cidr", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"IpAddress\":{\"aws:SourceIp\":[\"10.0.0.0/8\",\"10.0.0.0/33\"]}}}]}", 1, 134, "CIDR"),
    DiagCase("invalid ip", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"NotIpAddress\":{\"aws:SourceIp\":\"300.1.1.1\"}}}]}", 1, 123, "CIDR"),
    DiagCase("invalid date", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"DateLessThan\":{\"aws:CurrentTime\":\"2026-13-01T00:00:00Z\"}}}]}", 1, 126, "ISO 8601"),
    DiagCase("bool value", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"Bool\":{\"aws:SecureTransport\":\"yes\"}}}]}", 1, 122, "true or false"),
    DiagCase("null ifexists", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"NullIfExists\":{\"aws:username\":\"true\"}}}]}", 1, 92, "Null cannot"),
    DiagCase("unknown key namespace", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"*\",\"Condition\":{\"StringEquals\":{\"ec2:Region\":\"x\"}}}]}", 1, 108, "unknown condition key"),
    DiagCase("unknown variable", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"acs:oss:*:*:b/${foo}/*\"}]}", 1, 75, "unknown policy variable"),
    DiagCase("unterminated variable", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"oss:*\",\"Resource\":\"acs:oss:*:*:b/${aws:username/*\"}]}", 1, 75, "unterminated policy variable"),
    DiagCase("unknown element", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Actions\":\"oss:*\",\"Action\":\"oss:*\",\"Resource\":\"*\"}]}", 1, 47, "unknown statement element"),
    DiagCase("empty statement", "{\"Version\":\"1\",\"Statement\":[]}", 1, 28, "Statement is empty"),
    DiagCase("statement not object", "{\"Version\":\"1\",\"Statement\":[\"x\"]}", 1, 29, "must be an object"),
    DiagCase("missing statement", "{\"Version\":\"1\"}", 1, 1, "missing Statement"),
    DiagCase("not an object", "[\"Version\"]", 1, 1, "must be a JSON object"),
    DiagCase("empty action list", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":[],\"Resource\":\"*\"}]}", 1, 56, "Action is empty"),
    DiagCase("effect lowercase", "{\"Version\":\"1\",\"Statement\":[{\"Effect\":\"allow\",\"Action\":\"oss:*\",\"Resource\":\"*\"}]}", 1, 39, "Effect must be"),
]

@Suite("Policy parser diagnostics")
struct ParserDiagnosticTests {
    @Test("each problem is reported at its line:column", arguments: diagnosticCases)
    func diagnosticPosition(_ c: DiagCase) {
        let d = diagnostics(c.text)
        #expect(d.count == 1, "\(d)")
        guard let first = d.first else { return }
        #expect(first.file == "p.json")
        #expect(first.line == c.line)
        #expect(first.column == c.column)
        #expect(first.message.contains(c.fragment), "\(first.message)")
        #expect(first.description == "p.json:\(c.line):\(c.column): \(first.message)")
    }

    @Test func multiLineJSONErrorPosition() {
        let text = """
        {
          "Version": "1",
          "Statement": [
            {"Effect": "Allow" "Action": "oss:*", "Resource": "*"}
          ]
        }
        """
        let d = diagnostics(text)
        #expect(d.map { "\($0.line):\($0.column)" } == ["4:24"])
        #expect(d.first?.message.contains("expected ',' or '}'") == true)
    }

    @Test func everyProblemInAFileIsReported() {
        let text = """
        {
          "Version": "1",
          "Statement": [
            {
              "Effect": "Permit",
              "Action": ["oss:GetObject", "ecs:Describe"],
              "Resource": "acs:ecs:*:*:b"
            },
            {
              "Effect": "Allow",
              "Action": "oss:*",
              "Resource": "*",
              "Condition": {"NumericLessThan": {"aws:SourceIp": "10"}, "StringSmells": {"a:b": "x"}}
            }
          ]
        }
        """
        let d = diagnostics(text)
        #expect(d.map { "\($0.line):\($0.column)" } == ["5:17", "6:35", "7:19", "13:41", "13:64"])
    }

    @Test func unfilledPlaceholderNamesFileLineAndColumn() {
        let text = """
        {
          "Statement": [{"Effect": "Allow", "Action": "oss:GetObject",
            "Resource": ["acs:oss:*:*:$BUCKET_NAME/*", "acs:oss:*:*:$OTHER"]}],
          "Version": "1"
        }
        """
        let d = diagnostics(text, file: "policy/x.txt", variables: ["BUCKET": "nope"])
        #expect(d.map(\.description) == [
            "policy/x.txt:3:31: placeholder $BUCKET_NAME has no value (define BUCKET_NAME in the config's variables or pass --var BUCKET_NAME=VALUE)",
            "policy/x.txt:3:61: placeholder $OTHER has no value (define OTHER in the config's variables or pass --var OTHER=VALUE)",
        ])
    }

    @Test func positionsAfterAFilledPlaceholderStayInOriginalColumns() {
        // The bucket name is longer than the placeholder; the bad action after it is still
        // reported at its column in the file as written.
        let text = #"{"Version":"1","Statement":{"Effect":"Allow","Resource":"acs:oss:*:*:$BUCKET_NAME/*","Action":"ec2:X"}}"#
        let d = diagnostics(text, variables: ["BUCKET_NAME": "a-much-longer-bucket-name"])
        #expect(d.map { "\($0.line):\($0.column)" } == ["1:95"])
    }

    @Test func placeholderFilledValueIsUsed() throws {
        let text = #"{"Version":"1","Statement":{"Effect":"Allow","Resource":"acs:oss:*:*:$BUCKET_NAME/*","Action":"oss:GetObject"}}"#
        let p = try Policy.load(text: text, file: "p", variables: ["BUCKET_NAME": "photos"])
        #expect(p.evaluate(.getObject, bucket: "photos", key: "a", context: PolicyContext()).isAllowed)
        #expect(!p.evaluate(.getObject, bucket: "other", key: "a", context: PolicyContext()).isAllowed)
    }

    @Test func policyVariablesAreNotPlaceholders() throws {
        // `${aws:username}` and lowercase `$x` are not `$NAME` placeholders.
        let text = #"{"Version":"1","Statement":{"Effect":"Allow","Resource":"acs:oss:*:*:b/${aws:username}/$x","Action":"oss:GetObject"}}"#
        #expect(diagnostics(text).isEmpty)
    }

    @Test func columnsCountCharactersNotBytes() {
        let text = #"{"Version":"1","Statement":{"Sid":"é中","Effect":"Maybe","Action":"oss:*","Resource":"*"}}"#
        #expect(diagnostics(text).map { "\($0.line):\($0.column)" } == ["1:49"])
    }

    @Test(arguments: ["1", "2012-10-17", "2008-10-17"])
    func acceptedVersions(_ version: String) {
        #expect(diagnostics(#"{"Version":"\#(version)","Statement":{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).isEmpty)
    }

    @Test func singleStringsObjectsSidAndPrincipalAreAccepted() throws {
        let text = #"{"Version":"2012-10-17","Id":"x","Statement":{"Sid":"One","Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#
        let p = try Policy.load(text: text, file: "p")
        #expect(p.statementReferences.map(\.sid) == ["One"])
    }
}
