/// One element of a compiled pattern or template.
enum PatternToken: Sendable, Hashable {
    /// Bytes that must appear literally (including `${*}`, `${?}`, `${$}` escapes).
    case literal([UInt8])
    /// `*`: any run of characters, possibly empty.
    case star
    /// `?`: exactly one character.
    case one
    /// `${key}`: the request's value for the canonical condition key, matched literally.
    case variable(String)
}

/// A string with `*`/`?` wildcards (when `wildcards` is true) and `${…}` policy variables,
/// compiled once at load time.
struct CompiledPattern: Sendable, Hashable {
    let tokens: [PatternToken]
    let hasVariables: Bool
    /// The whole pattern is one literal (the fast path for equality).
    let literal: [UInt8]?
    /// Literal bytes every match must start / end with: a cheap reject before variables are
    /// resolved or the glob runs.
    let prefix: [UInt8]
    let suffix: [UInt8]

    init(tokens: [PatternToken]) {
        // Merge adjacent literals and collapse repeated stars.
        var merged: [PatternToken] = []
        for t in tokens {
            switch (merged.last, t) {
            case (.literal(let a)?, .literal(let b)):
                merged[merged.count - 1] = .literal(a + b)
            case (.star?, .star):
                continue
            default:
                merged.append(t)
            }
        }
        self.tokens = merged
        self.hasVariables = merged.contains { if case .variable = $0 { true } else { false } }
        if case .literal(let l)? = merged.first { prefix = l } else { prefix = [] }
        if merged.count > 1, case .literal(let l)? = merged.last { suffix = l } else { suffix = [] }
        if merged.isEmpty {
            literal = []
        } else if merged.count == 1, case .literal(let l) = merged[0] {
            literal = l
        } else {
            literal = nil
        }
    }

    /// The pattern with variables replaced by the context's values (matched literally, so a
    /// value containing `*` cannot widen the match). Nil when a variable has no value.
    func resolved(in context: PolicyContext) -> [PatternToken]? {
        guard hasVariables else { return tokens }
        var out: [PatternToken] = []
        out.reserveCapacity(tokens.count)
        for t in tokens {
            if case .variable(let key) = t {
                guard let v = context.singleValue(canonical: key) else { return nil }
                out.append(.literal(Array(v.utf8)))
            } else {
                out.append(t)
            }
        }
        return out
    }

    /// Matches `subject`; nil when a variable in the pattern has no value in `context`.
    func matches(_ subject: [UInt8], in context: PolicyContext) -> Bool? {
        if let literal { return literal == subject }
        // A subject without the fixed prefix/suffix cannot match whatever the variables hold.
        guard subject.count >= prefix.count + suffix.count,
              subject.starts(with: prefix),
              suffix.isEmpty || subject[(subject.count - suffix.count)...].elementsEqual(suffix) else { return false }
        guard let tokens = resolved(in: context) else { return nil }
        return globMatch(tokens, subject)
    }

