import Foundation
import Logging
import Synchronization

/// Refusal log lines, at most one per kind and key (a client address, an access key) per
/// interval. A client refused over and over (a throttled address, a revoked key in a retry
/// loop) writes one line per interval, carrying `log.suppressed`: how many refusals of that
/// kind and key went unlogged since its previous line. Without it, one throttled address wrote
/// 85,000 warnings (22 MB of log) in 14 s. Metrics still count every refusal.
///
/// At most `capacity` kinds and keys are followed; past that, windows that have ended make
/// room, and if none has, the line is written unfollowed (a flood of distinct keys is then
/// logged, as before, and the metrics say so too).
package final class RefusalLog: Sendable {
    struct Key: Hashable {
        let kind: String
        let key: String
    }

    private struct Window {
        var started: Date
        var suppressed: Int
    }

    let interval: TimeInterval
    let capacity: Int
    private let windows = Mutex<[Key: Window]>([:])

    init(interval: TimeInterval = 10, capacity: Int = 4096) {
        self.interval = interval
        self.capacity = capacity
    }

    /// The process's one log of refusals: it outlives configuration reloads.
    package static let shared = RefusalLog()

    /// Whether a refusal of `kind` for `key` at `now` is logged: nil when its window's line was
    /// written already, else the number of refusals left unlogged since the previous line.
    func admit(kind: String, key: String, now: Date) -> Int? {
        windows.withLock { windows in
            let id = Key(kind: kind, key: key)
            if var window = windows[id] {
                if now.timeIntervalSince(window.started) < interval {
                    window.suppressed += 1
                    windows[id] = window
                    return nil
                }
                windows[id] = Window(started: now, suppressed: 0)
                return window.suppressed
            }
            if windows.count >= capacity {
                windows = windows.filter { now.timeIntervalSince($0.value.started) < interval }
                guard windows.count < capacity else { return 0 }
            }
            windows[id] = Window(started: now, suppressed: 0)
            return 0
        }
    }

    /// Logs `message` at `level` unless a line of this kind and key was written in the current
    /// window; the line says how many were left out before it.
    package func log(_ logger: Logger, _ level: Logger.Level, _ message: Logger.Message, kind: String, key: String, now: Date = Date(),
             metadata: @autoclosure () -> Logger.Metadata) {
        guard logger.logLevel <= level, let suppressed = admit(kind: kind, key: key, now: now) else { return }
        var metadata = metadata()
        if suppressed > 0 { metadata["log.suppressed"] = .stringConvertible(suppressed) }
        logger.log(level: level, message, metadata: metadata)
    }
}
