import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
@testable import TollgateHTTP
import TollgateMemoryStore
import TollgateStore
import TollgateToken
@testable import TollgateServer
@testable import TollgateTokenService

private let fixedNow = Date(timeIntervalSince1970: 1_795_000_000)

private func app(_ fixture: Fixture, log: CapturedLog = CapturedLog()) -> some ApplicationProtocol {
    Application(router: buildTokenRouter(state: fixture.state), logger: log.logger())
}

@Test("token endpoint paths and methods", arguments: ["/", "/sts/getkey", "/sts/getsts"], [HTTPRequest.Method.get, .post])
func tokenShape(path: String, method: HTTPRequest.Method) async throws {
    let fixture = try Fixture(now: { fixedNow })
    defer { fixture.remove() }
    try await app(fixture).test(.router) { client in
        try await client.execute(uri: path, method: method) { response in
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
            let body = String(buffer: response.body)
            // Field order and types exactly as the OSS mobile SDKs' sample server prints them.
            let pattern = #"^\{"StatusCode":200,"AccessKeyId":"STS\.[A-Za-z0-9]{24}","AccessKeySecret":"[A-Za-z0-9_-]{40,}","SecurityToken":"TG1\.[^"]+","Expiration":"2026-11-18T11:21:40Z"\}$"#
            #expect(body.range(of: pattern, options: .regularExpression) != nil, "\(body)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            #expect(json["StatusCode"] as? Int == 200)
            let token = try #require(json["SecurityToken"] as? String)
            let verified = try fixture.state.snapshot.tokens.verify(token, now: fixedNow)
            #expect(verified.secret == json["AccessKeySecret"] as? String)
            #expect(verified.claims.accessKeyId == json["AccessKeyId"] as? String)
            #expect(verified.claims.role == "default")
        }
    }
}

@Test func unknownPathAnswers404InTheJSONShape() async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    try await app(fixture).test(.router) { client in
        try await client.execute(uri: "/nope", method: .get) { response in
            #expect(response.status == .notFound)
            #expect(String(buffer: response.body) == #"{"StatusCode":404,"ErrorCode":"NotFound","ErrorMessage":"No such endpoint: /nope"}"#)
        }
        try await client.execute(uri: "/sts/getkey", method: .delete) { response in
            #expect([.notFound, .methodNotAllowed].contains(response.status))
            let json = try #require(try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8)) as? [String: Any])
            #expect(json["StatusCode"] as? Int == Int(response.status.code))
            #expect(json["ErrorCode"] is String)
        }
    }
}

@Test func healthz() async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    try await app(fixture).test(.router) { client in
        try await client.execute(uri: "/healthz", method: .get) { response in
            #expect(response.status == .ok)
            #expect(String(buffer: response.body).contains(#""status":"ok""#))
            #expect(!String(buffer: response.body).contains("backend"), "no store, no backend reported")
        }
    }
}

@Test func healthzReportsTheBackend() async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    for (health, word) in [(StoreHealth.ok, "ok"), (.unreachable(reason: "connection refused"), "unreachable")] {
        var state = fixture.state
        state.store = HookedStore(base: MemoryObjectStore(), reportedHealth: health)
        try await Application(router: buildTokenRouter(state: state)).test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ok","roles":1,"backend":"\#(word)"}"#)
            }
        }
    }
}

/// With the audit file on (as `tollgate serve` always has it), the file is the record of an issue
/// and the `token issued` line repeats it at `debug` only; without one the line is the record, at `info`.
@Test(arguments: [true, false])
func issuedLineLevelFollowsTheAuditFile(audited: Bool) async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    var state = fixture.state
    let audit = TokenAuditLog(dataDirectory: fixture.directory, logger: Logger(label: "test"), pool: .singleton)
    if audited { state.tokenAudit = audit }
    let log = CapturedLog()
    let body = try await Application(router: buildTokenRouter(state: state), logger: log.logger()).test(.router) { client in
        try await client.execute(uri: "/", method: .get) { String(buffer: $0.body) }
    }
    let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    let accessKeyId = try #require(json["AccessKeyId"] as? String)
    let lines = log.all.filter { $0.contains("token issued") }
    #expect(lines.count == 1 && lines[0].contains(accessKeyId))
    #expect(lines.first?.hasPrefix(audited ? "debug token issued" : "info token issued") == true, "\(lines)")
    audit.flush()
    let recorded = (try? String(contentsOfFile: audit.path, encoding: .utf8)) ?? ""
    #expect(recorded.contains(accessKeyId) == audited)
}

