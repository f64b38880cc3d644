import ArgumentParser
import Foundation
import TollgateConfig
import TollgateDates
import TollgateJSON
import Logging
import NIOPosix
import TollgateStorage
import TollgateStore
import TollgateToken
import TollgateTokenService

extension TokenCommand {
    /// `tollgate token revoke`: records a revocation in the data directory's revocation file.
    /// A running server picks it up within about a second; it survives restarts.
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke credentials: every token of a subject or a role issued until now, or one access key.",
            discussion: """
            Writes DataDirectory/revocations.json (atomically, mode 0600); a running server applies it within \
            about a second and the gateway answers InvalidAccessKeyId to the revoked credentials. Prints the \
            entry recorded. Give exactly one of --subject, --access-key-id, --role. Exit status 2 on bad input.
            """
        )

        @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
        @Option(name: .long, help: "Revoke every token issued to this subject (app user) until now.") var subject: String?
        @Option(name: .long, help: "Revoke the token with this temporary access key id (STS.…).") var accessKeyId: String?
        @Option(name: .long, help: "Revoke every token of this role issued until now.") var role: String?

        func run() async throws {
            let targets: [(RevocationKind, String)] = [
                subject.map { (.subject, $0) }, accessKeyId.map { (.accessKeyId, $0) }, role.map { (.role, $0) },
            ].compactMap { $0 }
            guard targets.count == 1, case let (kind, value)? = targets.first else {
                printError("tollgate: give exactly one of --subject, --access-key-id, --role")
                throw ExitCode(2)
            }
            let config = try loadConfigOrExit(config)
            if kind == .role, config.roles[value] == nil {
                printError("tollgate: warning: role \"\(value)\" is not in the config (known: \(config.roles.keys.sorted().joined(separator: ", ")))")
            }
            do { try Revocation.validate(kind: kind, value: value) } catch {
                printError("tollgate: \(error)")
                throw ExitCode(2)
            }
            let store: RevocationStore
            var objects: (any ObjectStore)?
            if case .s3 = config.storage.backend {
                // The instances' shared list, in the storage backend.
                do {
                    objects = try await StoreFactory.open(config.storage, dataDirectory: config.dataDirectory,
                                                          maxUploadsPerBucket: config.maxMultipartUploadsPerBucket, pool: .singleton,
                                                          logger: Logger(label: "tollgate"))
                } catch {
                    printError("tollgate: cannot open the object store: \(error)")
                    throw ExitCode(1)
                }
                store = RevocationStore(shared: objects!.sharedDocuments!)
            } else {
                store = try openRevocationsOrExit(config, pool: .singleton)
            }
            do {
                let entry = try await store.record(kind, value, now: Date())
                try? await objects?.close()
                var json = JSONObjectWriter()
                json.add("Type", entry.kind.rawValue)
                json.add("Value", entry.value)
                json.add("RevokedAt", WireDate.iso8601(entry.revokedAt))
                json.add("KeptUntil", WireDate.iso8601(entry.prunableAt(maxTokenLifetime: store.maxTokenLifetime)))
                json.add("File", store.path)
                print(json.finish())
            } catch {
                try? await objects?.close()
                printError("tollgate: cannot record the revocation: \(error)")
                throw ExitCode(1)
            }
        }
    }
}

/// Opens the revocation list in the config's data directory, or stops with one line and exit
/// code 2 (a broken file must not be ignored: that would lift every revocation).
func openRevocationsOrExit(_ config: TollgateConfig, pool: NIOThreadPool) throws -> RevocationStore {
    do {
        return try RevocationStore(dataDirectory: config.dataDirectory, pool: pool)
    } catch {
        printError("tollgate: revocation error: \(error)")
        throw ExitCode(2)
    }
}
