/// A position in a policy file: 1-based line and column (columns count Unicode scalars).
public struct SourcePosition: Sendable, Hashable, Comparable {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public static func < (lhs: SourcePosition, rhs: SourcePosition) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }
}

/// One problem found while loading a policy, rendered as `file:line:column: message`.
///
/// An error makes the policy invalid; a warning names something that loads but cannot do what
/// its author meant (a key no request carries, an Allow a Deny always beats).
public struct PolicyDiagnostic: Sendable, Hashable, Error, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable {
        case error
        case warning
    }

    public var file: String
    public var line: Int
    public var column: Int
    public var message: String
    public var severity: Severity

    public init(file: String, line: Int, column: Int, message: String, severity: Severity = .error) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.severity = severity
    }

    init(file: String, at position: SourcePosition, _ message: String, severity: Severity = .error) {
        self.init(file: file, line: position.line, column: position.column, message: message, severity: severity)
    }

    /// `file:line:column: message` (`…: warning: message` for a warning), the form compilers
    /// and editors understand.
    public var description: String {
        severity == .warning ? "\(file):\(line):\(column): warning: \(message)" : "\(file):\(line):\(column): \(message)"
    }
}

/// Loading a policy failed; `diagnostics` holds every problem found, in source order.
public struct PolicyLoadError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [PolicyDiagnostic]

    public init(diagnostics: [PolicyDiagnostic]) {
        self.diagnostics = diagnostics
    }

    /// One diagnostic per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

/// Suggestions for misspelt names: the closest candidate by edit distance (case-insensitive),
/// when it is close enough to be a likely typo.
enum Spelling {
    /// The candidate nearest to `word`, if at most a third of its letters (and at least one,
    /// at most three) differ.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased().unicodeScalars)
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let d = distance(target, Array(candidate.lowercased().unicodeScalars))
            if d < (best?.distance ?? .max) { best = (candidate, d) }
        }
        guard let best, best.distance <= min(3, max(1, target.count / 3)) else { return nil }
        return best.name
    }

    /// Levenshtein distance.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
