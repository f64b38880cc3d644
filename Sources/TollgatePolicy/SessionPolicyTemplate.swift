/// A role's policy as an upstream STS receives it (`AssumeRole`'s `Policy`): the policy file
/// with its `$NAME` placeholders filled, minified, and with the caller's identity variables
/// (`${user}`, `${aws:username}`, `${aws:userid}`, `${jwt:CLAIM}`, `${aws:PrincipalTag/KEY}`)
/// left as holes that `render` fills per caller. The upstream does not know the app user, so
/// Tollgate substitutes them before sending; in Resource, NotResource and Condition values
/// only, as the gateway's own evaluation does.
///
/// Every other `${…}` (`${aws:SourceIp}`, `${*}`, …) is sent as written: those are the
/// upstream's to evaluate. Members keep their order; whitespace outside strings goes.
public struct SessionPolicyTemplate: Sendable, Equatable {
    /// A string of the document as written, with where it is: for `policy check`'s warnings.
    public struct Located: Sendable, Equatable {
        public var text: String
        public var position: SourcePosition
    }

    enum Part: Sendable, Equatable {
        /// Minified JSON bytes, escapes included.
        case text([UInt8])
        /// The canonical condition key whose value goes here, JSON-escaped.
        case variable(String)
    }

    let parts: [Part]
    /// The canonical keys (`aws:username`, `jwt:dept`, …) `render` needs a value for, sorted.
    public let variables: [String]
    /// `Version` as written (`"1"` RAM, `"2012-10-17"` IAM), or "".
    public let version: String
    public let versionPosition: SourcePosition
    /// Every Action/NotAction entry and every Resource/NotResource entry, in order.
    public let actions: [Located]
    public let resources: [Located]

    /// The document's size without any variable's value: the least any rendering weighs.
    public var fixedByteCount: Int {
        parts.reduce(0) { total, part in
            if case .text(let bytes) = part { return total + bytes.count }
            return total
        }
    }

    /// Whether a variable's canonical key names the caller (substituted by Tollgate) rather than
    /// the request (left to the upstream).
    public static func isIdentityKey(_ canonical: String) -> Bool {
        canonical == "aws:username" || canonical == "aws:userid" || canonical.hasPrefix("jwt:")
            || canonical.hasPrefix("aws:principaltag/")
    }

    /// Builds the template of a policy file. The text must be one `Policy.load` accepts with the
    /// same `variables`; anything else is reported as `Policy.load` would.
    public static func make(text: String, file: String, variables: [String: String] = [:]) throws(PolicyLoadError) -> SessionPolicyTemplate {
        let original = Array(text.utf8)
        let filled = Placeholders.fill(original, variables: variables)
        let map = SourceMap(original: original, origin: filled.origin)
        if let (name, offset) = filled.unfilled.first {
            throw PolicyLoadError(diagnostics: [PolicyDiagnostic(file: file, at: map.position(ofOriginalOffset: offset),
                                                                 "placeholder $\(name) has no value")])
        }
        let root: JSONValue
        do { root = try JSONParser.parse(bytes: filled.bytes, map: map) } catch {
            throw PolicyLoadError(diagnostics: [PolicyDiagnostic(file: file, at: map.position(ofParsedOffset: error.offset),
                                                                 "invalid JSON: \(error.message)")])
        }
        guard case .object = root.node else {
            throw PolicyLoadError(diagnostics: [PolicyDiagnostic(file: file, at: root.position,
                                                                 "a policy must be a JSON object, found \(root.kindName)")])
        }
        var writer = Writer()
        writer.value(root, context: .document)
        writer.flush()
        return SessionPolicyTemplate(parts: writer.parts, variables: writer.variables.sorted(), version: writer.version,
                                     versionPosition: writer.versionPosition, actions: writer.actions, resources: writer.resources)
    }

