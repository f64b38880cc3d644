import ArgumentParser
import AsyncHTTPClient
import Foundation
import TollgateHTTP

/// `tollgate healthcheck`: the image's HEALTHCHECK. Asks the token endpoint the config names for
/// `/healthz`, so the check follows the configured address and port. Exit 0 healthy, 1 not.
struct HealthcheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exit 0 when the configured token endpoint answers /healthz, 1 otherwise.",
        discussion: "Asks http(s)://ListenAddress:Port/healthz (127.0.0.1 when ListenAddress is a wildcard; https when TLS is set)."
    )

    @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
    @Option(name: .long, help: "Seconds to wait for the answer.") var timeout = 3

    func run() async throws {
        let url: String
        do { url = try loadConfigOrExit(config).healthCheckURL } catch { throw ExitCode(1) }
        do {
            let status = try await LocalHTTP.withClient(for: url) { client in
                try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(Int64(timeout))).status
            }
            guard status == .ok else {
                printError("tollgate: \(url) answered \(status.code)")
                throw ExitCode(1)
            }
            print("\(url): ok")
        } catch let error as ExitCode {
            throw error
        } catch {
            printError("tollgate: \(url): \(error)")
            throw ExitCode(1)
        }
    }
}
