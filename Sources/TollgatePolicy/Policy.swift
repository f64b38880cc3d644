/// Where a statement sits: file, position of its `{`, 1-based index and optional Sid.
public struct StatementReference: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    /// 1-based position of the statement in the policy's `Statement` list.
    public var index: Int
    public var sid: String?

    /// `file:line (statement N "Sid")`.
    public var description: String {
        var s = "\(file):\(line) (statement \(index)"
        if let sid, !sid.isEmpty { s += " \"\(sid)\"" }
        return s + ")"
    }
}

public enum PolicyEffect: String, Sendable, Hashable {
    case allow = "Allow"
    case deny = "Deny"
}

/// An action pattern from `Action`/`NotAction`: `*`, or `oss:NAME`/`s3:NAME` with `*` and `?`,
/// matched case-insensitively against the action name in its own namespace only.
enum ActionPattern: Sendable, Hashable {
    case all
    case oss(CompiledPattern)
    case s3(CompiledPattern)

    /// Bit `i` set when the pattern matches `GatewayOperation.allCases[i]`'s action in its namespace.
    var operationMask: UInt64 {
        var mask: UInt64 = 0
        for op in GatewayOperation.allCases {
            let matched: Bool
            switch self {
            case .all: matched = true
            case .oss(let p): matched = globMatch(p.tokens, Array(op.ossAction.lowercased().utf8.dropFirst(4)))
            case .s3(let p): matched = globMatch(p.tokens, Array(op.s3Action.lowercased().utf8.dropFirst(3)))
            }
            if matched { mask |= op.bit }
        }
        return mask
    }
}

/// A resource pattern, reduced to the part after `acs:oss:REGION:ACCOUNT:` or `arn:aws:s3:::`
/// (`*` alone matches everything). Region and account are accepted but not compared: a Tollgate
/// gateway serves one region and one account.
struct ResourcePattern: Sendable {
    var text: String
    var pattern: CompiledPattern
}

struct CompiledStatement: Sendable {
    var reference: StatementReference
    var effect: PolicyEffect
    var notAction: Bool
    /// Bit `i` set when the action list matches `GatewayOperation.allCases[i]` (computed at load).
    var operationMask: UInt64
    var resources: [ResourcePattern]
    var notResource: Bool
    var conditions: [CompiledCondition]
}

/// A loaded, validated and compiled policy (RAM `"Version":"1"` or IAM `"2012-10-17"`/`"2008-10-17"`).
///
/// All patterns are compiled when the policy is loaded; evaluation does no parsing of the policy.
public struct Policy: Sendable {
    /// The name diagnostics and decisions use for the policy's source.
    public let file: String
    public let version: String
    let statements: [CompiledStatement]
    /// What loads but cannot work as written (see ``PolicyDiagnostic/Severity/warning``), in
    /// source order.
    public let warnings: [PolicyDiagnostic]

    /// The statements, in order, with their positions.
    public var statementReferences: [StatementReference] { statements.map(\.reference) }

    /// Loads a policy: fills `$NAME` placeholders from `variables`, parses the JSON and validates
    /// every element. Throws every error found as `file:line:column: message` diagnostics (the
    /// warnings with them); a policy that loads carries its ``warnings``.
    public static func load(text: String, file: String, variables: [String: String] = [:]) throws(PolicyLoadError) -> Policy {
        var loader = PolicyLoader(file: file)
        let policy = loader.load(text: text, variables: variables)
        let sorted = loader.diagnostics.sorted { ($0.line, $0.column) < ($1.line, $1.column) }
        guard let policy, !sorted.contains(where: { $0.severity == .error }) else {
            throw PolicyLoadError(diagnostics: sorted)
        }
        return Policy(file: file, version: policy.version, statements: policy.statements, warnings: sorted)
    }

    init(file: String, version: String, statements: [CompiledStatement], warnings: [PolicyDiagnostic] = []) {
        self.file = file
        self.version = version
        self.statements = statements
        self.warnings = warnings
    }
}

struct PolicyLoader {
    let file: String
    var diagnostics: [PolicyDiagnostic] = []

