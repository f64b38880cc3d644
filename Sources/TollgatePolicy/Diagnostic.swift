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
public struct PolicyDiagnostic: Sendable, Hashable, Error, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    init(file: String, at position: SourcePosition, _ message: String) {
        self.init(file: file, line: position.line, column: position.column, message: message)
    }

    /// `file:line:column: message`, the form compilers and editors understand.
    public var description: String { "\(file):\(line):\(column): \(message)" }
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
