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

    func matches(namespace: ActionNamespace, loweredName: [UInt8]) -> Bool {
        switch (self, namespace) {
        case (.all, _): true
        case (.oss(let p), .oss), (.s3(let p), .s3): globMatch(p.tokens, loweredName)
        default: false
        }
    }
}

enum ActionNamespace: Sendable { case oss, s3 }

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
    var actions: [ActionPattern]
    var notAction: Bool
    /// Bit `i` set when the action list matches `GatewayOperation.allCases[i]` (computed at load).
    var operationMask: UInt32
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

    /// The statements, in order, with their positions.
    public var statementReferences: [StatementReference] { statements.map(\.reference) }

    /// Loads a policy: fills `$NAME` placeholders from `variables`, parses the JSON and validates
    /// every element. Throws every problem found as `file:line:column: message` diagnostics.
    public static func load(text: String, file: String, variables: [String: String] = [:]) throws(PolicyLoadError) -> Policy {
        var loader = PolicyLoader(file: file)
        let policy = loader.load(text: text, variables: variables)
        if !loader.diagnostics.isEmpty || policy == nil {
            throw PolicyLoadError(diagnostics: loader.diagnostics.sorted { ($0.line, $0.column) < ($1.line, $1.column) })
        }
        return policy!
    }

    init(file: String, version: String, statements: [CompiledStatement]) {
        self.file = file
        self.version = version
        self.statements = statements
    }
}

struct PolicyLoader {
    let file: String
    var diagnostics: [PolicyDiagnostic] = []

    init(file: String) { self.file = file }

    mutating func error(_ position: SourcePosition, _ message: String) {
        diagnostics.append(PolicyDiagnostic(file: file, at: position, message))
    }

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
        return Policy(file: file, version: version, statements: statements)
    }

    static let statementElements: Set<String> = ["sid", "effect", "action", "notaction", "resource", "notresource", "condition", "principal", "notprincipal"]

    mutating func compileStatement(_ value: JSONValue, index: Int) -> CompiledStatement? {
        guard case .object(let members) = value.node else {
            error(value.position, "a statement must be an object, found \(value.kindName)")
            return nil
        }
        let errorsBefore = diagnostics.count
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
        var actions: [ActionPattern] = []
        if let action, let notAction {
            error(notAction.keyPosition, "statement \(index) has both Action (line \(action.keyPosition.line)) and NotAction; use one")
        } else if let chosen = action ?? notAction {
            for (text, pos) in strings(chosen, element: chosen.key) {
                if let p = compileAction(text, pos) { actions.append(p) }
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

        guard diagnostics.count == errorsBefore else { return nil }
        var mask: UInt32 = 0
        for op in GatewayOperation.allCases {
            let oss = Array(op.ossAction.lowercased().utf8.dropFirst(4))
            let s3 = Array(op.s3Action.lowercased().utf8.dropFirst(3))
            if actions.contains(where: { $0.matches(namespace: .oss, loweredName: oss) || $0.matches(namespace: .s3, loweredName: s3) }) {
                mask |= op.bit
            }
        }
        return CompiledStatement(
            reference: StatementReference(file: file, line: value.position.line, column: value.position.column, index: index, sid: sid),
            effect: effect,
            actions: actions,
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
        return ns == "oss" ? .oss(p) : .s3(p)
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
                error(block.keyPosition, "unknown condition operator \"\(block.key)\"")
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
        let before = diagnostics.count
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
        guard diagnostics.count == before, !raw.isEmpty else { return nil }
        return CompiledCondition(op: op, key: key, values: values)
    }
}
