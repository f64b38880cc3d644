import Foundation
import Synchronization
import TollgatePolicy

/// The role policies, read from the files the config names. Loading validates every file first
/// and keeps the last good set when any file is broken, so a bad edit never replaces a working
/// policy. Tokens name their role; its policy is looked up here at request time.
public final class PolicyStore: Sendable {
    private let roles: [String: String]
    private let variables: [String: String]
    private let policies: Mutex<[String: Policy]>
    /// The policy files' stamps when last looked at, for `reloadIfChanged`.
    private let seenStamps: Mutex<[String: String]>

    /// Loads every role's policy; throws the diagnostics of all broken files.
    public init(roles: [String: String], variables: [String: String]) throws(PolicyLoadError) {
        self.roles = roles
        self.variables = variables
        self.policies = Mutex(try Self.loadAll(roles: roles, variables: variables))
        self.seenStamps = Mutex([:])
        seenStamps.withLock { $0 = fileStamps() }
    }

    public convenience init(config: TollgateConfig) throws(PolicyLoadError) {
        try self.init(roles: config.roles, variables: config.variables)
    }

    public var roleNames: [String] { roles.keys.sorted() }

    /// Modification time and size of every policy file, to notice edits.
    public func fileStamps() -> [String: String] {
        var stamps: [String: String] = [:]
        for file in Set(roles.values) {
            let attributes = try? FileManager.default.attributesOfItem(atPath: file)
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            stamps[file] = "\(modified)/\(attributes?[.size] as? Int ?? -1)"
        }
        return stamps
    }

    public func policy(forRole role: String) -> Policy? {
        policies.withLock { $0[role] }
    }

    /// Re-reads every file when one changed since last looked at; false when none did. A broken
    /// edit is reported once: its stamp counts as seen.
    public func reloadIfChanged() throws(PolicyLoadError) -> Bool {
        let stamps = fileStamps()
        guard seenStamps.withLock({ seen in
            defer { seen = stamps }
            return seen != stamps
        }) else { return false }
        try reload()
        return true
    }

    /// Re-reads every file. On any error the current policies stay in force and the error is thrown.
    public func reload() throws(PolicyLoadError) {
        let fresh = try Self.loadAll(roles: roles, variables: variables)
        policies.withLock { $0 = fresh }
    }

    static func loadAll(roles: [String: String], variables: [String: String]) throws(PolicyLoadError) -> [String: Policy] {
        var loaded: [String: Policy] = [:]
        var diagnostics: [PolicyDiagnostic] = []
        for (role, file) in roles.sorted(by: { $0.key < $1.key }) {
            do {
                loaded[role] = try Policy.load(file: file, variables: variables)
            } catch {
                diagnostics += error.diagnostics
            }
        }
        guard diagnostics.isEmpty else { throw PolicyLoadError(diagnostics: diagnostics) }
        return loaded
    }
}

extension Policy {
    /// Reads and compiles a policy file; an unreadable file is a diagnostic at 1:1.
    public static func load(file: String, variables: [String: String]) throws(PolicyLoadError) -> Policy {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw PolicyLoadError(diagnostics: [
                PolicyDiagnostic(file: file, line: 1, column: 1, message: "cannot read the file (\(error.localizedDescription))"),
            ])
        }
        return try load(text: text, file: file, variables: variables)
    }
}
