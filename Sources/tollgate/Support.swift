import ArgumentParser
import Foundation
import TollgateConfig
import TollgateHTTP

/// Writes one line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Writes lines to standard output at once, bypassing stdio's buffer.
func printNow(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// The config file a command reads: `--config`, else `$TOLLGATE_CONFIG` (the Docker image sets
/// it), else nil (the command's default, `./config.json`).
func configPath(_ flag: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
    if let flag { return flag }
    if let path = environment["TOLLGATE_CONFIG"], !path.isEmpty { return path }
    return nil
}

/// Loads the config (`configPath`, or `./config.json`) or stops with one clear line and exit code 2.
func loadConfigOrExit(_ flag: String?) throws -> TollgateConfig {
    do {
        return try TollgateConfig.load(path: configPath(flag) ?? "config.json")
    } catch {
        printError("tollgate: config error: \(error)")
        throw ExitCode(2)
    }
}

func resolveRootOrExit(_ config: TollgateConfig) throws -> RootCredentials {
    do {
        return try RootCredentials.resolve(config)
    } catch {
        printError("tollgate: config error: \(error)")
        throw ExitCode(2)
    }
}

/// Reads a listener's certificate and key, or stops with one line naming the file and exit code 2.
func loadCertificatesOrExit(_ files: TLSFiles) throws -> TLSCertificates {
    do {
        return try TLSCertificates(files: files)
    } catch {
        printError("tollgate: config error: \(error)")
        throw ExitCode(2)
    }
}
