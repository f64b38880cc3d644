import Foundation
import TollgateCrypto

/// The gateway's root credentials: the root of all signing keys, and full access to the gateway.
public struct RootCredentials: Sendable {
    public let accessKeyID: String
    public let accessKeySecret: String
    /// True when this call generated the secret (first start): the caller prints it once.
    public let generated: Bool

    public static let fileName = "root-credentials.json"

    /// Uses the config's secret, or the one persisted in the data directory, or generates one
    /// (32 random bytes) and persists it there with mode 0600. An empty `AccessKeyID` is derived
    /// from the secret, so every instance sharing the secret agrees on it without state.
    public static func resolve(_ config: TollgateConfig) throws(ConfigError) -> RootCredentials {
        if !config.accessKeySecret.isEmpty {
            return RootCredentials(
                accessKeyID: config.accessKeyID.isEmpty ? try derivedID(config.accessKeySecret) : config.accessKeyID,
                accessKeySecret: config.accessKeySecret, generated: false
            )
        }
        let path = (config.dataDirectory as NSString).appendingPathComponent(fileName)
        if let stored = try read(path) {
            return RootCredentials(
                accessKeyID: config.accessKeyID.isEmpty ? stored.id : config.accessKeyID,
                accessKeySecret: stored.secret, generated: false
            )
        }
        let secret: String
        do { secret = Base64.encodeURL(try Crypto.randomBytes(count: 32)) } catch {
            throw ConfigError(file: path, "cannot generate a secret: \(error)")
        }
        let id = config.accessKeyID.isEmpty ? try derivedID(secret) : config.accessKeyID
        if try !create(path, id: id, secret: secret), let stored = try read(path) {
            // Another process created it first: use theirs.
            return RootCredentials(accessKeyID: stored.id, accessKeySecret: stored.secret, generated: false)
        }
        return RootCredentials(accessKeyID: id, accessKeySecret: secret, generated: true)
    }

    static func derivedID(_ secret: String) throws(ConfigError) -> String {
        do {
            let digest = try Crypto.hmacSHA256(key: Array(secret.utf8), "tollgate/root-access-key-id/v1")
            return "TG" + Hex.encode(digest.prefix(9)).uppercased()
        } catch {
            throw ConfigError(file: "", "cannot derive the access key id: \(error)")
        }
    }

    private struct Stored: Codable {
        var AccessKeyID: String
        var AccessKeySecret: String
    }

    private static func read(_ path: String) throws(ConfigError) -> (id: String, secret: String)? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let stored = try JSONDecoder().decode(Stored.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            guard stored.AccessKeySecret.utf8.count >= TollgateConfig.minimumSecretLength else {
                throw ConfigError(file: path, "AccessKeySecret is shorter than \(TollgateConfig.minimumSecretLength) bytes")
            }
            return (stored.AccessKeyID, stored.AccessKeySecret)
        } catch let error as ConfigError {
            throw error
        } catch {
            throw ConfigError(file: path, "cannot read the stored root credentials (\(error))")
        }
    }

    /// Creates the file with O_EXCL and mode 0600, fsynced. Returns false if it already exists.
    private static func create(_ path: String, id: String, secret: String) throws(ConfigError) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigError(file: directory, "cannot create the data directory (\(error.localizedDescription))")
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0 {
            if errno == EEXIST { return false }
            throw ConfigError(file: path, "cannot create the file (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(Stored(AccessKeyID: id, AccessKeySecret: secret)) } catch {
            throw ConfigError(file: path, "cannot encode the root credentials")
        }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            unlink(path)
            throw ConfigError(file: path, "cannot write the file (\(String(cString: strerror(errno))))")
        }
        return true
    }
}
