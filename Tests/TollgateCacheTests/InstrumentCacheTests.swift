import Synchronization
import Testing
import TollgateCache

@Test func instrumentsAreMadeOncePerLabelSet() {
    let made = Counted()
    let cache = InstrumentCache<String, Int> { _ in made.next() }
    #expect(cache["a"] == 1)
    #expect(cache["b"] == 2)
    #expect(cache["a"] == 1)
    #expect(made.next() == 3)
}

private final class Counted: Sendable {
    private let count = Mutex(0)
    func next() -> Int { count.withLock { $0 += 1; return $0 } }
}
