import Synchronization

/// Metrics instruments made once per label set and then only looked up: the hot path neither
/// formats a label nor makes an instrument.
package final class InstrumentCache<Key: Hashable & Sendable, Instrument: Sendable>: Sendable {
    private let instruments = Mutex<[Key: Instrument]>([:])
    private let make: @Sendable (Key) -> Instrument

    package init(_ make: @escaping @Sendable (Key) -> Instrument) {
        self.make = make
    }

    package subscript(key: Key) -> Instrument {
        instruments.withLock { table in
            if let instrument = table[key] { return instrument }
            let instrument = make(key)
            table[key] = instrument
            return instrument
        }
    }
}
