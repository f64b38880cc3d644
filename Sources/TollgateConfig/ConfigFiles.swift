import Foundation
import Synchronization
import TollgateIdentity
import TollgateMobile
import TollgatePolicy
import TollgateStore
import TollgateToken
import TollgateUpstream

/// One problem that refuses a configuration: in config.json, or in one of its policy files.
public enum ConfigProblem: Sendable, CustomStringConvertible {
    case config(ConfigError)
    case policy(PolicyDiagnostic)

    public var file: String {
        switch self {
        case .config(let error): error.file
        case .policy(let diagnostic): diagnostic.file
        }
    }

    /// `file: message` or `file:line:column: message`.
    public var description: String {
        switch self {
        case .config(let error): error.description
        case .policy(let diagnostic): diagnostic.description
        }
    }
}

/// config.json or a policy file it names was refused. `contents` holds what was read of every
/// file the attempt needed (nil: unreadable), so an edit to any of them is noticed.
public struct ConfigLoadError: Error, Sendable, CustomStringConvertible {
    public let problems: [ConfigProblem]
    public let contents: [String: Data?]

    public var description: String { problems.map(\.description).joined(separator: "\n") }

    package init(problems: [ConfigProblem], contents: [String: Data?]) {
        self.problems = problems
        self.contents = contents
    }
}

/// config.json and the policy files of its roles, read and validated together: nothing is used
/// unless all of it is good.
public struct ConfigFiles: Sendable {
    public let config: TollgateConfig
    /// Role name → its compiled policy.
    public let policies: [String: Policy]
    /// Role name → the session policy its upstream receives (roles vended upstream only).
    public var sessionPolicies: [String: SessionPolicyTemplate] = [:]
    /// config.json, every policy file and upstream key file → the bytes they were built from.
    public let contents: [String: Data]

    public static func read(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigLoadError) -> ConfigFiles {
        var contents: [String: Data?] = [:]
        func fail(_ problems: [ConfigProblem]) -> ConfigLoadError { ConfigLoadError(problems: problems, contents: contents) }
        let config: TollgateConfig
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            contents[path] = data
            config = try TollgateConfig.parse(data, path: path, environment: environment)
        } catch let error as ConfigError {
            throw fail([.config(error)])
        } catch {
            contents[path] = .some(nil)
            throw fail([.config(ConfigError(file: path, "cannot read the file (\(error.localizedDescription))"))])
        }
        var policies: [String: Policy] = [:]
        var sessionPolicies: [String: SessionPolicyTemplate] = [:]
        var problems: [ConfigProblem] = []
        for (role, file) in config.roles.sorted(by: { $0.key < $1.key }) {
            do throws(PolicyLoadError) {
                let data: Data
                if let read = contents[file] {
                    guard let read else { continue }  // unreadable, already reported
                    data = read
                } else {
                    do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
                        contents[file] = .some(nil)
                        throw PolicyLoadError(diagnostics: [
                            PolicyDiagnostic(file: file, line: 1, column: 1, message: "cannot read the file (\(error.localizedDescription))"),
                        ])
                    }
                    contents[file] = data
                }
                guard let text = String(data: data, encoding: .utf8) else {
                    throw PolicyLoadError(diagnostics: [PolicyDiagnostic(file: file, line: 1, column: 1, message: "the file is not UTF-8")])
                }
                policies[role] = try Policy.load(text: text, file: file, variables: config.variables)
                if let upstream = config.upstream.roles[role], let settings = config.upstream.upstreams[upstream.upstream] {
                    let template = try SessionPolicyTemplate.make(text: text, file: file, variables: config.variables)
                    // Never sent cut short: a policy the upstream cannot take refuses the config.
                    guard template.fixedByteCount <= settings.maxPolicyBytes else {
                        throw PolicyLoadError(diagnostics: [PolicyDiagnostic(
                            file: file, line: 1, column: 1,
                            message: "the session policy of role \(role) is \(template.fixedByteCount) bytes minified; the upstream \(settings.name) (\(settings.kind.rawValue)) takes at most \(settings.maxPolicyBytes) (MaxPolicyBytes)")])
                    }
                    sessionPolicies[role] = template
                }
            } catch {
                problems += error.diagnostics.map(ConfigProblem.policy)
            }
        }
        guard problems.isEmpty else { throw fail(problems) }
        // Upstream key files: read by the config already; their bytes are kept so that a reload
        // notices a rotated key.
        for file in config.upstream.keyFiles { contents[file] = .some(try? Data(contentsOf: URL(fileURLWithPath: file))) }
        return ConfigFiles(config: config, policies: policies, sessionPolicies: sessionPolicies, contents: contents.compactMapValues { $0 })
    }
}
