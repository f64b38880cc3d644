/// The outcome of authorising one request.
public struct PolicyDecision: Sendable, Hashable, CustomStringConvertible {
    public enum Outcome: String, Sendable, Hashable {
        case allow
        /// A Deny statement matched; it beats every Allow.
        case explicitDeny
        /// No statement allowed the request.
        case implicitDeny
    }

    public var outcome: Outcome
    /// The statement that decided (the first matching Deny, else the first matching Allow);
    /// nil for an implicit deny.
    public var statement: StatementReference?
    /// For an implicit deny: the policy file in which no statement allowed the request.
    public var policyFile: String?

    public var isAllowed: Bool { outcome == .allow }

    /// `Allow`, `Deny (explicit)` or `Deny (implicit)`.
    public var summary: String {
        switch outcome {
        case .allow: "Allow"
        case .explicitDeny: "Deny (explicit)"
        case .implicitDeny: "Deny (implicit)"
        }
    }

    /// The summary and the deciding statement, e.g. `Allow by policy/all_policy.txt:2 (statement 1)`.
    public var description: String {
        if let statement { return "\(summary) by \(statement)" }
        if let policyFile { return "\(summary): no statement in \(policyFile) allows the request" }
        return summary
    }
}

extension Policy {
    /// Authorises `operation` on `bucket`/`key` (nil where the operation's level has none).
    public func evaluate(_ operation: GatewayOperation, bucket: String?, key: String?, context: PolicyContext) -> PolicyDecision {
        guard let resource = Self.resourceBytes(level: operation.resourceLevel, bucket: bucket, key: key) else {
            return PolicyDecision(outcome: .implicitDeny, statement: nil, policyFile: file)
        }
        return decide(operation, resource: resource, context: context)
    }

    /// Authorises one check (see ``GatewayOperation/requiredChecks(bucket:key:sourceBucket:sourceKey:)``).
    public func evaluate(_ check: PolicyCheck, context: PolicyContext) -> PolicyDecision {
        evaluate(check.operation, bucket: check.bucket, key: check.key, context: context)
    }

    /// The string resource patterns are matched against: empty for the service, `bucket` for a
    /// bucket, `bucket/key` for an object.
    static func resourceBytes(level: ResourceLevel, bucket: String?, key: String?) -> [UInt8]? {
        switch level {
        case .service:
            return []
        case .bucket:
            guard let bucket, !bucket.isEmpty else { return nil }
            return Array(bucket.utf8)
        case .object:
            guard let bucket, !bucket.isEmpty, let key else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(bucket.utf8.count + key.utf8.count + 1)
            bytes.append(contentsOf: bucket.utf8)
            bytes.append(UInt8(ascii: "/"))
            bytes.append(contentsOf: key.utf8)
            return bytes
        }
    }

    /// Explicit Deny beats Allow beats implicit deny.
    func decide(_ operation: GatewayOperation, resource: [UInt8], context: PolicyContext) -> PolicyDecision {
        var allowedBy: StatementReference?
        for statement in statements {
            guard statement.applies(operation, resource: resource, context: context) else { continue }
            if statement.effect == .deny {
                return PolicyDecision(outcome: .explicitDeny, statement: statement.reference, policyFile: nil)
            }
            if allowedBy == nil { allowedBy = statement.reference }
        }
        if let allowedBy { return PolicyDecision(outcome: .allow, statement: allowedBy, policyFile: nil) }
        return PolicyDecision(outcome: .implicitDeny, statement: nil, policyFile: file)
    }
}

extension Policy {
    /// Whether `operation` could be allowed on some object in `bucket`: an Allow statement
    /// lists it, its conditions hold, and one of its resources can match a key under
    /// `bucket/`. Deny statements are left to the decision per object. For an operation that
    /// is authorised per object only after its body is read (DeleteObjects): a caller who may
    /// act on nothing in the bucket is refused before a byte of the body is read.
    public func mayAllowSomeObject(_ operation: GatewayOperation, bucket: String, context: PolicyContext) -> Bool {
        var prefix = Array(bucket.utf8)
        prefix.append(UInt8(ascii: "/"))
        return statements.contains { statement in
            guard statement.effect == .allow, (statement.operationMask & operation.bit != 0) != statement.notAction else { return false }
            let resourceOK = statement.notResource || statement.resources.contains { resource in
                resource.pattern.resolved(in: context).map { globCanMatchPrefix($0, prefix) } ?? false
            }
            return resourceOK && statement.conditions.allSatisfy { $0.evaluate(context) ?? false }
        }
    }
}

extension CompiledStatement {
    /// Whether the statement matches the request. A policy variable with no value in the
    /// request never widens access: in an Allow statement the element it sits in fails, in a
    /// Deny statement it holds (so the Deny still applies).
    func applies(_ operation: GatewayOperation, resource: [UInt8], context: PolicyContext) -> Bool {
        guard (operationMask & operation.bit != 0) != notAction else { return false }

        let unresolvedResult = effect == .deny
        var matched = false, unresolved = false
        for r in resources {
            switch r.pattern.matches(resource, in: context) {
            case true?: matched = true
            case nil: unresolved = true
            case false?: break
            }
            if matched { break }
        }
        let resourceOK: Bool
        if notResource {
            resourceOK = unresolved ? unresolvedResult : !matched
        } else {
            resourceOK = matched || (unresolved && unresolvedResult)
        }
        guard resourceOK else { return false }

        for c in conditions {
            let result = c.evaluate(context) ?? unresolvedResult
            if !result { return false }
        }
        return true
    }
}

/// The permission of a session: the role's policy intersected with the session policy, if any.
/// A request is allowed only when both allow it; an explicit Deny in either denies it.
public struct EffectivePolicy: Sendable {
    public let role: Policy
    public let session: Policy?

    public init(role: Policy, session: Policy? = nil) {
        self.role = role
        self.session = session
    }

    public func evaluate(_ operation: GatewayOperation, bucket: String?, key: String?, context: PolicyContext) -> PolicyDecision {
        combine(role.evaluate(operation, bucket: bucket, key: key, context: context),
                session?.evaluate(operation, bucket: bucket, key: key, context: context))
    }

    public func evaluate(_ check: PolicyCheck, context: PolicyContext) -> PolicyDecision {
        evaluate(check.operation, bucket: check.bucket, key: check.key, context: context)
    }

    /// Authorises every check (for copy: read the source, write the target); the first
    /// non-allow decides, otherwise the last allow.
    public func evaluate(_ checks: [PolicyCheck], context: PolicyContext) -> PolicyDecision {
        var last = PolicyDecision(outcome: .implicitDeny, statement: nil, policyFile: role.file)
        for check in checks {
            last = evaluate(check, context: context)
            if !last.isAllowed { return last }
        }
        return last
    }

    /// See ``Policy/mayAllowSomeObject(_:bucket:context:)``; both policies must say yes.
    public func mayAllowSomeObject(_ operation: GatewayOperation, bucket: String, context: PolicyContext) -> Bool {
        role.mayAllowSomeObject(operation, bucket: bucket, context: context)
            && (session?.mayAllowSomeObject(operation, bucket: bucket, context: context) ?? true)
    }

    func combine(_ r: PolicyDecision, _ s: PolicyDecision?) -> PolicyDecision {
        guard let s else { return r }
        if r.outcome == .explicitDeny { return r }
        if s.outcome == .explicitDeny { return s }
        if r.outcome == .implicitDeny { return r }
        if s.outcome == .implicitDeny { return s }
        return r
    }
}
