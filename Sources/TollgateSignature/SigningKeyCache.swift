import TollgateCache
import TollgateCrypto

/// A derived signing key, with its HMAC state prepared once (re-keying an HMAC for every
/// request cost more than the MAC itself).
struct DerivedSigningKey: Sendable {
    let bytes: [UInt8]
    let mac: HMACKey

    init(_ bytes: [UInt8]) throws(CryptoError) {
        self.bytes = bytes
        self.mac = try HMACKey(.sha256, key: bytes)
    }
}

/// Derived signing keys of every SigV4-family flavor, by key prefix, secret, date, region and
/// service. Deriving one takes four HMACs, and a client signs all of a day's requests with the
/// same key, so the gateway derives it once. Memoisation only: the result is the same with or
/// without the cache. Bounded (`BoundedCache`).
final class SigningKeyCache: Sendable {
    static let shared = SigningKeyCache()
    static let capacity = 4096

    /// What a signing key is derived from (the flavor's key prefix fixes its terminator).
    struct Key: Hashable, Sendable {
        let keyPrefix: String
        let secret: String
        let date: String
        let region: String
        let service: String
    }

    private let keys = BoundedCache<Key, DerivedSigningKey>(capacity: capacity)

    func key<E: Error>(for id: Key, derive: () throws(E) -> DerivedSigningKey) throws(E) -> DerivedSigningKey {
        try keys.value(for: id, orMake: derive)
    }
}
