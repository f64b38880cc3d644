import ArgumentParser
import Foundation
import TollgateConfig
import TollgateMobile
import TollgatePolicy

/// `tollgate policy`: validate policy files and ask "would this be allowed?".
/// A thin shell: parsing, validation and evaluation live in TollgatePolicy.
struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Check and simulate policy files.",
        subcommands: [Check.self, Simulate.self]
    )

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate policy files; prints file:line:column: message for every problem.",
            discussion: """
            Errors (the policy would not load: bad JSON, an unknown action, …) and warnings (it loads but \
            cannot work as written: a condition key no request carries, a resource that never matches an \
            action's resource type, an Allow a Deny always beats) go to standard error.
            Exit status: 0 when every file is valid, 1 when any has an error (or, with --strict, a warning), \
            2 for a bad config.
            """
        )

        @Argument(help: "Policy files to check.")
        var files: [String]

        @Option(help: "config.json supplying placeholder Variables (default: $TOLLGATE_CONFIG, else ./config.json when present).")
        var config: String?

        @Option(name: .customLong("var"), help: "A placeholder value, NAME=VALUE (repeatable; overrides the config).")
        var vars: [String] = []

        @Flag(help: "Fail (exit 1) on warnings too.")
        var strict = false

        func run() async throws {
            let variables = try placeholderVariables(config: config, vars: vars)
            let upstreams = upstreamsByPolicyFile(config: config)
            var invalid = false
            for file in files {
                guard let text = readPolicyText(file) else {
                    invalid = true
                    continue
                }
                do {
                    let policy = try Policy.load(text: text, file: file, variables: variables)
                    // A policy an upstream STS receives is also checked against what it takes.
                    let warnings = policy.warnings + upstreamWarnings(text: text, file: file, variables: variables, upstreams: upstreams)
                    for d in warnings { writeStandardError(d.description) }
                    let count = warnings.count
                    print(count == 0 ? "\(file): ok" : "\(file): ok, \(count) warning\(count == 1 ? "" : "s")")
                    if strict && count > 0 { invalid = true }
                } catch {
                    invalid = true
                    for d in error.diagnostics { writeStandardError(d.description) }
                }
            }
            if invalid { throw ExitCode(1) }
        }
    }

    struct Simulate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Evaluate one request against a policy (and an optional session policy).",
            discussion: """
            Prints Allow, Deny (explicit) or Deny (implicit) with the deciding statement's file and line.
            Exit status: 0 allow, 1 deny, 2 bad input (invalid policy, unknown action, malformed resource).
            Example: tollgate policy simulate --policy policy/user_isolated_policy.txt \\
                       --action oss:ListObjects --resource acs:oss:*:*:photos \\
                       --context aws:username=alice --context oss:Prefix=alice/
            The mobile Storage API's permissions: --collections ROLE (or - for anonymous callers)
            instead of --policy evaluates the statements the config's Collections grant that role:
                     tollgate policy simulate --collections editor --action s3:PutObject \\
                       --resource arn:aws:s3:::tollgate/drafts/ben/dogs --context aws:username=eva
            """
        )

        @Option(help: "The role's policy file (required, unless --collections).")
        var policy: String?

        @Option(help: "Instead of --policy: the statements config.json's Collections grant this role (- : anonymous callers).")
        var collections: String?

        @Option(help: "A session policy file; the request must be allowed by both.")
        var sessionPolicy: String?

        @Option(help: "The action, e.g. oss:GetObject or s3:ListBucket (required).")
        var action: String?

        @Option(help: "The resource, e.g. acs:oss:*:*:bucket/key or arn:aws:s3:::bucket/key (required).")
        var resource: String?

        @Option(help: "A request condition key, KEY=VALUE (repeatable), e.g. aws:username=alice, acs:SourceIp=10.0.0.1.")
        var context: [String] = []

        @Option(help: "config.json supplying placeholder Variables (default: $TOLLGATE_CONFIG, else ./config.json when present).")
        var config: String?

        @Option(name: .customLong("var"), help: "A placeholder value, NAME=VALUE (repeatable; overrides the config).")
        var vars: [String] = []

        func run() async throws {
            guard policy != nil || collections != nil, let action, let resource else {
                writeStandardError("tollgate policy simulate: --policy (or --collections), --action and --resource are required")
                throw ExitCode(2)
            }
            let variables = try placeholderVariables(config: config, vars: vars)
            let role: Policy
            if let policyPath = policy {
                role = try loadOrExit(policyPath, variables)
            } else if let statements = try collectionStatements(collections!) {
                role = statements
            } else {
                print("Deny (implicit): Collections grant \(collections! == "-" ? "anonymous callers" : "the role \(collections!)") no permission")
                throw ExitCode(1)
            }
            let session = try sessionPolicy.map { try loadOrExit($0, variables) }
            do {
                let requestContext = try PolicySimulator.parseContext(context, now: Date())
                let result = try PolicySimulator.simulate(
                    EffectivePolicy(role: role, session: session), action: action, resource: resource, context: requestContext
                )
                for line in result.lines { print(line) }
                if !result.decision.isAllowed { throw ExitCode(1) }
            } catch let error as SimulationInputError {
                writeStandardError("tollgate policy simulate: \(error)")
                throw ExitCode(2)
            }
        }

        /// The statements `Collections` grants `role` ("-": anonymous callers); nil: none.
        private func collectionStatements(_ role: String) throws -> Policy? {
            let path = configPath(config) ?? "config.json"
            let loaded: TollgateConfig
            do { loaded = try TollgateConfig.load(path: path) } catch {
                writeStandardError("tollgate: config error: \(error)")
                throw ExitCode(2)
            }
            if role != "-", loaded.roles[role] == nil {
                writeStandardError("tollgate policy simulate: \(path) has no role \(role) (roles: \(loaded.roles.keys.sorted().joined(separator: ", ")))")
                throw ExitCode(2)
            }
            guard let text = CollectionPolicy.document(role: role == "-" ? nil : role, collections: loaded.collections) else { return nil }
            do { return try Policy.load(text: text, file: "\(path) (Collections, role \(role == "-" ? "anonymous" : role))") } catch {
                for d in error.diagnostics { writeStandardError(d.description) }
                throw ExitCode(2)
            }
        }

        private func loadOrExit(_ path: String, _ variables: [String: String]) throws -> Policy {
            guard let text = readPolicyText(path) else { throw ExitCode(2) }
            do {
                return try Policy.load(text: text, file: path, variables: variables)
            } catch {
                for d in error.diagnostics { writeStandardError(d.description) }
                throw ExitCode(2)
            }
        }
    }
}

/// Placeholder values: the config's `Variables` (from `--config` or `$TOLLGATE_CONFIG`, or
/// `./config.json` when it exists), overridden by `--var NAME=VALUE`.
private func placeholderVariables(config: String?, vars: [String]) throws -> [String: String] {
    var variables: [String: String] = [:]
    if let config = configPath(config) {
        do {
            variables = try TollgateConfig.load(path: config).variables
        } catch {
            writeStandardError("tollgate: config error: \(error)")
            throw ExitCode(2)
        }
    } else if FileManager.default.fileExists(atPath: "config.json") {
        do {
            variables = try TollgateConfig.load(path: "config.json").variables
        } catch {
            writeStandardError("tollgate: warning: ignoring ./config.json: \(error)")
        }
    }
    for pair in vars {
        guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
            writeStandardError("tollgate: --var \"\(pair)\" is not NAME=VALUE")
            throw ExitCode(2)
        }
        variables[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
    }
    return variables
}

private func readPolicyText(_ path: String) -> String? {
    do {
        return try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8)
    } catch {
        writeStandardError("\(path): cannot read the file: \((error as NSError).localizedDescription)")
        return nil
    }
}

private func writeStandardError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
