import ServiceLifecycle
import UnixSignals

/// The loop both reloading services run until graceful shutdown: `onSignal` on every SIGHUP,
/// `poll` every `interval` (which reloads only what changed on disk).
func runReloadLoop(every interval: Duration, poll: @escaping @Sendable () -> Void,
                   onSignal: @escaping @Sendable () -> Void) async {
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            for await _ in await UnixSignalsSequence(trapping: .sighup) { onSignal() }
        }
        group.addTask {
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                poll()
            }
        }
        try? await gracefulShutdown()
        group.cancelAll()
    }
}