@Test func issuedTokensAreLoggedWithoutSecrets() async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    let log = CapturedLog()
    let bodies = try await app(fixture, log: log).test(.live) { client in
        var bodies: [String] = []
        for _ in 0..<3 {
            bodies.append(try await client.execute(uri: "/", method: .get) { String(buffer: $0.body) })
        }
        return bodies
    }
    let issued = try bodies.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    let lines = log.all.filter { $0.contains("token issued") }
    #expect(lines.count == 3)
    for credentials in issued {
        let accessKeyId = try #require(credentials["AccessKeyId"] as? String)
        let secret = try #require(credentials["AccessKeySecret"] as? String)
        let token = try #require(credentials["SecurityToken"] as? String)
        let line = try #require(lines.first { $0.contains(accessKeyId) })
        #expect(line.contains("token.role=default"))
        #expect(line.contains("token.expiration="))
        #expect(line.contains("client.address=127.0.0.1"))
        #expect(line.contains("token.subject="))
        // No line holds the secret, the whole token, or the token's signature or claims part.
        for part in token.split(separator: ".").dropFirst(2) {
            #expect(!log.text.contains(part))
        }
        #expect(!log.text.contains(secret))
    }
    #expect(!log.text.contains(fixture.state.snapshot.root.accessKeySecret))
}

@Test func logLinesHaveSortedKeysEventOverridesAndQuotedValues() {
    var line: [UInt8] = []
    LogOutput.appendEntry(
        level: .info, label: "tollgate", message: "token issued",
        metadata: ["token.role": "default", "client.address": "127.0.0.1", "note": "two words", "hb.request.id": "event"],
        context: ["hb.request.id": "context", "a.first": .stringConvertible(42), "list": ["x", "y"]],
        to: &line
    )
    #expect(String(decoding: line, as: UTF8.self)
        == #"info tollgate: token issued a.first=42 client.address=127.0.0.1 hb.request.id=event list="[\"x\", \"y\"]" note="two words" token.role=default"#)
}

@Test("the log thread writes lines soon after they arrive, in order, after idling")
func logLinesReachTheirDescriptor() throws {
    var ends: [Int32] = [0, 0]
    #expect(pipe(&ends) == 0)
    defer { close(ends[0]); close(ends[1]) }
    let output = LogOutput(fileDescriptor: ends[1])
    var received: [UInt8] = []
    func read(until expected: Int) {
        // Bounded: 100 polls of 50 ms.
        for _ in 0..<100 where received.count < expected {
            var poller = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(ends[0], $0.baseAddress, $0.count) }
            if count > 0 { received += chunk[..<count] }
        }
    }
    output.append(Array("first".utf8))
    output.append(Array("second".utf8))
    read(until: 13)
    #expect(String(decoding: received, as: UTF8.self) == "first\nsecond\n")
    // After the buffer was written, a line arriving later wakes the thread again.
    usleep(100_000)
    output.append(Array("third".utf8))
    read(until: 19)
    #expect(String(decoding: received, as: UTF8.self) == "first\nsecond\nthird\n")
}

