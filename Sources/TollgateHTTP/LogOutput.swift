import Foundation
import Logging
import Synchronization
import TollgateDates

/// Structured log lines (`time level label: message key=value …`, or one JSON object per line
/// with `LOG_FORMAT=json`) written to standard output
/// through a buffer that a background thread drains a few milliseconds after a line arrives (it
/// sleeps on a semaphore while nothing is pending: an idle server's log thread never wakes). swift-log's
/// `StreamLogHandler` flushes stdout on every line, which on the token endpoint's hot path
/// cost more than minting the token itself.
public final class LogOutput: Sendable {
    public static let standardOutput = LogOutput(fileDescriptor: STDOUT_FILENO)

    private let fileDescriptor: Int32
    private let pending = Mutex<[UInt8]>([])
    /// Signalled when the buffer stops being empty: the thread waits on it while there is nothing to write.
    private let arrived = DispatchSemaphore(value: 0)
    /// Above this many pending bytes the writer flushes inline instead of waiting for the thread.
    private static let inlineFlushThreshold = 1 << 20
    /// How long the thread lets lines gather after the first before writing them together.
    private static let gathering: useconds_t = 10_000

    init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        let thread = Thread { [self] in
            while true {
                self.arrived.wait()
                usleep(Self.gathering)
                self.flush()
            }
        }
        thread.name = "tollgate-log"
        thread.start()
    }

    func append(_ line: [UInt8]) {
        let size = pending.withLock { buffer in
            buffer.append(contentsOf: line)
            buffer.append(UInt8(ascii: "\n"))
            return buffer.count
        }
        if size == line.count + 1 { arrived.signal() }
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

    /// How each line is written.
    public enum Format: Sendable {
        /// `time level label: message key=value …`
        case text
        /// `{"time":…,"level":…,"label":…,"message":…,"key":"value",…}`, for log shippers.
        case json

        /// `LOG_FORMAT`: `json`, or text when unset. Nil for any other value.
        public init?(environment value: String?) {
            switch value?.lowercased() {
            case nil, "", "text": self = .text
            case "json": self = .json
            default: return nil
            }
        }
    }

    /// A swift-log factory writing to this output.
    public func handler(logLevel: Logger.Level, format: Format = .text) -> @Sendable (String) -> any LogHandler {
        { label in Handler(label: label, output: self, logLevel: logLevel, format: format) }
    }

    struct Handler: LogHandler {
        let label: String
        let output: LogOutput
        var logLevel: Logger.Level
        let format: Format
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var line: [UInt8] = []
            line.reserveCapacity(320)
            switch format {
            case .text:
                LogOutput.appendTimestamp(to: &line)
                line.append(UInt8(ascii: " "))
                LogOutput.appendEntry(level: event.level, label: label, message: event.message, metadata: event.metadata, context: metadata, to: &line)
            case .json:
                var time: [UInt8] = []
                LogOutput.appendTimestamp(to: &time)
                LogOutput.appendJSONEntry(time: time, level: event.level, label: label, message: event.message,
                                          metadata: event.metadata, context: metadata, to: &line)
            }
            output.append(line)
        }
    }

    /// A line after its timestamp: `level label: message key=value …`, keys in order, the
    /// event's metadata winning over the logger's.
    static func appendEntry(
        level: Logger.Level, label: String, message: Logger.Message, metadata: Logger.Metadata?,
        context: Logger.Metadata, to line: inout [UInt8]
    ) {
        append(level.rawValue, to: &line)
        line.append(UInt8(ascii: " "))
        append(label, to: &line)
        line.append(UInt8(ascii: ":"))
        line.append(UInt8(ascii: " "))
        append(message.description, to: &line)
        for (key, value) in fields(metadata, context) {
            line.append(UInt8(ascii: " "))
            append(key, to: &line)
            line.append(UInt8(ascii: "="))
            appendValue(text(value), to: &line)
        }
    }

    /// A line as one JSON object: `time`, `level`, `label`, `message`, then every metadata key
    /// in order, each value a string.
    static func appendJSONEntry(
        time: [UInt8], level: Logger.Level, label: String, message: Logger.Message, metadata: Logger.Metadata?,
        context: Logger.Metadata, to line: inout [UInt8]
    ) {
        line.append(contentsOf: #"{"time":""#.utf8)
        line.append(contentsOf: time)
        line.append(contentsOf: #"","level":"#.utf8)
        appendJSONString(level.rawValue, to: &line)
        line.append(contentsOf: #","label":"#.utf8)
        appendJSONString(label, to: &line)
        line.append(contentsOf: #","message":"#.utf8)
        appendJSONString(message.description, to: &line)
        for (key, value) in fields(metadata, context) {
            line.append(UInt8(ascii: ","))
            appendJSONString(key, to: &line)
            line.append(UInt8(ascii: ":"))
            appendJSONString(text(value), to: &line)
        }
        line.append(UInt8(ascii: "}"))
    }

    /// The event's metadata and the logger's (the event's winning), sorted by key.
    static func fields(_ metadata: Logger.Metadata?, _ context: Logger.Metadata) -> [(key: String, value: Logger.MetadataValue)] {
        var fields: [(key: String, value: Logger.MetadataValue)] = []
        fields.reserveCapacity((metadata?.count ?? 0) + context.count)
        if let metadata { fields.append(contentsOf: metadata) }
        for (key, value) in context where metadata?[key] == nil { fields.append((key, value)) }
        fields.sort { $0.key < $1.key }
        return fields
    }

    static func text(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let string): string
        case .stringConvertible(let convertible): convertible.description
        default: value.description
        }
    }

    /// A JSON string: `"` and `\` escaped, control characters and DEL as `\n`, `\r`, `\t` or
    /// `\u00XX`, everything else (UTF-8) as is.
    static func appendJSONString(_ string: String, to bytes: inout [UInt8]) {
        var string = string
        bytes.append(UInt8(ascii: "\""))
        string.withUTF8 { utf8 in
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case _ where isControl(byte):
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Text outside a value (level, label, message, key) as is, with control characters escaped.
    static func append(_ string: String, to bytes: inout [UInt8]) {
        var string = string
        string.withUTF8 { utf8 in
            guard utf8.contains(where: isControl) else {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 { appendEscaped(byte, to: &bytes) }
        }
    }

    /// A value as is, or quoted (with `\`, `"` and control characters escaped) when it holds
    /// spaces, control characters, quotes or `=`. No value, whatever a client put in it (a key,
    /// a header), can end the line or send a terminal escape sequence.
    static func appendValue(_ value: String, to bytes: inout [UInt8]) {
        var value = value
        value.withUTF8 { utf8 in
            guard utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            bytes.append(UInt8(ascii: "\""))
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\\"), UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), byte]
                default: appendEscaped(byte, to: &bytes)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    /// C0 controls and DEL.
    static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// A byte as is, or a control character as `\n`, `\r`, `\t` or `\xHH`.
    static func appendEscaped(_ byte: UInt8, to bytes: inout [UInt8]) {
        guard isControl(byte) else {
            bytes.append(byte)
            return
        }
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
        default:
            let hex = Array("0123456789abcdef".utf8)
            bytes += [UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
        }
    }

    /// UTC time with milliseconds, `2026-11-22T05:02:40.123Z`.
    static func appendTimestamp(to bytes: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        WireDate.appendISO8601(Int64(now.tv_sec), milliseconds: now.tv_nsec / 1_000_000, to: &bytes)
    }
}
