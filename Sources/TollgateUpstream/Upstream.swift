import Foundation

/// The protocols an upstream STS speaks.
public enum UpstreamKind: String, Sendable, CaseIterable, Hashable {
    /// Alibaba Cloud STS: RPC-style `AssumeRole` (version 2015-04-01), HMAC-SHA1 signature 1.0,
    /// JSON answers.
    case aliyunSTS = "aliyun-sts"
    /// AWS STS and S3-compatible STSs (Ceph RGW, MinIO): query-API `AssumeRole` (2011-06-15),
    /// SigV4 with service `sts`, XML answers.
    case awsSTS = "aws-sts"

    /// The longest session policy the upstream takes, in bytes of its minified JSON. Alibaba
    /// documents 1 to 2,048 characters for `Policy`; AWS 2,048 characters of plain text for a
    /// session policy (before its own packing). Bytes are never fewer than characters.
    public var defaultMaxPolicyBytes: Int { 2048 }

    /// The longest `RoleSessionName`: Alibaba documents 2 to 32 characters (newer pages 64; 32
    /// works with both), AWS 2 to 64.
    public var maxSessionNameLength: Int {
        switch self {
        case .aliyunSTS: 32
        case .awsSTS: 64
        }
    }

    /// The policy dialect the upstream reads: `oss:` actions and `acs:` resources (RAM,
    /// `"Version": "1"`), or `s3:` and `arn:aws:s3:::` (IAM, `"2012-10-17"`).
    public var policyDialect: PolicyDialect {
        switch self {
        case .aliyunSTS: .ram
        case .awsSTS: .iam
        }
    }
}

/// RAM (Alibaba) or IAM (AWS and S3-compatible stores).
public enum PolicyDialect: Sendable {
    case ram, iam
}

/// `http(s)://host[:port]`, as config.json names an upstream's endpoint. Requests go to `/`.
public struct UpstreamEndpoint: Sendable, Hashable, CustomStringConvertible {
    public let scheme: String
    public let host: String
    public let port: Int?

    /// Parses `text`; nil unless it is `http://` or `https://`, a host, an optional port and at
    /// most a trailing `/` (an STS answers at its root).
    public init?(_ text: String) {
        let lower = text.lowercased()
        let scheme: String
        if lower.hasPrefix("https://") { scheme = "https" } else if lower.hasPrefix("http://") { scheme = "http" } else { return nil }
        var rest = Substring(text.dropFirst(scheme.count + 3))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#"), !rest.contains("@") else { return nil }
        var host = rest
        var port: Int?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[...close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let value = Int(after.dropFirst()), (1...65535).contains(value) else { return nil }
                port = value
            }
        } else if let colon = rest.lastIndex(of: ":") {
            guard let value = Int(rest[rest.index(after: colon)...]), (1...65535).contains(value) else { return nil }
            host = rest[..<colon]
            port = value
        }
        guard !host.isEmpty, host.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "%" }) else { return nil }
        self.scheme = scheme
        self.host = String(host).lowercased()
        self.port = port
    }

    /// The `Host` header: the port only when it is not the scheme's default, as HTTP clients send it.
    public var hostHeader: String {
        guard let port, port != (scheme == "https" ? 443 : 80) else { return host }
        return "\(host):\(port)"
    }

    /// `scheme://host[:port]/`.
    public var url: String { "\(scheme)://\(hostHeader)/" }

    public var description: String { url }
}

/// The long-term keys Tollgate signs its calls to an upstream with. Never printed.
public struct UpstreamKeys: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let accessKeyID: String
    public let accessKeySecret: String

    public init(accessKeyID: String, accessKeySecret: String) {
        self.accessKeyID = accessKeyID
        self.accessKeySecret = accessKeySecret
    }

    public var description: String { "UpstreamKeys(accessKeyID: \(accessKeyID), accessKeySecret: redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["accessKeyID": accessKeyID]) }
}

/// What `AssumeRole` is asked for.
public struct AssumeRoleParameters: Sendable, Equatable {
    /// `acs:ram::ACCOUNT:role/NAME` or `arn:aws:iam::ACCOUNT:role/NAME`.
    public var roleArn: String
    public var sessionName: String
    /// The rendered, minified session policy; nil sends none (the role's own permissions).
    public var policy: String?
    public var durationSeconds: Int

    public init(roleArn: String, sessionName: String, policy: String?, durationSeconds: Int) {
        self.roleArn = roleArn
        self.sessionName = sessionName
        self.policy = policy
        self.durationSeconds = durationSeconds
    }
}

/// Temporary credentials an upstream minted. Never printed.
public struct UpstreamCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let accessKeyId: String
    public let accessKeySecret: String
    public let securityToken: String
    /// When they stop working, as the upstream said (whole seconds).
    public let expiration: Date

    public init(accessKeyId: String, accessKeySecret: String, securityToken: String, expiration: Date) {
        self.accessKeyId = accessKeyId
        self.accessKeySecret = accessKeySecret
        self.securityToken = securityToken
        self.expiration = expiration
    }

    public var description: String { "UpstreamCredentials(accessKeyId: \(accessKeyId), expiration: \(expiration), secrets redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["accessKeyId": accessKeyId, "expiration": expiration]) }
}

/// One HTTP request to an upstream, built and signed; the server only sends it.
public struct UpstreamHTTPRequest: Sendable, Equatable {
    public var method: String
    public var url: String
    /// In order; `Host` included (it was signed).
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    /// The form fields of the body, decoded (for tests and the stand-ins' checks).
    public var formFields: [(name: String, value: String)] {
        String(decoding: body, as: UTF8.self).split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ s: Substring) -> String { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
            return (decoded(parts[0]), parts.count > 1 ? decoded(parts[1]) : "")
        }
    }
}

/// The most of an upstream's answer that is read: a credentials answer is about 2 KiB, an
/// error a few hundred bytes.
public let maxUpstreamAnswerBytes = 64 * 1024
