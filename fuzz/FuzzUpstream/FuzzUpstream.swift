// libFuzzer target: what Tollgate reads from an upstream STS and what it sends it.
// Input: a mode byte, a status byte, then a body. Modes: Alibaba's JSON answer, the AWS query
// API's XML answer (both read with any status), or a policy file made into a session-policy
// template. An answer read as credentials has every field; a failure's code is a short label
// and its message names the upstream and stays short (no body is echoed whole). A template
// rendered with a value for each of its variables is JSON (RFC 8259), whatever the values hold.
import TollgatePolicy
import TollgateUpstream

private let statuses = [200, 400, 403, 404, 429, 500, 502, 503]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUpstream(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let body = Array(bytes[2...])
    let status = statuses[Int(bytes[1]) % statuses.count]
    switch bytes[0] % 3 {
    case 0: check(AliyunSTS.parseAssumeRole(status: status, body: body, upstream: "fuzz"), status: status)
    case 1: check(AWSSTS.parseAssumeRole(status: status, body: body, upstream: "fuzz"), status: status)
    default:
        guard let text = String(validating: body, as: UTF8.self),
              let template = try? SessionPolicyTemplate.make(text: text, file: "fuzz", variables: ["BUCKET_NAME": "b"]) else { return 0 }
        var values: [String: String] = [:]
        for (index, key) in template.variables.enumerated() { values[key] = ["al\"ice", "b\\o\nb", "日本", "\u{1}x"][index % 4] }
        guard let rendered = try? template.render(values) else { preconditionFailure("every variable had a value") }
        precondition(rendered.utf8.count >= template.fixedByteCount)
        // RFC 8259, strictly, by the parser config.json and policy files go through (Foundation's
        // would refuse numbers beyond a Double, which JSON allows).
        precondition(JSONSyntax.firstError(in: Array(rendered.utf8)) == nil, "rendered policy is not JSON: \(rendered)")
    }
    return 0
}

private func check(_ result: Result<UpstreamCredentials, UpstreamFailure>, status: Int) {
    switch result {
    case .success(let credentials):
        precondition((200..<300).contains(status))
        precondition(!credentials.accessKeyId.isEmpty && !credentials.accessKeySecret.isEmpty && !credentials.securityToken.isEmpty)
    case .failure(let failure):
        precondition(!failure.code.isEmpty && failure.code.utf8.count <= 64)
        precondition(failure.message.contains("fuzz"))
        precondition(failure.message.utf8.count <= 512, "message of \(failure.message.utf8.count) bytes")
        precondition([502, 503, 504].contains(failure.httpStatus))
    }
}
