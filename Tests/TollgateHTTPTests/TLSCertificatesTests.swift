import Foundation
import Testing
@testable import TollgateHTTP

// Two self-signed P-256 test pairs (CN tollgate-test and tollgate-test-2, valid to 2126), made
// with `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500`.
/// Serial 375ef6cc….
private let firstCertificate = """
    -----BEGIN CERTIFICATE-----
    MIIBhjCCAS2gAwIBAgIUN172zO274M7S9kORD0g+FJwTob8wCgYIKoZIzj0EAwIw
    GDEWMBQGA1UEAwwNdG9sbGdhdGUtdGVzdDAgFw0yNjExMjMxNjQ4MzZaGA8yMTI2
    MTAzMDE2NDgzNlowGDEWMBQGA1UEAwwNdG9sbGdhdGUtdGVzdDBZMBMGByqGSM49
    AgEGCCqGSM49AwEHA0IABNb1eV+FPtcPfX7eJf/e0wRfrem1b84yhq6f86Kiirkw
    G49wJ3NGIHUowDakDrO6t8LaTljUCRFI2gMRlir4xxqjUzBRMB0GA1UdDgQWBBSU
    uAt5EeCQSO6ZEcjNKE+O6bU1ETAfBgNVHSMEGDAWgBSUuAt5EeCQSO6ZEcjNKE+O
    6bU1ETAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIE7px0cLxwIx
    psbGC8rytQQvneUp+N8T+yBaeaKeNr2tAiBmFBaycLrGeSDC0DiB2pwH1V3QXywh
    q+ZUBorpWoUWeQ==
    -----END CERTIFICATE-----
    """
/// The first certificate's key.
private let firstKey = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghI+Bsuid0HlJvaM+
    5Ci1P72NxtXxbcTTo3lsw6KExvGhRANCAATW9XlfhT7XD31+3iX/3tMEX63ptW/O
    Moaun/Oiooq5MBuPcCdzRiB1KMA2pA6zurfC2k5Y1AkRSNoDEZYq+Mca
    -----END PRIVATE KEY-----
    """
/// Serial 33ff4601….
private let secondCertificate = """
    -----BEGIN CERTIFICATE-----
    MIIBijCCATGgAwIBAgIUM/9GAVLOhrZKvgKENGu9gmqPFuswCgYIKoZIzj0EAwIw
    GjEYMBYGA1UEAwwPdG9sbGdhdGUtdGVzdC0yMCAXDTI2MTEyMzE2NDkyOVoYDzIx
    MjYxMDMwMTY0OTI5WjAaMRgwFgYDVQQDDA90b2xsZ2F0ZS10ZXN0LTIwWTATBgcq
    hkjOPQIBBggqhkjOPQMBBwNCAARQAwYKYgRtBxYxT2VaHWCs3oIsI0tAi1NY5tZO
    CqzwKz+6RAwIsv31r4m2UfeTEGSBM1IyjbVny1WqDZ72AIJ6o1MwUTAdBgNVHQ4E
    FgQUsFuAY6T7JzzBl1l4S4l8vVOrDs0wHwYDVR0jBBgwFoAUsFuAY6T7JzzBl1l4
    S4l8vVOrDs0wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAf17d/
    JgisLEz5aoSCapXffYr74k1JRLtbvxokAvsdxQIgS7t0Wn6L2xLVoQmr4FXU33iO
    agdMzfuv1AiZabw5YkY=
    -----END CERTIFICATE-----
    """
/// The second certificate's key.
private let secondKey = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgsJ98yjhGl00IZety
    rl4913DSQWoJKVRkXQj1YYBE8P6hRANCAARQAwYKYgRtBxYxT2VaHWCs3oIsI0tA
    i1NY5tZOCqzwKz+6RAwIsv31r4m2UfeTEGSBM1IyjbVny1WqDZ72AIJ6
    -----END PRIVATE KEY-----
    """

/// Runs `body` with `cert.pem` and `key.pem` holding the given texts, in a scratch directory
/// removed afterwards (it holds a private key).
private func withFiles(certificate: String, key: String, _ body: (TLSFiles) throws -> Void) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tollgate-tls-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let files = TLSFiles(certificateFile: directory.appendingPathComponent("cert.pem").path,
                         keyFile: directory.appendingPathComponent("key.pem").path)
    try write(certificate, to: files.certificateFile)
    try write(key, to: files.keyFile)
    try body(files)
}

private func write(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

@Test func aMatchingPairLoads() throws {
    try withFiles(certificate: firstCertificate, key: firstKey) { files in
        let certificates = try TLSCertificates(files: files)
        #expect(certificates.serial.hasPrefix("375ef6cc"))
        #expect(certificates.configuration.applicationProtocols == ["http/1.1"])
    }
}

@Test("a bad pair is a config error naming the file at fault", arguments: [
    (firstCertificate, secondKey, "key.pem", "the private key does not match the certificate in"),
    ("not a certificate", firstKey, "cert.pem", "not a PEM certificate"),
    ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", firstKey, "cert.pem", "not a PEM certificate"),
    (firstCertificate, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "key.pem", "not a PEM private key"),
    (firstCertificate, firstCertificate, "key.pem", "not a PEM private key"),
])
func badPairs(certificate: String, key: String, file: String, message: String) throws {
    try withFiles(certificate: certificate, key: key) { files in
        do throws(TLSFileError) {
            _ = try TLSCertificates(files: files)
            Issue.record("accepted")
        } catch {
            #expect(error.file.hasSuffix("/" + file))
            #expect(error.message.contains(message), "\(error)")
            #expect(!"\(error)".contains("\n"), "one line")
        }
    }
}

@Test func aMissingFileIsAnErrorNamingIt() throws {
    try withFiles(certificate: firstCertificate, key: firstKey) { files in
        var files = files
        files.keyFile += ".missing"
        #expect { try TLSCertificates(files: files) } throws: { error in
            "\(error)".contains("key.pem.missing: cannot read the file")
        }
    }
}

@Test func reloadSwapsOnlyAValidReplacement() throws {
    try withFiles(certificate: firstCertificate, key: firstKey) { files in
        let certificates = try TLSCertificates(files: files)
        #expect(try certificates.reloadIfChanged() == false, "nothing changed")

        // A certificate without its new key: refused, the first pair stays.
        try write(secondCertificate + "\n", to: files.certificateFile)
        #expect(throws: TLSFileError.self) { try certificates.reloadIfChanged() }
        #expect(certificates.serial.hasPrefix("375ef6cc"))
        #expect(try certificates.reloadIfChanged() == false, "a broken replacement is reported once")

        try write(secondKey + "\n", to: files.keyFile)
        #expect(try certificates.reloadIfChanged() == true)
        #expect(certificates.serial.hasPrefix("33ff4601"))
    }
}
