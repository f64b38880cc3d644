import ArgumentParser
import Foundation
import TollgateServer
import TollgateToken

struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Issue and inspect security tokens.",
        subcommands: [Issue.self, Inspect.self, Revoke.self]
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
                json.add("IssuedAt", Timestamp.iso8601(claims.issuedAt))
                json.add("Expiration", Timestamp.iso8601(claims.expiresAt))
                json.add("SessionPolicy", claims.sessionPolicy)
                print(json.finish())
            } catch {
                printError("tollgate: token refused: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
