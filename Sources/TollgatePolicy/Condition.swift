/// A condition operator: a base test, an optional `…IfExists` suffix and an optional
/// `ForAnyValue:`/`ForAllValues:` set qualifier.
struct ConditionOperator: Sendable, Hashable {
    enum Base: String, CaseIterable, Sendable {
        case stringEquals = "StringEquals", stringNotEquals = "StringNotEquals"
        case stringEqualsIgnoreCase = "StringEqualsIgnoreCase", stringNotEqualsIgnoreCase = "StringNotEqualsIgnoreCase"
        case stringLike = "StringLike", stringNotLike = "StringNotLike"
        case numericEquals = "NumericEquals", numericNotEquals = "NumericNotEquals"
        case numericLessThan = "NumericLessThan", numericLessThanEquals = "NumericLessThanEquals"
        case numericGreaterThan = "NumericGreaterThan", numericGreaterThanEquals = "NumericGreaterThanEquals"
        case dateEquals = "DateEquals", dateNotEquals = "DateNotEquals"
        case dateLessThan = "DateLessThan", dateLessThanEquals = "DateLessThanEquals"
        case dateGreaterThan = "DateGreaterThan", dateGreaterThanEquals = "DateGreaterThanEquals"
        case bool = "Bool"
        case ipAddress = "IpAddress", notIpAddress = "NotIpAddress"
        case null = "Null"

        enum Family { case string, numeric, date, bool, ip, null }

        var family: Family {
            switch self {
            case .stringEquals, .stringNotEquals, .stringEqualsIgnoreCase, .stringNotEqualsIgnoreCase, .stringLike, .stringNotLike: .string
            case .numericEquals, .numericNotEquals, .numericLessThan, .numericLessThanEquals, .numericGreaterThan, .numericGreaterThanEquals: .numeric
            case .dateEquals, .dateNotEquals, .dateLessThan, .dateLessThanEquals, .dateGreaterThan, .dateGreaterThanEquals: .date
            case .bool: .bool
            case .ipAddress, .notIpAddress: .ip
            case .null: .null
            }
        }

        /// Negated operators are true when the value matches none of the policy's values, and
        /// true when the key is missing (as AWS documents).
        var isNegated: Bool {
            switch self {
            case .stringNotEquals, .stringNotEqualsIgnoreCase, .stringNotLike, .numericNotEquals, .dateNotEquals, .notIpAddress: true
            default: false
            }
        }
    }

    enum Qualifier: Sendable { case none, forAnyValue, forAllValues }

    var base: Base
    var ifExists: Bool
    var qualifier: Qualifier

    /// Parses `ForAnyValue:StringLikeIfExists` and friends (case-insensitive); nil when unknown.
    init?(_ text: String) {
        var rest = Substring(text)
        qualifier = .none
        let lowered = text.lowercased()
        if lowered.hasPrefix("foranyvalue:") {
            qualifier = .forAnyValue
            rest = rest.dropFirst("ForAnyValue:".count)
        } else if lowered.hasPrefix("forallvalues:") {
            qualifier = .forAllValues
            rest = rest.dropFirst("ForAllValues:".count)
        }
        ifExists = false
        if rest.lowercased().hasSuffix("ifexists") {
            ifExists = true
            rest = rest.dropLast("IfExists".count)
        }
        let name = rest.lowercased()
        guard let base = Base.allCases.first(where: { $0.rawValue.lowercased() == name }) else { return nil }
        self.base = base
    }

    /// The operator nearest to a misspelt one by spelling (its qualifier and `IfExists` kept).
    static func suggestion(for text: String) -> String? {
        var candidates = Base.allCases.map(\.rawValue)
        candidates += candidates.map { $0 + "IfExists" }
        candidates += candidates.flatMap { ["ForAnyValue:" + $0, "ForAllValues:" + $0] }
        return Spelling.closest(to: text, among: candidates)
    }
}