    init(file: String) { self.file = file }

    mutating func error(_ position: SourcePosition, _ message: String) {
        diagnostics.append(PolicyDiagnostic(file: file, at: position, message))
    }

    mutating func warning(_ position: SourcePosition, _ message: String) {
        diagnostics.append(PolicyDiagnostic(file: file, at: position, message, severity: .warning))
    }

    var errorCount: Int { diagnostics.count { $0.severity == .error } }

    mutating func load(text: String, variables: [String: String]) -> Policy? {
        let original = Array(text.utf8)
        let filled = Placeholders.fill(original, variables: variables)
        let map = SourceMap(original: original, origin: filled.origin)
        for (name, offset) in filled.unfilled {
            error(map.position(ofOriginalOffset: offset), "placeholder $\(name) has no value (define \(name) in the config's variables or pass --var \(name)=VALUE)")
        }
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes: filled.bytes, map: map)
        } catch {
            self.error(map.position(ofParsedOffset: error.offset), "invalid JSON: \(error.message)")
            return nil
        }
        return compilePolicy(root)
    }

    /// Looks up a member case-insensitively (RAM documents are written in several casings).
    static func member(_ members: [JSONMember], _ name: String) -> JSONMember? {
        members.first { $0.key.lowercased() == name.lowercased() }
    }

    mutating func compilePolicy(_ root: JSONValue) -> Policy? {
        guard case .object(let members) = root.node else {
            error(root.position, "a policy must be a JSON object, found \(root.kindName)")
            return nil
        }
        for m in members where !["version", "statement", "id"].contains(m.key.lowercased()) {
            error(m.keyPosition, "unknown policy element \"\(m.key)\" (expected Version, Statement or Id)")
        }
        var version = ""
        if let v = Self.member(members, "Version") {
            if case .string(let s) = v.value.node, ["1", "2012-10-17", "2008-10-17"].contains(s) {
                version = s
            } else {
                let shown: String
                switch v.value.node {
                case .string(let s): shown = "\"\(s)\""
                case .number(let n): shown = "\(n) (a number; write it as a string)"
                default: shown = v.value.kindName
                }
                error(v.value.position, "unsupported Version \(shown): expected \"1\" (RAM), \"2012-10-17\" or \"2008-10-17\" (IAM)")
            }
        } else {
            error(root.position, "missing Version: expected \"Version\": \"1\" (RAM) or \"2012-10-17\" (IAM)")
        }
        var statements: [CompiledStatement] = []
        if let s = Self.member(members, "Statement") {
            let list: [JSONValue]
            switch s.value.node {
            case .array(let a): list = a
            case .object: list = [s.value]
            default:
                error(s.value.position, "Statement must be an object or an array of objects, found \(s.value.kindName)")
                list = []
            }
            if case .array(let a) = s.value.node, a.isEmpty {
                error(s.value.position, "Statement is empty")
            }
            for (i, v) in list.enumerated() {
                if let st = compileStatement(v, index: i + 1) { statements.append(st) }
            }
        } else {
            error(root.position, "missing Statement")
        }
        warnOverriddenAllows(statements)
        return Policy(file: file, version: version, statements: statements)
    }

    /// Warns about an Allow statement that a Deny of the same policy always beats: the Deny
    /// names every operation the Allow does, on every resource it does, and has no condition.
    /// Conservative: only resource patterns that plainly cover another count (see `covers`).
    mutating func warnOverriddenAllows(_ statements: [CompiledStatement]) {
        for allow in statements where allow.effect == .allow && !allow.notAction && !allow.notResource {
            let deny = statements.first { deny in
                deny.effect == .deny && !deny.notAction && !deny.notResource && deny.conditions.isEmpty
                    && deny.operationMask & allow.operationMask == allow.operationMask
                    && allow.resources.allSatisfy { a in deny.resources.contains { $0.pattern.covers(a.pattern) } }
            }
            guard let deny else { continue }
            warning(
                SourcePosition(line: allow.reference.line, column: allow.reference.column),
                "statement \(allow.reference.index) (Allow) never takes effect: statement \(deny.reference.index) (Deny, line \(deny.reference.line)) has no condition and denies every action on every resource it allows"
            )
        }
    }

    static let statementElements: Set<String> = ["sid", "effect", "action", "notaction", "resource", "notresource", "condition", "principal", "notprincipal"]

    mutating func compileStatement(_ value: JSONValue, index: Int) -> CompiledStatement? {
        guard case .object(let members) = value.node else {
            error(value.position, "a statement must be an object, found \(value.kindName)")
            return nil
        }
        let errorsBefore = errorCount
        for m in members where !Self.statementElements.contains(m.key.lowercased()) {
            error(m.keyPosition, "unknown statement element \"\(m.key)\"")
        }
        var sid: String?
        if let s = Self.member(members, "Sid") {
            if case .string(let text) = s.value.node { sid = text } else { error(s.value.position, "Sid must be a string") }
        }
        var effect = PolicyEffect.deny
        if let e = Self.member(members, "Effect") {
            if case .string(let text) = e.value.node, let parsed = PolicyEffect(rawValue: text) {
                effect = parsed
            } else if case .string(let text) = e.value.node {
                error(e.value.position, "Effect must be \"Allow\" or \"Deny\", found \"\(text)\"")
            } else {
                error(e.value.position, "Effect must be \"Allow\" or \"Deny\", found \(e.value.kindName)")
            }
        } else {
            error(value.position, "statement \(index) has no Effect")
        }

        // Action / NotAction
        let action = Self.member(members, "Action"), notAction = Self.member(members, "NotAction")
        var actions: [(pattern: ActionPattern, text: String, position: SourcePosition)] = []
        if let action, let notAction {
            error(notAction.keyPosition, "statement \(index) has both Action (line \(action.keyPosition.line)) and NotAction; use one")
        } else if let chosen = action ?? notAction {
            for (text, pos) in strings(chosen, element: chosen.key) {
                if let p = compileAction(text, pos) { actions.append((p, text, pos)) }
            }
        } else {
            error(value.position, "statement \(index) has neither Action nor NotAction")
        }

        // Resource / NotResource
        let resource = Self.member(members, "Resource"), notResource = Self.member(members, "NotResource")
        var resources: [ResourcePattern] = []
        if let resource, let notResource {
            error(notResource.keyPosition, "statement \(index) has both Resource (line \(resource.keyPosition.line)) and NotResource; use one")
        } else if let chosen = resource ?? notResource {
            for (text, pos) in strings(chosen, element: chosen.key) {
                if let p = compileResource(text, pos) { resources.append(p) }
            }
        } else {
            error(value.position, "statement \(index) has neither Resource nor NotResource")
        }

        var conditions: [CompiledCondition] = []
        if let c = Self.member(members, "Condition") {
            conditions = compileConditions(c.value)
        }

        guard errorCount == errorsBefore else { return nil }
        var mask: UInt64 = 0
        for a in actions { mask |= a.pattern.operationMask }
        if notAction == nil && notResource == nil {
            for a in actions { warnUnreachableLevels(a.text, a.position, a.pattern.operationMask, resources) }
        }
        return CompiledStatement(
            reference: StatementReference(file: file, line: value.position.line, column: value.position.column, index: index, sid: sid),
            effect: effect,
            notAction: notAction != nil,
            operationMask: mask,
            resources: resources,
            notResource: notResource != nil,
            conditions: conditions
        )
    }

    /// A string or a non-empty array of strings.
    mutating func strings(_ m: JSONMember, element: String) -> [(String, SourcePosition)] {
        switch m.value.node {
        case .string(let s):
            return [(s, m.value.position)]
        case .array(let items):
            if items.isEmpty { error(m.value.position, "\(element) is empty") }
            var out: [(String, SourcePosition)] = []
            for item in items {
                if case .string(let s) = item.node { out.append((s, item.position)) } else {
                    error(item.position, "\(element) entries must be strings, found \(item.kindName)")
                }
            }
            return out
        default:
            error(m.value.position, "\(element) must be a string or an array of strings, found \(m.value.kindName)")
            return []
        }
    }

    mutating func compileAction(_ text: String, _ pos: SourcePosition) -> ActionPattern? {
        if text == "*" { return .all }
        guard let colon = text.firstIndex(of: ":") else {
            error(pos, "malformed action \"\(text)\": expected oss:NAME, s3:NAME or *")
            return nil
        }
        let ns = text[..<colon].lowercased()
        let name = text[text.index(after: colon)...]
        guard ns == "oss" || ns == "s3" else {
            error(pos, "action \"\(text)\" is outside the oss: and s3: namespaces")
            return nil
        }
        let validName = !name.isEmpty && name.utf8.allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2A || b == 0x3F || b == 0x2D || b == 0x5F
        }
        guard validName else {
            error(pos, "malformed action \"\(text)\": the name may hold only letters, digits, '-', '_', '*' and '?'")
            return nil
        }
        guard let p = try? PatternCompiler.compile(String(name), wildcards: true, variables: false, lowercase: true) else { return nil }
        let pattern: ActionPattern = ns == "oss" ? .oss(p) : .s3(p)
        guard pattern.operationMask != 0 else {
            let isWildcard = name.contains("*") || name.contains("?")
            var message = isWildcard
                ? "action \"\(text)\" matches no action the gateway serves"
                : "unknown action \"\(text)\""
            if !isWildcard, let suggestion = GatewayOperation.suggestion(forUnknownAction: text) {
                message += " (did you mean \(suggestion)?)"
            } else {
                message += " (\(ns): actions: \(GatewayOperation.knownActions(namespace: ns).joined(separator: ", ")))"
            }
            error(pos, message)
            return nil
        }
        return pattern
    }

    /// Warns when no resource of the statement can name what `action` acts on: an object action
    /// with only `BUCKET` resources, a bucket action with only `BUCKET/KEY` ones, ListBuckets
    /// without `*`. Resources with policy variables count as able to match anything there.
    mutating func warnUnreachableLevels(_ action: String, _ position: SourcePosition, _ mask: UInt64, _ resources: [ResourcePattern]) {
        let levels = Set(GatewayOperation.allCases.filter { mask & $0.bit != 0 }.map(\.resourceLevel))
        guard !resources.isEmpty, !levels.contains(where: { level in resources.contains { $0.pattern.canMatch(level) } }) else { return }
        let needs: String
        if levels.contains(.object) {
            needs = "an object: a resource like acs:oss:*:*:BUCKET/* (a bucket alone never matches)"
        } else if levels.contains(.bucket) {
            needs = "a bucket: a resource like acs:oss:*:*:BUCKET (BUCKET/* names objects, never the bucket)"
        } else {
            needs = "the whole service: the resource * or acs:oss:*:*:*"
        }
        let shown = resources.map(\.text).joined(separator: ", ")
        warning(position, "\(action) acts on \(needs); no Resource of this statement (\(shown)) can match it")
    }

    mutating func compileResource(_ text: String, _ pos: SourcePosition) -> ResourcePattern? {
        let malformed = "malformed resource \"\(text)\": expected acs:oss:*:*:BUCKET[/KEY], acs:oss:REGION:ACCOUNT:BUCKET[/KEY], arn:aws:s3:::BUCKET[/KEY] or *"
        var rest: Substring
        if text == "*" {
            rest = "*"
        } else if text.hasPrefix("acs:oss:") {
            let parts = text.dropFirst("acs:oss:".count).split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { error(pos, malformed); return nil }
            rest = parts[2]
        } else if text.hasPrefix("arn:aws:s3:::") {
            rest = text.dropFirst("arn:aws:s3:::".count)
        } else {
            error(pos, malformed)
            return nil
        }
        guard !rest.isEmpty else { error(pos, malformed); return nil }
        do {
            let p = try PatternCompiler.compile(String(rest), wildcards: true, variables: true)
            warnUnsuppliedVariables(p, pos)
            return ResourcePattern(text: text, pattern: p)
        } catch {
            self.error(pos, error.message)
            return nil
        }
    }

    mutating func compileConditions(_ value: JSONValue) -> [CompiledCondition] {
        guard case .object(let blocks) = value.node else {
            error(value.position, "Condition must be an object of operators, found \(value.kindName)")
            return []
        }
        var out: [CompiledCondition] = []
        for block in blocks {
            guard let op = ConditionOperator(block.key) else {
                var message = "unknown condition operator \"\(block.key)\""
                if let suggestion = ConditionOperator.suggestion(for: block.key) { message += " (did you mean \(suggestion)?)" }
                error(block.keyPosition, message)
                continue
            }
            if op.base == .null && (op.ifExists || op.qualifier != .none) {
                error(block.keyPosition, "Null cannot take IfExists, ForAnyValue: or ForAllValues:")
                continue
            }
            guard case .object(let entries) = block.value.node else {
                error(block.value.position, "condition \(block.key) must map keys to values, found \(block.value.kindName)")
                continue
            }
            if entries.isEmpty { error(block.value.position, "condition \(block.key) is empty") }
            for entry in entries {
                if let c = compileCondition(op, operatorName: block.key, entry) { out.append(c) }
            }
        }
        return out
    }

    mutating func compileCondition(_ op: ConditionOperator, operatorName: String, _ entry: JSONMember) -> CompiledCondition? {
        let key = ConditionKeys.canonical(entry.key)
        guard ConditionKeys.isAcceptable(canonical: key) else {
            error(entry.keyPosition, "unknown condition key \"\(entry.key)\" (keys are NAMESPACE:NAME in aws, acs, oss, s3 or jwt)")
            return nil
        }
        if !ConditionKeys.isSupplied(canonical: key) {
            var message = "condition key \"\(entry.key)\" is never set by Tollgate, so the condition never sees a value"
            if let suggestion = ConditionKeys.suggestion(for: key) { message += " (did you mean \(suggestion)?)" }
            warning(entry.keyPosition, message)
        }
        let type = ConditionKeys.type(ofCanonical: key)
        let family = op.base.family
        let compatible: Bool
        switch family {
        case .string: compatible = type == .string || type == .any
        case .numeric: compatible = type == .numeric || type == .any || key == "aws:epochtime"
        case .date: compatible = type == .date || type == .any
        case .bool: compatible = type == .bool || type == .any
        case .ip: compatible = type == .ip
        case .null: compatible = true
        }
        guard compatible else {
            let kind: String
            switch type {
            case .ip: kind = "an IP address key; use IpAddress or NotIpAddress"
            case .bool: kind = "a boolean key; use Bool"
            case .date: kind = "a date key; use the Date operators"
            case .numeric: kind = "a numeric key; use the Numeric operators"
            case .string: kind = "a string key; use the String operators"
            case .any: kind = "not an IP address key"
            }
            error(entry.keyPosition, "operator \(operatorName) cannot be used with key \(entry.key) (\(kind))")
            return nil
        }
        // The values: a scalar or a non-empty array of scalars.
        var raw: [(String, SourcePosition)] = []
        let items: [JSONValue]
        if case .array(let a) = entry.value.node {
            if a.isEmpty { error(entry.value.position, "condition key \(entry.key) has no values") }
            items = a
        } else {
            items = [entry.value]
        }
        for item in items {
            switch item.node {
            case .string(let s): raw.append((s, item.position))
            case .number(let n): raw.append((n, item.position))
            case .bool(let b): raw.append((b ? "true" : "false", item.position))
            default: error(item.position, "condition values must be strings, numbers or booleans, found \(item.kindName)")
            }
        }
        let before = errorCount
        let values: ConditionValues
        switch family {
        case .string:
            var patterns: [CompiledPattern] = []
            for (text, pos) in raw {
                do {
                    switch op.base {
                    case .stringLike, .stringNotLike:
                        patterns.append(try PatternCompiler.compile(text, wildcards: true, variables: true))
                    case .stringEqualsIgnoreCase, .stringNotEqualsIgnoreCase:
                        let p = try PatternCompiler.compile(text, wildcards: false, variables: true)
                        if let l = p.literal {
                            patterns.append(CompiledPattern(tokens: [.literal(Array(String(decoding: l, as: UTF8.self).lowercased().utf8))]))
                        } else {
                            patterns.append(p)
                        }
                    default:
                        patterns.append(try PatternCompiler.compile(text, wildcards: false, variables: true))
                    }
                } catch {
                    self.error(pos, error.message)
                }
            }
            switch op.base {
            case .stringLike, .stringNotLike: values = .like(patterns)
            case .stringEqualsIgnoreCase, .stringNotEqualsIgnoreCase: values = .lowered(patterns)
            default: values = .strings(patterns)
            }
        case .numeric:
            values = .numbers(raw.compactMap { text, pos in
                if let d = ValueParsing.number(text) { return d }
                error(pos, "\(operatorName) needs a number, found \"\(text)\"")
                return nil
            })
        case .date:
            values = .dates(raw.compactMap { text, pos in
                if let d = ValueParsing.date(text) { return d }
                error(pos, "\(operatorName) needs an ISO 8601 date or epoch seconds, found \"\(text)\"")
                return nil
            })
        case .bool:
            values = .bools(raw.compactMap { text, pos in
                if let b = ValueParsing.bool(text) { return b }
                error(pos, "\(operatorName) needs true or false, found \"\(text)\"")
                return nil
            })
        case .null:
            values = .null(raw.compactMap { text, pos in
                if let b = ValueParsing.bool(text) { return b }
                error(pos, "Null needs true (key absent) or false (key present), found \"\(text)\"")
                return nil
            })
        case .ip:
            values = .cidrs(raw.compactMap { text, pos in
                if let c = CIDRBlock(text) { return c }
                error(pos, "\(operatorName) needs an IPv4 or IPv6 address or CIDR block, found \"\(text)\"")
                return nil
            })
        }
        guard errorCount == before, !raw.isEmpty else { return nil }
        switch values {
        case .strings(let patterns), .lowered(let patterns), .like(let patterns):
            for (pattern, (_, pos)) in zip(patterns, raw) { warnUnsuppliedVariables(pattern, pos) }
        default: break
        }
        return CompiledCondition(op: op, key: key, values: values)
    }

    /// Warns about `${ns:name}` policy variables that no request fills: where they sit, an
    /// Allow never matches.
    mutating func warnUnsuppliedVariables(_ pattern: CompiledPattern, _ position: SourcePosition) {
        for case .variable(let key) in pattern.tokens where !ConditionKeys.isSupplied(canonical: key) {
            var message = "policy variable ${\(key)} is never set by Tollgate, so an Allow using it never matches"
            if let suggestion = ConditionKeys.suggestion(for: key) { message += " (did you mean ${\(suggestion)}?)" }
            warning(position, message)
        }
    }
}

