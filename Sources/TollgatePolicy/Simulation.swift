import Foundation

/// A problem with the simulator's input (not with a policy): exit code 2 in the CLI.
public struct SimulationInputError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The result of `tollgate policy simulate`.
public struct SimulationResult: Sendable {
    /// One decision per gateway operation the action names.
    public struct Entry: Sendable {
        public var operation: GatewayOperation
        public var decision: PolicyDecision
        /// A request of the action's own dialect can be this operation (an `s3:` action's
        /// OSS-only operations are not).
        public var inDialect: Bool
    }

    public var entries: [Entry]

    /// The answer to the question asked: allowed when every operation a request of the action's
    /// dialect can be is allowed (`s3:ListBucket` for S3 requests, without OSS's GetBucketInfo
    /// and GetBucketStat that a RAM policy names apart); otherwise the first refusal among
    /// them (explicit before implicit).
    public var decision: PolicyDecision {
        let asked = entries.filter(\.inDialect)
        if let deny = asked.first(where: { $0.decision.outcome == .explicitDeny }) { return deny.decision }
        if let deny = asked.first(where: { $0.decision.outcome == .implicitDeny }) { return deny.decision }
        return asked[0].decision
    }

    /// What the CLI prints: the decision, then one line per operation when the operations
    /// sharing the action name were decided differently (those of the other dialect marked).
    public var lines: [String] {
        var out = [decision.description]
        let outcomes = Set(entries.map(\.decision.outcome))
        if entries.count > 1 && outcomes.count > 1 {
            for e in entries {
                let note = e.inDialect ? "" : " (OSS requests only; not in the decision above)"
                out.append("  \(e.operation.rawValue) (\(e.operation.ossAction), \(e.operation.s3Action)): \(e.decision)\(note)")
            }
        }
        return out
    }
}

/// The policy simulator: `--action`, `--resource` and `--context KEY=VALUE` parsed into a request
/// and evaluated against a role policy and an optional session policy.
public enum PolicySimulator {
    /// Parses `acs:oss:*:*:bucket/key`, `arn:aws:s3:::bucket/key` (or just the bucket), or `*`
    /// for the service. The bucket is nil for the service.
    public static func parseResource(_ text: String) throws(SimulationInputError) -> (bucket: String?, key: String?) {
        var rest: Substring
        if text == "*" {
            return (nil, nil)
        } else if text.hasPrefix("acs:oss:") {
            let parts = text.dropFirst("acs:oss:".count).split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { throw SimulationInputError("malformed resource \"\(text)\": expected acs:oss:*:*:BUCKET[/KEY] or arn:aws:s3:::BUCKET[/KEY]") }
            rest = parts[2]
        } else if text.hasPrefix("arn:aws:s3:::") {
            rest = text.dropFirst("arn:aws:s3:::".count)
        } else {
            throw SimulationInputError("malformed resource \"\(text)\": expected acs:oss:*:*:BUCKET[/KEY] or arn:aws:s3:::BUCKET[/KEY]")
        }
        if rest.isEmpty || rest == "*" { return (nil, nil) }
        guard let slash = rest.firstIndex(of: "/") else { return (String(rest), nil) }
        let bucket = String(rest[..<slash])
        guard !bucket.isEmpty else { throw SimulationInputError("resource \"\(text)\" has an empty bucket name") }
        return (bucket, String(rest[rest.index(after: slash)...]))
    }

    /// Parses `KEY=VALUE` pairs; a key given several times becomes multi-valued. Sets
    /// `aws:CurrentTime`/`aws:EpochTime` from `now` unless given.
    public static func parseContext(_ pairs: [String], now: Date) throws(SimulationInputError) -> PolicyContext {
        var context = PolicyContext()
        for pair in pairs {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw SimulationInputError("context \"\(pair)\" is not KEY=VALUE")
            }
            context.add(String(pair[..<eq]), String(pair[pair.index(after: eq)...]))
        }
        if context.values(for: "aws:CurrentTime") == nil && context.values(for: "aws:EpochTime") == nil {
            context.setTime(now)
        }
        return context
    }

    /// Evaluates `action` (`oss:GetObject`, `s3:ListBucket`, …) on `resource`.
    ///
    /// The action (case-insensitive) is evaluated for every operation it names in its namespace
    /// (`s3:ListBucket` → listObjects, listObjectsV2, headBucket); an action the operation table
    /// does not know is bad input, with the likely intended one.
    public static func simulate(_ policy: EffectivePolicy, action: String, resource: String, context: PolicyContext) throws(SimulationInputError) -> SimulationResult {
        let (bucket, key) = try parseResource(resource)
        let operations = GatewayOperation.operations(forAction: action)
        if operations.isEmpty {
            var message = "unknown action \"\(action)\""
            if let suggestion = GatewayOperation.suggestion(forUnknownAction: action) {
                message += ": did you mean \(suggestion)?"
            } else {
                message += ": expected one the gateway serves, e.g. oss:GetObject or s3:ListBucket"
            }
            throw SimulationInputError(message)
        }
        // An s3: action naming only OSS operations would have nothing to answer for: then all count.
        let s3 = action.lowercased().hasPrefix("s3:") && operations.contains { !$0.isOSSOnly }
        var entries: [SimulationResult.Entry] = []
        for op in operations {
            let decision: PolicyDecision
            switch op.resourceLevel {
            case .service:
                decision = policy.evaluate(op, bucket: nil, key: nil, context: context)
            case .bucket:
                guard let bucket, key == nil else {
                    throw SimulationInputError("\(action) acts on a bucket: give --resource acs:oss:*:*:BUCKET or arn:aws:s3:::BUCKET")
                }
                decision = policy.evaluate(op, bucket: bucket, key: nil, context: context)
            case .object:
                guard let bucket, let key else {
                    throw SimulationInputError("\(action) acts on an object: give --resource acs:oss:*:*:BUCKET/KEY or arn:aws:s3:::BUCKET/KEY")
                }
                decision = policy.evaluate(op, bucket: bucket, key: key, context: context)
            }
            entries.append(.init(operation: op, decision: decision, inDialect: !(s3 && op.isOSSOnly)))
        }
        return SimulationResult(entries: entries)
    }
}