/// The policy's values for one key, parsed for the operator's family at load time.
enum ConditionValues: Sendable {
    case strings([CompiledPattern])
    /// StringEqualsIgnoreCase: literal values stored lowercased.
    case lowered([CompiledPattern])
    case like([CompiledPattern])
    case numbers([Double])
    case dates([Double])
    case bools([Bool])
    case cidrs([CIDRBlock])
    case null([Bool])
}

/// One `operator: { key: values }` entry. Entries of a statement are ANDed; values ORed.
struct CompiledCondition: Sendable {
    var op: ConditionOperator
    var key: String
    var values: ConditionValues

    /// Evaluates against the request; nil when a policy variable in a value has no value.
    func evaluate(_ context: PolicyContext) -> Bool? {
        let present = context.values(canonical: key)
        if case .null(let expectations) = values {
            let absent = present?.isEmpty ?? true
            return expectations.contains(absent)
        }
        guard let present, !present.isEmpty else {
            if op.ifExists { return true }
            switch op.qualifier {
            case .forAllValues: return true
            case .forAnyValue: return false
            case .none: return op.base.isNegated
            }
        }
        let negated = op.base.isNegated
        func test(_ v: String) -> Bool? {
            guard let m = matchesAny(v, context) else { return nil }
            return negated ? !m : m
        }
        switch op.qualifier {
        case .forAnyValue:
            return anyOf(present, test)
        case .forAllValues:
            return allOf(present, test)
        case .none:
            // A single-valued use: a positive operator needs one value to match, a negated one
            // needs every value to match none.
            return negated ? allOf(present, test) : anyOf(present, test)
        }
    }

    /// Whether one request value matches any policy value (positive sense); nil when no value
    /// matched and some policy value could not be resolved.
    private func matchesAny(_ v: String, _ context: PolicyContext) -> Bool? {
        switch values {
        case .strings(let patterns):
            var unresolved = false
            for p in patterns {
                guard let s = p.resolvedString(in: context) else { unresolved = true; continue }
                if s == v { return true }
            }
            return unresolved ? nil : false
        case .lowered(let patterns):
            let lv = v.lowercased()
            var unresolved = false
            for p in patterns {
                guard let s = p.resolvedString(in: context) else { unresolved = true; continue }
                if (p.hasVariables ? s.lowercased() : s) == lv { return true }
            }
            return unresolved ? nil : false
        case .like(let patterns):
            let bytes = Array(v.utf8) // one small allocation per Like test
            var unresolved = false
            for p in patterns {
                guard let m = p.matches(bytes, in: context) else { unresolved = true; continue }
                if m { return true }
            }
            return unresolved ? nil : false
        case .numbers(let numbers):
            guard let x = ValueParsing.number(v) else { return false }
            return numbers.contains { compare(x, $0) }
        case .dates(let dates):
            guard let x = ValueParsing.date(v) else { return false }
            return dates.contains { compare(x, $0) }
        case .bools(let bools):
            guard let x = ValueParsing.bool(v) else { return false }
            return bools.contains(x)
        case .cidrs(let blocks):
            guard let address = IPAddress(v) else { return false }
            return blocks.contains { $0.contains(address) }
        case .null:
            return false
        }
    }

    private func compare(_ x: Double, _ y: Double) -> Bool {
        switch op.base {
        case .numericEquals, .numericNotEquals, .dateEquals, .dateNotEquals: x == y
        case .numericLessThan, .dateLessThan: x < y
        case .numericLessThanEquals, .dateLessThanEquals: x <= y
        case .numericGreaterThan, .dateGreaterThan: x > y
        case .numericGreaterThanEquals, .dateGreaterThanEquals: x >= y
        default: false
        }
    }
}

private func anyOf(_ values: [String], _ test: (String) -> Bool?) -> Bool? {
    var unknown = false
    for v in values {
        switch test(v) {
        case true?: return true
        case nil: unknown = true
        case false?: break
        }
    }
    return unknown ? nil : false
}

private func allOf(_ values: [String], _ test: (String) -> Bool?) -> Bool? {
    var unknown = false
    for v in values {
        switch test(v) {
        case false?: return false
        case nil: unknown = true
        case true?: break
        }
    }
    return unknown ? nil : true
}
