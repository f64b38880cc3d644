import ArgumentParser
import Foundation
import TollgateConfig
import TollgateDates
import TollgateJSON
import TollgateToken
import TollgateTokenService

struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Issue and inspect security tokens.",
        subcommands: [Issue.self, Inspect.self, Revoke.self, List.self]
    )

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print credentials as the token endpoint would.")

        @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
        @Option(name: .long, help: "The app user (subject); fills ${user} and ${aws:username} in policies.") var user: String?
        @Option(name: .long, help: "Role name from the config's Roles (default: the PolicyFile role).") var role = TollgateConfig.defaultRole
        @Option(name: .long, help: "Lifetime in seconds (900-43200; default: TokenExpireTime).") var duration: Int?

        func run() async throws {
            let config = try loadConfigOrExit(config)
            guard config.roles[role] != nil else {
                printError("tollgate: unknown role \"\(role)\" (known: \(config.roles.keys.sorted().joined(separator: ", ")))")
                throw ExitCode(2)
            }
            if let upstream = config.upstream.roles[role] {
                printError("tollgate: the role \"\(role)\" is vended by the upstream STS \(upstream.upstream); its credentials come from the running token endpoint")
                throw ExitCode(2)
            }
            let lifetime = duration ?? config.tokenExpireTime
            guard (TollgateConfig.minimumTokenLifetime...TollgateConfig.maximumTokenLifetime).contains(lifetime) else {
                printError("tollgate: --duration must be between \(TollgateConfig.minimumTokenLifetime) and \(TollgateConfig.maximumTokenLifetime) seconds")
                throw ExitCode(2)
            }
            if let user, user.isEmpty || user.count > 128 || user.contains(where: { $0 == "/" || $0.isWhitespace }) {
                printError("tollgate: --user must be 1-128 characters without slashes or spaces")
                throw ExitCode(2)
            }
            let root = try resolveRootOrExit(config)
            let tokens = try TokenService(rootSecret: root.accessKeySecret, previousSecrets: config.previousAccessKeySecrets)
            let issued = try tokens.issue(subject: user, role: role, duration: Int64(lifetime), now: Date())
            print(TokenJSON.credentials(issued))
        }
    }

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Verify a token and print its claims.")

        @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
        @Argument(help: "The SecurityToken.") var token: String

        func run() async throws {
            let config = try loadConfigOrExit(config)
            let root = try resolveRootOrExit(config)
            let tokens = try TokenService(rootSecret: root.accessKeySecret, previousSecrets: config.previousAccessKeySecrets)
            do {
                let (claims, _) = try tokens.verify(token, now: Date())
                var json = JSONObjectWriter()
                json.add("Valid", true)
                json.add("KeyId", claims.keyId)
                json.add("AccessKeyId", claims.accessKeyId)
                json.add("Subject", claims.subject)
                json.add("Role", claims.role)
                json.add("SessionName", claims.sessionName)
                json.add("IssuedAt", WireDate.iso8601(claims.issuedAt))
                json.add("Expiration", WireDate.iso8601(claims.expiresAt))
                json.add("SessionPolicy", claims.sessionPolicy)
                print(json.finish())
            } catch {
                printError("tollgate: token refused: \(error)")
                throw ExitCode(1)
            }
        }
    }
}

extension TokenCommand {
    /// `tollgate token list`: what the server issued, from the audit file in the data directory.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List issued tokens from the audit file (who, which role, which access key, until when).",
            discussion: """
            Reads DataDirectory/token-audit.jsonl and its rotated copies (.1, .2), which `tollgate serve` \
            appends one line to for every credential it issues. Oldest first.
            """
        )

        @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
        @Option(name: .long, help: "How far back: 90s, 30m, 24h, 7d, or an ISO 8601 time.") var since = "24h"
        @Option(name: .long, help: "Only tokens of this subject (app user).") var subject: String?
        @Option(name: .long, help: "Only tokens of this role.") var role: String?
        @Flag(help: "Print a JSON array of the audit records.") var json = false

        func run() async throws {
            let config = try loadConfigOrExit(config)
            guard let cutoff = Self.cutoff(since, now: Date()) else {
                printError("tollgate: --since \"\(since)\" is not a duration (90s, 30m, 24h, 7d) or an ISO 8601 time")
                throw ExitCode(2)
            }
            let (all, skipped) = TokenAuditLog.read(dataDirectory: config.dataDirectory)
            if skipped > 0 {
                printError("tollgate: warning: skipped \(skipped) unreadable line\(skipped == 1 ? "" : "s") in \(config.dataDirectory)/\(TokenAuditLog.fileName)*")
            }
            // The records' times are all `YYYY-MM-DDTHH:MM:SSZ`, so they order as strings.
            let entries = all.filter { entry in
                entry.time >= cutoff && (subject == nil || entry.subject == subject) && (role == nil || entry.role == role)
            }
            if json {
                print("[" + entries.map(\.json).joined(separator: ",") + "]")
                return
            }
            let rows = [["TIME", "SUBJECT", "ROLE", "ACCESS KEY ID", "EXPIRATION", "VIA", "CLIENT"]] + entries.map {
                [$0.time, $0.subject ?? "-", $0.role, $0.accessKeyId, $0.expiration, $0.via, $0.clientAddress]
            }
            let widths = (0..<7).map { column in rows.map { $0[column].count }.max() ?? 0 }
            for row in rows {
                print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                    .trimmingCharacters(in: .whitespaces))
            }
        }

        /// The earliest time listed, formatted as the records are.
        static func cutoff(_ text: String, now: Date) -> String? {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
            // At most a century back: a larger count (`1e300d`) is no date at all.
            if let unit = text.last.flatMap({ units[$0] }), let count = Double(text.dropLast()), count >= 0,
               count * unit <= 100 * 365 * 86400 {
                return WireDate.iso8601(now.addingTimeInterval(-count * unit))
            }
            return WireDate.parseISO8601(text).map { WireDate.iso8601(Date(timeIntervalSince1970: $0)) }
        }
    }
}