    /// The resolved pattern as a plain string (for Equals comparisons); nil when unresolved.
    func resolvedString(in context: PolicyContext) -> String? {
        if let literal { return String(decoding: literal, as: UTF8.self) }
        guard let tokens = resolved(in: context) else { return nil }
        var bytes: [UInt8] = []
        for t in tokens {
            switch t {
            case .literal(let l): bytes += l
            case .star: bytes.append(UInt8(ascii: "*"))
            case .one: bytes.append(UInt8(ascii: "?"))
            case .variable: return nil
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

@inline(__always)
private func scalarEnd(_ s: [UInt8], _ i: Int) -> Int {
    var j = i + 1
    while j < s.count && s[j] & 0xC0 == 0x80 { j += 1 }
    return j
}

/// Glob matching over literal runs, `*` and `?` (one Unicode scalar), with single-star
/// backtracking: linear in practice, O(n·m) worst case, no recursion.
func globMatch(_ tokens: [PatternToken], _ s: [UInt8]) -> Bool {
    let n = s.count
    var ti = 0, si = 0
    var starTi = -1, starSi = 0
    while true {
        if ti < tokens.count {
            switch tokens[ti] {
            case .star:
                starTi = ti
                starSi = si
                ti += 1
                continue
            case .one:
                if si < n {
                    si = scalarEnd(s, si)
                    ti += 1
                    continue
                }
            case .literal(let l):
                let c = l.count
                if si + c <= n {
                    var k = 0
                    while k < c && s[si + k] == l[k] { k += 1 }
                    if k == c {
                        si += c
                        ti += 1
                        continue
                    }
                }
            case .variable:
                return false
            }
        } else if si == n {
            return true
        }
        guard starTi >= 0, starSi < n else { return false }
        starSi = scalarEnd(s, starSi)
        si = starSi
        ti = starTi + 1
    }
}

/// Whether some string that starts with `prefix` matches the glob: the pattern's automaton is
/// run over `prefix`, and any state still alive at its end can be completed (a literal by its
/// own bytes, `?` by any character, `*` by nothing). `?` is taken as any one byte here, which
/// can only say yes more often: callers use this for a coarse check before an exact one.
func globCanMatchPrefix(_ tokens: [PatternToken], _ prefix: [UInt8]) -> Bool {
    enum Element { case byte(UInt8), any, star }
    var elements: [Element] = []
    for token in tokens {
        switch token {
        case .literal(let bytes): elements += bytes.map(Element.byte)
        case .one: elements.append(.any)
        case .star: elements.append(.star)
        case .variable: return false
        }
    }
    // States are positions in `elements`; a star may also be skipped.
    func closure(_ states: inout [Bool]) {
        for i in elements.indices where states[i] {
            if case .star = elements[i] { states[i + 1] = true }
        }
    }
    var states = [Bool](repeating: false, count: elements.count + 1)
    states[0] = true
    closure(&states)
    for byte in prefix {
        var next = [Bool](repeating: false, count: elements.count + 1)
        for i in elements.indices where states[i] {
            switch elements[i] {
            case .byte(let b): if b == byte { next[i + 1] = true }
            case .any: next[i + 1] = true
            case .star: next[i] = true
            }
        }
        closure(&next)
        guard next.contains(true) else { return false }
        states = next
    }
    return true
}

/// Errors found while compiling a pattern; the caller adds the position.
struct PatternError: Error {
    var message: String
}

enum PatternCompiler {
    /// Compiles `text`. `wildcards`: whether `*`/`?` are wildcards (Like, resources, actions) or
    /// literal (Equals). `variables`: whether `${…}` is recognised. `lowercase`: fold ASCII case.
    static func compile(_ text: String, wildcards: Bool, variables: Bool, lowercase: Bool = false) throws(PatternError) -> CompiledPattern {
        var tokens: [PatternToken] = []
        var lit: [UInt8] = []
        func flush() {
            if !lit.isEmpty {
                tokens.append(.literal(lit))
                lit.removeAll()
            }
        }
        let b = Array(text.utf8)
        var i = 0
        while i < b.count {
            let c = b[i]
            if variables && c == UInt8(ascii: "$") && i + 1 < b.count && b[i + 1] == UInt8(ascii: "{") {
                guard let close = b[(i + 2)...].firstIndex(of: UInt8(ascii: "}")) else {
                    throw PatternError(message: "unterminated policy variable '${' in \"\(text)\"")
                }
                let name = String(decoding: b[(i + 2)..<close], as: UTF8.self)
                switch name {
                case "*": lit.append(UInt8(ascii: "*"))
                case "?": lit.append(UInt8(ascii: "?"))
                case "$": lit.append(UInt8(ascii: "$"))
                default:
                    guard let key = ConditionKeys.variableKey(name) else {
                        throw PatternError(message: "unknown policy variable '${\(name)}' (use ${aws:username}, ${aws:userid}, ${user}, ${jwt:CLAIM} or another condition key)")
                    }
                    flush()
                    tokens.append(.variable(key))
                }
                i = close + 1
                continue
            }
            if wildcards && c == UInt8(ascii: "*") {
                flush()
                tokens.append(.star)
            } else if wildcards && c == UInt8(ascii: "?") {
                flush()
                tokens.append(.one)
            } else if lowercase && c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") {
                lit.append(c + 32)
            } else {
                lit.append(c)
            }
            i += 1
        }
        flush()
        return CompiledPattern(tokens: tokens)
    }
}

/// `$NAME` placeholders (`$` then `[A-Z_][A-Z0-9_]*`, not `${…}` policy variables) in a policy
/// file's text, filled before the JSON is parsed.
enum Placeholders {
    struct Result {
        var bytes: [UInt8]
        /// Parsed offset → original offset, nil when nothing was substituted.
        var origin: [Int]?
        /// Unfilled placeholders: name and original byte offset of the `$`.
        var unfilled: [(name: String, offset: Int)]
    }

    static func isStart(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || b == 0x5F }
    static func isBody(_ b: UInt8) -> Bool { isStart(b) || (b >= 0x30 && b <= 0x39) }

    /// Substitutes every filled placeholder (JSON-escaped, as they normally sit in strings);
    /// unfilled ones stay as they are and are reported.
    static func fill(_ original: [UInt8], variables: [String: String]) -> Result {
        var out: [UInt8] = []
        var origin: [Int] = []
        var unfilled: [(String, Int)] = []
        var substituted = false
        out.reserveCapacity(original.count)
        origin.reserveCapacity(original.count + 1)
        var i = 0
        while i < original.count {
            let b = original[i]
            if b == UInt8(ascii: "$"), i + 1 < original.count, isStart(original[i + 1]) {
                var j = i + 2
                while j < original.count && isBody(original[j]) { j += 1 }
                let name = String(decoding: original[(i + 1)..<j], as: UTF8.self)
                if let value = variables[name] {
                    substituted = true
                    for v in jsonEscaped(value) {
                        out.append(v)
                        origin.append(i)
                    }
                } else {
                    unfilled.append((name, i))
                    for k in i..<j {
                        out.append(original[k])
                        origin.append(k)
                    }
                }
                i = j
                continue
            }
            out.append(b)
            origin.append(i)
            i += 1
        }
        origin.append(original.count)
        return Result(bytes: out, origin: substituted ? origin : nil, unfilled: unfilled)
    }

    static func jsonEscaped(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out += [0x5C, 0x22]
            case UInt8(ascii: "\\"): out += [0x5C, 0x5C]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            default: out.append(b)
            }
        }
        return out
    }
}