@Test("control characters never reach a log line raw", arguments: [
    ("key\r\ninfo tollgate: forged", #"k="key\r\ninfo tollgate: forged""#),
    ("\u{1B}[31mred\u{1B}[0m", #"k="\x1b[31mred\x1b[0m""#),
    ("del\u{7F}", #"k="del\x7f""#),
    ("tab\there", #"k="tab\there""#),
    ("bell\u{07}", #"k="bell\x07""#),
    ("quote\"back\\slash", #"k="quote\"back\\slash""#),
    ("plain/key.txt", "k=plain/key.txt"),
    ("日本語", "k=日本語"),
])
func controlCharactersAreEscaped(value: String, rendered: String) {
    var line: [UInt8] = []
    LogOutput.appendEntry(level: .info, label: "tollgate", message: "m", metadata: ["k": .string(value)], context: [:], to: &line)
    #expect(!line.contains { $0 < 0x20 || $0 == 0x7F })
    #expect(String(decoding: line, as: UTF8.self) == "info tollgate: m " + rendered)
}

@Test func messagesAndKeysAreEscapedToo() {
    var line: [UInt8] = []
    LogOutput.appendEntry(
        level: .error, label: "tollgate", message: "failed for\nwarning forged", metadata: ["a\rb": "v"], context: [:], to: &line
    )
    #expect(String(decoding: line, as: UTF8.self) == #"error tollgate: failed for\nwarning forged a\rb=v"#)
}

@Test("IPv4 client addresses", arguments: ["0.0.0.0", "127.0.0.1", "10.20.30.40", "192.168.100.9", "255.255.255.255", "1.0.10.100"])
func dottedQuad(address: String) throws {
    let socket = try SocketAddress(ipAddress: address, port: 7080)
    guard case .v4(let v4) = socket else { Issue.record("not IPv4"); return }
    #expect(TollgateRequestContext.dottedQuad(v4.address.sin_addr) == address)
    #expect(socket.ipAddress == address, "the same text as NIO's own formatting")
}

@Test("LOG_FORMAT=json: one JSON object per line, every value escaped", arguments: [
    "plain/key.txt", "quote\"back\\slash", "key\r\ninfo forged", "\u{1B}[31mred", "del\u{7F}", "tab\there", "日本語 ✓",
])
func jsonLogLines(value: String) throws {
    var line: [UInt8] = []
    LogOutput.appendJSONEntry(
        time: Array("2026-11-23T17:00:00.000Z".utf8), level: .info, label: "tollgate", message: "denied \"\(value)\"",
        metadata: ["gateway.key": .string(value), "b.count": .stringConvertible(3)], context: ["a.request_id": "r1"], to: &line
    )
    #expect(!line.contains { $0 < 0x20 || $0 == 0x7F })
    let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
    #expect(object == [
        "time": "2026-11-23T17:00:00.000Z", "level": "info", "label": "tollgate", "message": "denied \"\(value)\"",
        "gateway.key": value, "b.count": "3", "a.request_id": "r1",
    ])
    let text = String(decoding: line, as: UTF8.self)
    #expect(text.hasPrefix(#"{"time":"2026-11-23T17:00:00.000Z","level":"info","label":"tollgate","message":"#))
    #expect(text.contains(#","a.request_id":"r1","b.count":"3","gateway.key":"#))
}

@Test func logFormatFromTheEnvironment() {
    #expect(LogOutput.Format(environment: nil) == .text)
    #expect(LogOutput.Format(environment: "json") == .json)
    #expect(LogOutput.Format(environment: "JSON") == .json)
    #expect(LogOutput.Format(environment: "yaml") == nil)
}

/// A body over the limit is a 413 in the caller's shape, never a 500: the token JSON, or the STS
/// API's XML when the request is an STS one (its query, or the start of its form body, names an
/// `Action`). The rest of the body is not read, so the answer ends the connection.
@Test("an oversized body is 413 in the caller's shape", arguments: [
    ("/", "application/json", Array(#"{"access_token":""#.utf8), false),
    ("/sts/getkey", "application/x-www-form-urlencoded", Array("access_token=".utf8), false),
    ("/", "application/x-www-form-urlencoded", Array("Action=AssumeRoleWithWebIdentity&WebIdentityToken=".utf8), true),
    ("/?Action=AssumeRoleWithWebIdentity", "application/x-www-form-urlencoded", Array("WebIdentityToken=".utf8), true),
])
func oversizedBodiesAre413(path: String, contentType: String, start: [UInt8], sts: Bool) async throws {
    let fixture = try Fixture()
    defer { fixture.remove() }
    let body = ByteBuffer(bytes: start + [UInt8](repeating: UInt8(ascii: "a"), count: 1_048_576))
    try await app(fixture).test(.router) { client in
        try await client.execute(uri: path, method: .post, headers: [.contentType: contentType], body: body) { response in
            #expect(response.status == .contentTooLarge)
            #expect(response.headers[.connection] == "close")
            let text = String(buffer: response.body)
            if sts {
                #expect(text.contains("<ErrorResponse") && text.contains("<Code>RequestTooLarge</Code>"), "\(text)")
            } else {
                #expect(text == #"{"StatusCode":413,"ErrorCode":"RequestTooLarge","ErrorMessage":"The request body is larger than 65536 bytes."}"#)
            }
        }
    }
}
