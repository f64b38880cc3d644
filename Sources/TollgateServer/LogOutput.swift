import Foundation
import Logging
import Synchronization

/// Structured log lines (`time level label: message key=value …`) written to standard output
/// through a buffer that a background thread drains every few milliseconds. swift-log's
/// `StreamLogHandler` flushes stdout on every line, which on the token endpoint's hot path
/// cost more than minting the token itself.
public final class LogOutput: Sendable {
    public static let standardOutput = LogOutput(fileDescriptor: STDOUT_FILENO)

    private let fileDescriptor: Int32
    private let pending = Mutex<[UInt8]>([])
    /// Above this many pending bytes the writer flushes inline instead of waiting for the thread.
    private static let inlineFlushThreshold = 1 << 20

    init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        let thread = Thread { [self] in
            while true {
                usleep(20_000)
                self.flush()
            }
        }
        thread.name = "tollgate-log"
        thread.start()
    }

    func append(_ line: String) {
        let size = pending.withLock { buffer in
            buffer.append(contentsOf: line.utf8)
            buffer.append(UInt8(ascii: "\n"))
            return buffer.count
        }
        if size > Self.inlineFlushThreshold { flush() }
    }

    /// Writes everything pending. Called by the thread, and at shutdown.
    public func flush() {
        let bytes = pending.withLock { buffer -> [UInt8] in
            defer { buffer.removeAll(keepingCapacity: true) }
            return buffer
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fileDescriptor, $0.baseAddress! + offset, bytes.count - offset) }
            if written <= 0 {
                if written < 0, errno == EINTR { continue }
                return
            }
            offset += written
        }
    }

    /// A swift-log factory writing to this output.
    public func handler(logLevel: Logger.Level) -> @Sendable (String) -> any LogHandler {
        { label in Handler(label: label, output: self, logLevel: logLevel) }
    }

    struct Handler: LogHandler {
        let label: String
        let output: LogOutput
        var logLevel: Logger.Level
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var line = LogOutput.timestamp()
            line += " \(event.level) \(label): \(event.message)"
            let extra = event.metadata ?? [:]
            let all = extra.isEmpty ? metadata : metadata.merging(extra) { $1 }
            for (key, value) in all.sorted(by: { $0.key < $1.key }) {
                line += " \(key)=\(LogOutput.quoteIfNeeded(value.description))"
            }
            output.append(line)
        }
    }

    static func quoteIfNeeded(_ value: String) -> String {
        value.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") })
            ? "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n") + "\""
            : value
    }

    /// UTC time with milliseconds, `2026-11-22T05:02:40.123Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ n: Int, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(parts.tm_year + 1900)-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(now.tv_nsec / 1_000_000, 3))Z"
    }
}
