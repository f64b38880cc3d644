import AsyncHTTPClient
import NIOSSL

/// Requests from the CLI to this machine's own listeners (`tollgate healthcheck`, `tollgate bucket`).
public enum LocalHTTP {
    /// `http(s)://HOST:PORT` of a listener as a client on the same machine reaches it: a
    /// wildcard address (`0.0.0.0`, `::`) through 127.0.0.1 / [::1].
    public static func baseURL(address: String, port: Int, tls: Bool) -> String {
        let host = switch address {
        case "", "0.0.0.0": "127.0.0.1"
        case "::", "[::]": "[::1]"
        case let address where address.contains(":") && !address.hasPrefix("["): "[\(address)]"
        default: address
        }
        return "\(tls ? "https" : "http")://\(host):\(port)"
    }

    /// Runs `body` with a client for `url`. HTTPS to a loopback host skips certificate
    /// verification: the listener's certificate names the public host, and the connection
    /// never leaves the machine. Every other URL is verified as usual.
    public static func withClient<T: Sendable>(for url: String, _ body: (HTTPClient) async throws -> T) async throws -> T {
        let loopback = ["https://127.0.0.1:", "https://[::1]:", "https://localhost:"].contains { url.hasPrefix($0) }
        guard loopback else { return try await body(HTTPClient.shared) }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}
