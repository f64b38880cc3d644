import Foundation
import Logging
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// A listener's `TLS`/`GatewayTLS` entry: PEM files, resolved by the configuration against config.json's directory.
public struct TLSFiles: Sendable, Equatable {
    /// The certificate, followed by any intermediates.
    public var certificateFile: String
    public var keyFile: String

    public init(certificateFile: String, keyFile: String) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

/// A certificate or key file that cannot be used: the file and why, as one line (`file: message`).
public struct TLSFileError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let message: String

    public init(file: String, _ message: String) {
        self.file = file
        self.message = message
    }

    public var description: String { "\(file): \(message)" }
}

/// A listener's certificate chain and private key (`TLS` / `GatewayTLS`). Each new connection's
/// handshake takes the pair in force (swift-nio-ssl's `sslContextCallback`); a connection
/// already open keeps the one it started with. `reload` swaps the pair only when the new files
/// are a valid chain and a key that matches it.
public final class TLSCertificates: Sendable {
    public let files: TLSFiles
    private let current: Mutex<Pair>
    /// The files' stamps when last looked at, for `reloadIfChanged`.
    private let seenStamp: Mutex<String>

    struct Pair: Sendable {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
    }

    /// Reads and checks the files; the error names the file at fault.
    public init(files: TLSFiles) throws(TLSFileError) {
        self.files = files
        self.seenStamp = Mutex("")
        seenStamp.withLock { $0 = Self.stamp(files) }
        self.current = Mutex(try Self.load(files))
    }

    /// The listener's TLS configuration: TLS 1.2 or later, HTTP/1.1 by ALPN, and the current
    /// pair for every handshake.
    public var configuration: TLSConfiguration {
        let pair = current.withLock { $0 }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: pair.chain.map { .certificate($0) }, privateKey: .privateKey(pair.key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = ["http/1.1"]
        configuration.sslContextCallback = { [self] _, promise in
            let pair = self.current.withLock { $0 }
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = pair.chain.map { .certificate($0) }
            override.privateKey = .privateKey(pair.key)
            promise.succeed(override)
        }
        return configuration
    }

    /// The leaf certificate's serial number (hex), for log lines.
    public var serial: String {
        current.withLock { $0.chain[0].serialNumber.map { String(format: "%02x", $0) }.joined() }
    }

    /// Re-reads the files when either changed since last looked at; false when neither did. A
    /// broken replacement is reported once: its stamp counts as seen.
    public func reloadIfChanged() throws(TLSFileError) -> Bool {
        let stamp = Self.stamp(files)
        guard seenStamp.withLock({ seen in
            defer { seen = stamp }
            return seen != stamp
        }) else { return false }
        try reload()
        return true
    }

    /// Re-reads the files. On any error the pair in force stays and the error is thrown.
    public func reload() throws(TLSFileError) {
        let fresh = try Self.load(files)
        current.withLock { $0 = fresh }
    }

    static func load(_ files: TLSFiles) throws(TLSFileError) -> Pair {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(try read(files.certificateFile))
        } catch let error as TLSFileError {
            throw error
        } catch {
            throw TLSFileError(file: files.certificateFile, "not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else { throw TLSFileError(file: files.certificateFile, "holds no PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: try read(files.keyFile), format: .pem)
        } catch let error as TLSFileError {
            throw error
        } catch {
            throw TLSFileError(file: files.keyFile, "not a PEM private key (\(error))")
        }
        // BoringSSL refuses a key that does not match the leaf certificate.
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFileError(file: files.keyFile, "the private key does not match the certificate in \(files.certificateFile)")
        }
        return Pair(chain: chain, key: key)
    }

    private static func read(_ file: String) throws(TLSFileError) -> [UInt8] {
        do {
            return Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        } catch {
            throw TLSFileError(file: file, "cannot read the file (\((error as NSError).localizedDescription))")
        }
    }

    /// Modification time and size of both files, to notice a replacement.
    private static func stamp(_ files: TLSFiles) -> String {
        [files.certificateFile, files.keyFile].map { file in
            let attributes = try? FileManager.default.attributesOfItem(atPath: file)
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(modified)/\(attributes?[.size] as? Int ?? -1)"
        }.joined(separator: ",")
    }
}

/// Reloads the listeners' certificates when their files change (checked every `interval`) and
/// on SIGHUP. A broken replacement is logged with its file and reason; the certificate in
/// force stays, and open connections are never touched.
public struct TLSReloader: Service {
    /// Listener name ("token", "gateway") and its certificates.
    let listeners: [(name: String, certificates: TLSCertificates)]
    let logger: Logger
    let interval: Duration
    /// Where the files are read (it blocks): the server's one blocking pool.
    let pool: NIOThreadPool

    public init(listeners: [(name: String, certificates: TLSCertificates)], logger: Logger, interval: Duration = .seconds(2),
                pool: NIOThreadPool) {
        self.pool = pool
        self.listeners = listeners
        self.logger = logger
        self.interval = interval
    }

    public func run() async throws {
        // The files are read on `pool` (they block), never on the task's executor.
        await runReloadLoop(every: interval, poll: { try? await pool.runIfActive { reload(reason: "file changed", onlyIfChanged: true) } },
                            onSignal: { try? await pool.runIfActive { reload(reason: "SIGHUP", onlyIfChanged: false) } })
    }

    func reload(reason: String, onlyIfChanged: Bool) {
        for (name, certificates) in listeners {
            do {
                if onlyIfChanged {
                    guard try certificates.reloadIfChanged() else { continue }
                } else {
                    try certificates.reload()
                }
                logger.info("TLS certificate reloaded", metadata: [
                    "tls.listener": "\(name)", "tls.reason": "\(reason)",
                    "tls.file": "\(certificates.files.certificateFile)", "tls.serial": "\(certificates.serial)",
                ])
            } catch {
                logger.error("TLS certificate reload refused, keeping the previous certificate", metadata: [
                    "tls.listener": "\(name)", "tls.file": "\(error.file)", "tls.error": "\(error.message)",
                ])
            }
        }
    }
}
