import Foundation
import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization
import TollgateJSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One issued credential, as the audit file records it: who, which role, which temporary key,
/// until when, through which API and from where. Never a secret or a token.
public struct TokenAuditEntry: Sendable, Equatable, Codable {
    public var time: String
    public var subject: String?
    public var issuer: String?
    public var role: String
    public var accessKeyId: String
    public var expiration: String
    /// `json` (the token endpoint), `AssumeRole`, `AssumeRoleWithWebIdentity`.
    public var via: String
    public var clientAddress: String
    /// The upstream STS that minted the credentials (`Upstreams`); nil: Tollgate itself.
    public var upstream: String?

    enum CodingKeys: String, CodingKey {
        case time, subject, issuer, role, expiration, via, upstream
        case accessKeyId = "access_key_id"
        case clientAddress = "client_address"
    }

    public init(time: String, subject: String?, issuer: String?, role: String, accessKeyId: String, expiration: String,
                via: String, clientAddress: String, upstream: String? = nil) {
        self.time = time
        self.subject = subject
        self.issuer = issuer
        self.role = role
        self.accessKeyId = accessKeyId
        self.expiration = expiration
        self.via = via
        self.clientAddress = clientAddress
        self.upstream = upstream
    }

    /// One JSON Lines record, newline included.
    var line: [UInt8] {
        var bytes = object.finishBytes()
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// The record as one JSON object, absent values as `null`.
    public var json: String { object.finish() }

    private var object: JSONObjectWriter {
        var json = JSONObjectWriter(capacity: 256)
        json.add("time", time)
        json.add("subject", subject)
        json.add("issuer", issuer)
        json.add("role", role)
        json.add("access_key_id", accessKeyId)
        json.add("expiration", expiration)
        json.add("via", via)
        json.add("client_address", clientAddress)
        if let upstream { json.add("upstream", upstream) }
        return json
    }
}

/// The token audit file, `DataDirectory/token-audit.jsonl` (JSON Lines, mode 0600), which
/// `tollgate token list` reads. Issuing a token only appends a line to a memory buffer and,
/// when no line was waiting, wakes this service, which writes whatever has gathered (off the
/// event loops, on NIO's thread pool) at once, then lets lines gather for `gatherInterval`
/// before it writes again: under load one write carries many lines, and a token does not wake
/// this task (a thread hop, a thread-pool job and a `write`) of its own. At `maxBytes` the file
/// is renamed to `.1` (the older `.1` to `.2`, the oldest dropped) and a new one started.
public final class TokenAuditLog: Service, Sendable {
    public static let fileName = "token-audit.jsonl"
    public static let defaultMaxBytes = 16 * 1024 * 1024
    /// Rotated files kept besides the current one.
    public static let keptFiles = 2
    /// How long lines gather after a write before the next one.
    static let gatherInterval = Duration.milliseconds(25)

    public let path: String
    let maxBytes: Int
    let logger: Logger
    private let pending = Mutex<[UInt8]>([])
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    /// The open file, its size and how many writes it has taken; touched only by `flush`, which
    /// runs one at a time.
    private let file = Mutex<(descriptor: Int32, size: Int, writes: Int)>((-1, 0, 0))

    /// Where the file is written (it blocks): the server's one blocking pool.
    let pool: NIOThreadPool

    public init(dataDirectory: String, maxBytes: Int = defaultMaxBytes, logger: Logger, pool: NIOThreadPool) {
        path = (dataDirectory as NSString).appendingPathComponent(Self.fileName)
        self.maxBytes = maxBytes
        self.logger = logger
        self.pool = pool
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues one entry; the service writes it within moments.
    func record(_ entry: TokenAuditEntry) {
        let line = entry.line
        // Lines already waiting mean the writer has been woken and will take this one too.
        let first = pending.withLock { buffer in
            defer { buffer += line }
            return buffer.isEmpty
        }
        if first { wake.yield() }
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            for await _ in wakes {
                await flushOffloaded()
                // Lines issued meanwhile gather in the buffer: under load one write (and one
                // thread-pool job) per interval, not one wake-up of this task per token.
                try? await Task.sleep(for: Self.gatherInterval)
            }
        } onGracefulShutdown: {
            self.wake.finish()
        }
        await flushOffloaded()
        file.withLock { if $0.descriptor >= 0 { close($0.descriptor); $0.descriptor = -1 } }
    }

    private func flushOffloaded() async {
        do { try await pool.runIfActive { self.flush() } } catch { flush() }
    }

    /// Writes the buffered lines, rotating first when the file has reached `maxBytes`.
    func flush() {
        let bytes = pending.withLock { buffer -> [UInt8] in
            defer { buffer.removeAll(keepingCapacity: true) }
            return buffer
        }
        guard !bytes.isEmpty else { return }
        file.withLock { state in
            do {
                if state.descriptor >= 0, state.size >= maxBytes {
                    close(state.descriptor)
                    state.descriptor = -1
                    Self.rotate(path)
                }
                if state.descriptor < 0 {
                    let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw AuditWriteError(errno: errno) }
                    var info = stat()
                    state.size = fstat(fd, &info) == 0 ? Int(info.st_size) : 0
                    state.descriptor = fd
                }
                var offset = 0
                while offset < bytes.count {
                    let written = bytes[offset...].withUnsafeBytes { write(state.descriptor, $0.baseAddress, $0.count) }
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw AuditWriteError(errno: errno)
                    }
                    offset += written
                }
                state.size += bytes.count
                state.writes += 1
            } catch {
                logger.error("token audit not written", metadata: ["audit.file": "\(path)", "audit.error": "\(error)", "audit.lines": "\(bytes.count { $0 == 0x0A })"])
            }
        }
    }

    /// How many flushes have written lines (a flush that found none writes nothing).
    var writes: Int { file.withLock { $0.writes } }

    /// `path` → `path.1` → `path.2`; the oldest is replaced.
    static func rotate(_ path: String) {
        for index in stride(from: keptFiles, to: 1, by: -1) {
            rename("\(path).\(index - 1)", "\(path).\(index)")
        }
        rename(path, "\(path).1")
    }

    struct AuditWriteError: Error, CustomStringConvertible {
        var errno: Int32
        var description: String { String(cString: strerror(errno)) }
    }

    /// Every entry in the current and rotated files, oldest first. A line that does not parse
    /// (the last one, torn by a crash or still being written) is skipped and counted.
    public static func read(dataDirectory: String) -> (entries: [TokenAuditEntry], skipped: Int) {
        let path = (dataDirectory as NSString).appendingPathComponent(fileName)
        var entries: [TokenAuditEntry] = []
        var skipped = 0
        let decoder = JSONDecoder()
        for file in (1...keptFiles).reversed().map({ "\(path).\($0)" }) + [path] {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            for line in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
                if let entry = try? decoder.decode(TokenAuditEntry.self, from: Data(line)) {
                    entries.append(entry)
                } else {
                    skipped += 1
                }
            }
        }
        return (entries, skipped)
    }
}