    /// The document for one caller: `values` maps canonical keys (`aws:username`, `jwt:dept`)
    /// to their values, each JSON-escaped into place. A variable without a value is refused:
    /// sending it unfilled would let the upstream read it as a policy variable of its own.
    public func render(_ values: [String: String]) throws(SessionPolicyRenderError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(fixedByteCount + 64)
        for part in parts {
            switch part {
            case .text(let bytes):
                out += bytes
            case .variable(let key):
                guard let value = values[key] else { throw .missingVariable(key) }
                JSONText.appendEscapedContent(Array(value.utf8), to: &out)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Writing

    /// Where a value sits, which decides whether its strings take identity variables.
    private enum Context {
        case document, statements, statement, substituted, conditionBlock, conditionOperator, plain
        case version, actions
    }

    private struct Writer {
        var parts: [Part] = []
        var pending: [UInt8] = []
        var variables: Set<String> = []
        var version = ""
        var versionPosition = SourcePosition(line: 1, column: 1)
        var actions: [Located] = []
        var resources: [Located] = []

        mutating func flush() {
            if !pending.isEmpty {
                parts.append(.text(pending))
                pending.removeAll()
            }
        }

        mutating func value(_ value: JSONValue, context: Context) {
            switch value.node {
            case .object(let members):
                pending.append(UInt8(ascii: "{"))
                for (index, member) in members.enumerated() {
                    if index > 0 { pending.append(UInt8(ascii: ",")) }
                    JSONText.appendEscaped(member.key, to: &pending)
                    pending.append(UInt8(ascii: ":"))
                    self.value(member.value, context: Self.context(of: member.key, in: context))
                }
                pending.append(UInt8(ascii: "}"))
            case .array(let items):
                pending.append(UInt8(ascii: "["))
                for (index, item) in items.enumerated() {
                    if index > 0 { pending.append(UInt8(ascii: ",")) }
                    // A Statement array holds statements; the arrays of other members hold
                    // values of that member.
                    self.value(item, context: context == .statements ? .statement : context)
                }
                pending.append(UInt8(ascii: "]"))
            case .string(let text):
                switch context {
                case .version:
                    version = text
                    versionPosition = value.position
                case .actions:
                    actions.append(Located(text: text, position: value.position))
                case .substituted:
                    resources.append(Located(text: text, position: value.position))
                default:
                    break
                }
                if context == .substituted || context == .conditionOperator {
                    string(text)
                } else {
                    JSONText.appendEscaped(text, to: &pending)
                }
            case .number(let text):
                pending += text.utf8
            case .bool(let flag):
                pending += (flag ? "true" : "false").utf8
            case .null:
                pending += "null".utf8
            }
        }

        /// The context of a member's value.
        static func context(of key: String, in parent: Context) -> Context {
            let key = key.lowercased()
            switch parent {
            case .document:
                switch key {
                case "statement": return .statements
                case "version": return .version
                default: return .plain
                }
            case .statements, .statement:
                switch key {
                case "resource", "notresource": return .substituted
                case "action", "notaction": return .actions
                case "condition": return .conditionBlock
                default: return .plain
                }
            case .conditionBlock:
                return .conditionOperator  // operator → {key: values}
            default:
                return parent == .conditionOperator ? .conditionOperator : .plain
            }
        }

        /// A string in which identity variables become holes, everything else stays as written.
        mutating func string(_ text: String) {
            let bytes = Array(text.utf8)
            var literal: [UInt8] = []
            pending.append(UInt8(ascii: "\""))
            var i = 0
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: "$"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "{"),
                   let close = bytes[(i + 2)...].firstIndex(of: UInt8(ascii: "}")) {
                    let name = String(decoding: bytes[(i + 2)..<close], as: UTF8.self)
                    if let key = ConditionKeys.variableKey(name), SessionPolicyTemplate.isIdentityKey(key) {
                        JSONText.appendEscapedContent(literal, to: &pending)
                        literal.removeAll()
                        flush()
                        parts.append(.variable(key))
                        variables.insert(key)
                    } else {
                        literal += bytes[i...close]
                    }
                    i = close + 1
                    continue
                }
                literal.append(bytes[i])
                i += 1
            }
            JSONText.appendEscapedContent(literal, to: &pending)
            pending.append(UInt8(ascii: "\""))
        }
    }
}

/// Why a session policy could not be rendered for a caller.
public enum SessionPolicyRenderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The policy names `${KEY}` and the caller's identity carries no such value.
    case missingVariable(String)

    public var description: String {
        switch self {
        case .missingVariable(let key): "the policy uses ${\(key)}, which this caller's identity does not carry"
        }
    }
}

/// Minimal JSON string escaping: `"`, `\` and control characters; everything else as UTF-8.
enum JSONText {
    static func appendEscaped(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        appendEscapedContent(Array(string.utf8), to: &out)
        out.append(UInt8(ascii: "\""))
    }

    static func appendEscapedContent(_ bytes: [UInt8], to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        for b in bytes {
            switch b {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(b >> 4)], hex[Int(b & 0x0F)]]
            default: out.append(b)
            }
        }
    }
}
