import ArgumentParser
import Foundation
import TollgateServer

/// Writes one line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Writes lines to standard output at once, bypassing stdio's buffer.
func printNow(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Loads the config or stops with one clear line and exit code 2.
func loadConfigOrExit(_ path: String) throws -> TollgateConfig {
    do {
        return try TollgateConfig.load(path: path)
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
