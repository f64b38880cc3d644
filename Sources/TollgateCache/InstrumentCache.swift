import Synchronization

/// Metrics instruments made once per label set and then only looked up: the hot path neither
/// formats a label nor makes an instrument.
///
/// Inlinable, so that each module that uses one gets a copy specialised to its key and
/// instrument types instead of generic code that looks up type metadata on every call.
public final class InstrumentCache<Key: Hashable & Sendable, Instrument: Sendable>: Sendable {
    @usableFromInline let instruments = Mutex<[Key: Instrument]>([:])
    @usableFromInline let make: @Sendable (Key) -> Instrument

    public init(_ make: @escaping @Sendable (Key) -> Instrument) {
        self.make = make
    }

    @inlinable public subscript(key: Key) -> Instrument {
        instruments.withLock { table in
            if let instrument = table[key] { return instrument }
            let instrument = make(key)
            table[key] = instrument
            return instrument
        }
    }
}
