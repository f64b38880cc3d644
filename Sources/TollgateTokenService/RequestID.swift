import Synchronization
import TollgateCrypto

/// Request ids (`x-amz-request-id`, `x-oss-request-id`, `<RequestId>`): 16 upper-case hex
/// digits, a random start for this process plus a counter, so ids are unique within a run and
/// cost no random bytes per request. They identify, they do not authenticate.
package enum RequestID {
    private static let start: UInt64 = (try? Crypto.randomBytes(count: 8))?.reduce(0) { $0 << 8 | UInt64($1) } ?? 0
    private static let counter = Atomic<UInt64>(0)
    private static let digits = Array("0123456789ABCDEF".utf8)

    package static func next() -> String {
        let value = start &+ counter.wrappingAdd(1, ordering: .relaxed).newValue
        return String(unsafeUninitializedCapacity: 16) { buffer in
            for index in 0..<16 { buffer[index] = digits[Int((value >> UInt64(60 - 4 * index)) & 0xF)] }
            return 16
        }
    }
}
