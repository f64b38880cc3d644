import ServiceLifecycle
import UnixSignals

/// The loop both reloading services run until graceful shutdown: `onSignal` on every SIGHUP,
/// `poll` every `interval` (which reloads only what changed on disk). One runs at a time, in
/// the order they came, so two reloads never overlap.
package func runReloadLoop(every interval: Duration, poll: @escaping @Sendable () async -> Void,
                   onSignal: @escaping @Sendable () async -> Void) async {
    enum Event { case poll, signal }
    let (events, queue) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(8))
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            for await _ in await UnixSignalsSequence(trapping: .sighup) { queue.yield(.signal) }
        }
        group.addTask {
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                queue.yield(.poll)
            }
        }
        group.addTask {
            for await event in events {
                switch event {
                case .poll: await poll()
                case .signal: await onSignal()
                }
            }
        }
        try? await gracefulShutdown()
        queue.finish()
        group.cancelAll()
    }
}
