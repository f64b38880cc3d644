import TollgatePolicy

/// What `policy check` says of a policy an upstream would refuse as a session policy: too large
/// once minified, or written in the other dialect (`s3:` actions, `arn:aws:` resources or
/// `"Version": "2012-10-17"` sent to Alibaba; `oss:`, `acs:` or `"1"` sent to AWS). Tollgate's
/// own engine reads both dialects, so such a policy loads and works on the gateway, but the
/// upstream's STS rejects it (or, for resources, grants nothing with it).
public enum UpstreamPolicyCheck {
    public static func warnings(_ template: SessionPolicyTemplate, file: String, upstream: String, kind: UpstreamKind,
                                maxPolicyBytes: Int) -> [PolicyDiagnostic] {
        let who = "the upstream \(upstream) (\(kind.rawValue))"
        var out: [PolicyDiagnostic] = []
        func warn(_ position: SourcePosition, _ message: String) {
            out.append(PolicyDiagnostic(file: file, line: position.line, column: position.column, message: message, severity: .warning))
        }
        let size = template.fixedByteCount
        if size > maxPolicyBytes {
            warn(SourcePosition(line: 1, column: 1),
                 "the session policy is \(size) bytes minified (before any ${…} value); \(who) takes at most \(maxPolicyBytes): every request for this role would be refused")
        }
        let (foreignAction, foreignResource, wantedVersions, dialectName): (String, String, [String], String) = switch kind.policyDialect {
        case .ram: ("s3:", "arn:", ["1"], "RAM (oss: actions, acs:oss: resources, \"Version\": \"1\")")
        case .iam: ("oss:", "acs:", ["2012-10-17", "2008-10-17"], "IAM (s3: actions, arn:aws:s3::: resources, \"Version\": \"2012-10-17\")")
        }
        if !template.version.isEmpty, !wantedVersions.contains(template.version) {
            warn(template.versionPosition, "Version \"\(template.version)\" is the other dialect's; \(who) reads \(dialectName)")
        }
        for action in template.actions where action.text.lowercased().hasPrefix(foreignAction) {
            warn(action.position, "action \"\(action.text)\" is the other dialect's; \(who) reads \(dialectName)")
        }
        for resource in template.resources where resource.text.lowercased().hasPrefix(foreignResource) {
            warn(resource.position, "resource \"\(resource.text)\" is the other dialect's; \(who) reads \(dialectName)")
        }
        return out
    }
}