extension CompiledPattern {
    /// Whether the pattern can match some resource string of `level`: the empty string (the
    /// service), a bucket name (no `/`), or `bucket/key`. A policy variable may hold anything.
    func canMatch(_ level: ResourceLevel) -> Bool {
        switch level {
        case .service:
            return tokens.allSatisfy { if case .literal = $0 { false } else if case .one = $0 { false } else { true } }
        case .bucket:
            return !tokens.contains { if case .literal(let l) = $0 { l.contains(UInt8(ascii: "/")) } else { false } }
        case .object:
            return tokens.contains {
                if case .literal(let l) = $0 { l.contains(UInt8(ascii: "/")) } else { true }
            }
        }
    }

    /// Whether every string this pattern matches, the pattern `other` matches too, judged
    /// conservatively (false when unsure): the same pattern, `*`, a `PREFIX*` that `other`'s
    /// fixed beginning starts with, or a literal `other` this pattern matches.
    func covers(_ other: CompiledPattern) -> Bool {
        if tokens == other.tokens { return true }
        if tokens.allSatisfy({ $0 == .star }) { return true }
        if tokens.count == 2, case .literal(let prefix) = tokens[0], tokens[1] == .star,
           case .literal(let start)? = other.tokens.first, start.starts(with: prefix) {
            return true
        }
        if !hasVariables, let literal = other.literal { return globMatch(tokens, literal) }
        return false
    }
}
