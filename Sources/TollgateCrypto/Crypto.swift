import CLibCrypto
import Synchronization

/// A failure reported by libcrypto. Carries the OpenSSL error string, never key material.
public struct CryptoError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let detail: String

    init(_ operation: String) {
        self.operation = operation
        let code = ERR_get_error()
        if code == 0 {
            self.detail = "unknown error"
        } else {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            self.detail = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    public var description: String { "\(operation) failed: \(detail)" }
}

/// The digests Tollgate uses. SHA-1 and MD5 exist only because the OSS V1 and S3/OSS ETag
/// protocols require them.
public enum DigestAlgorithm: Sendable {
    case sha256, sha1, md5

    var name: String {
        switch self {
        case .sha256: "SHA256"
        case .sha1: "SHA1"
        case .md5: "MD5"
        }
    }

    public var outputSize: Int {
        switch self {
        case .sha256: 32
        case .sha1: 20
        case .md5: 16
        }
    }
}

/// Algorithm objects fetched once and shared. `EVP_MD` and `EVP_MAC` are immutable,
/// reference-counted provider objects that OpenSSL documents as safe to use from many threads
/// at once; only the per-computation contexts are not, and those are never shared.
private struct Algorithms: @unchecked Sendable {
    let sha256: OpaquePointer
    let sha1: OpaquePointer
    let md5: OpaquePointer
    let hmac: OpaquePointer

    static let shared: Algorithms? = {
        guard let sha256 = EVP_MD_fetch(nil, "SHA256", nil),
              let sha1 = EVP_MD_fetch(nil, "SHA1", nil),
              let md5 = EVP_MD_fetch(nil, "MD5", nil),
              let hmac = EVP_MAC_fetch(nil, "HMAC", nil)
        else { return nil }
        return Algorithms(sha256: sha256, sha1: sha1, md5: md5, hmac: hmac)
    }()

    static func get() throws(CryptoError) -> Algorithms {
        guard let shared else { throw CryptoError("fetching digest algorithms") }
        return shared
    }

    func md(_ algorithm: DigestAlgorithm) -> OpaquePointer {
        switch algorithm {
        case .sha256: sha256
        case .sha1: sha1
        case .md5: md5
        }
    }
}

/// An incremental hash (SHA-256, SHA-1 or MD5) for streamed bodies.
/// Not thread-safe: one instance per computation.
public final class StreamingDigest {
    private let context: OpaquePointer
    public let algorithm: DigestAlgorithm
    private var finished = false

    public init(_ algorithm: DigestAlgorithm) throws(CryptoError) {
        let algorithms = try Algorithms.get()
        guard let context = EVP_MD_CTX_new() else { throw CryptoError("EVP_MD_CTX_new") }
        guard EVP_DigestInit_ex2(context, algorithms.md(algorithm), nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw CryptoError("EVP_DigestInit_ex2")
        }
        self.context = context
        self.algorithm = algorithm
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) throws(CryptoError) {
        guard bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
            throw CryptoError("EVP_DigestUpdate")
        }
    }

    public func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(CryptoError) {
        let result: Result<Void, CryptoError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(CryptoError) in try update(UnsafeRawBufferPointer(buffer)) }
        }
        if let result { return try result.get() }
        let array = Array(bytes)
        let copied: Result<Void, CryptoError> = array.withUnsafeBytes { buffer in
            Result { () throws(CryptoError) in try update(buffer) }
        }
        try copied.get()
    }

    /// Returns the digest. The instance cannot be updated afterwards.
    public func finalize() throws(CryptoError) -> [UInt8] {
        precondition(!finished, "StreamingDigest finalized twice")
        finished = true
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &output, &length) == 1 else { throw CryptoError("EVP_DigestFinal_ex") }
        return Array(output.prefix(Int(length)))
    }
}

/// An HMAC key prepared once and shared by any number of threads.
///
/// A keyed `EVP_MAC_CTX` holds the key schedule (the inner and outer padded digests). Each MAC
/// borrows an idle context from a small pool; afterwards `EVP_MAC_init` with no key (which
/// OpenSSL 3 defines as re-initialising with the same key) resets it for the next message.
/// That avoids both re-keying and `EVP_MAC_CTX_dup`, which allocates a fresh HMAC state and
/// three digest contexts per MAC. The pool only grows to the number of MACs computed at once.
public final class HMACKey: Sendable {
    private let idle: Mutex<[MACContext]>
    private let key: [UInt8]
    public let algorithm: DigestAlgorithm
    /// Contexts kept for reuse; beyond this many concurrent MACs, extra contexts are freed.
    private static let poolLimit = 32

    public init(_ algorithm: DigestAlgorithm, key: [UInt8]) throws(CryptoError) {
        self.key = key
        self.algorithm = algorithm
        self.idle = Mutex([])
        let first = try makeContext()
        idle.withLock { $0.append(first) }
    }

    deinit { idle.withLock { contexts in for context in contexts { EVP_MAC_CTX_free(context.pointer) } } }

    /// A new context keyed with `key`, ready for a message.
    private func makeContext() throws(CryptoError) -> MACContext {
        let algorithms = try Algorithms.get()
        guard let context = EVP_MAC_CTX_new(algorithms.hmac) else { throw CryptoError("EVP_MAC_CTX_new") }
        let initialised = key.withUnsafeBufferPointer { keyBuffer in
            tollgate_hmac_init(context, keyBuffer.baseAddress, keyBuffer.count, algorithm.name)
        }
        guard initialised == 1 else {
            EVP_MAC_CTX_free(context)
            throw CryptoError("EVP_MAC_init")
        }
        return MACContext(pointer: context)
    }

    public func authenticate(_ data: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: algorithm.outputSize)
        let length: Result<Int, CryptoError> = output.withUnsafeMutableBytes { output in
            Result { () throws(CryptoError) in try authenticate(data, into: output) }
        }
        let written = try length.get()
        return written == output.count ? output : Array(output.prefix(written))
    }

    /// The MAC of `data` written to the start of `output` (at least `algorithm.outputSize`
    /// bytes), without an array: for a verifier that only compares it. Returns its length.
    public func authenticate(_ data: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(CryptoError) -> Int {
        precondition(output.count >= algorithm.outputSize, "a MAC buffer shorter than the MAC")
        let context: MACContext
        if let pooled = idle.withLock({ $0.popLast() }) { context = pooled } else { context = try makeContext() }
        var length = 0
        let computed = EVP_MAC_update(context.pointer, data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count) == 1
            && EVP_MAC_final(context.pointer, output.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, output.count) == 1
        // Back to the keyed state for the next message; a context that fails to reset is dropped.
        if EVP_MAC_init(context.pointer, nil, 0, nil) != 1 || !keep(context) { EVP_MAC_CTX_free(context.pointer) }
        guard computed else { throw CryptoError("HMAC") }
        return length
    }

    /// Returns a reset context to the pool; false when the pool is full.
    private func keep(_ context: MACContext) -> Bool {
        idle.withLock { contexts in
            guard contexts.count < Self.poolLimit else { return false }
            contexts.append(context)
            return true
        }
    }

    public func authenticate(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        let result: Result<[UInt8], CryptoError> = data.withUnsafeBytes { buffer in
            Result { () throws(CryptoError) in try authenticate(buffer) }
        }
        return try result.get()
    }

    public func authenticate(_ string: String) throws(CryptoError) -> [UInt8] {
        var string = string
        let result: Result<[UInt8], CryptoError> = string.withUTF8 { buffer in
            Result { () throws(CryptoError) in try authenticate(UnsafeRawBufferPointer(buffer)) }
        }
        return try result.get()
    }
}

/// An `EVP_MAC_CTX` pointer, owned by one thread at a time: in `HMACKey`'s pool or in use.
struct MACContext: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// One-shot hashing, HMAC, randomness and constant-time comparison, all from libcrypto.
public enum Crypto {
    public static func digest<Bytes: Sequence<UInt8>>(_ algorithm: DigestAlgorithm, _ data: Bytes) throws(CryptoError) -> [UInt8] {
        // Bytes in one piece: one call, no context kept.
        let oneShot = data.withContiguousStorageIfAvailable { bytes -> Result<[UInt8], CryptoError> in
            var output = [UInt8](repeating: 0, count: algorithm.outputSize)
            let written: Result<Int, CryptoError> = output.withUnsafeMutableBytes { output in
                Result { () throws(CryptoError) in try Crypto.digest(algorithm, UnsafeRawBufferPointer(bytes), into: output) }
            }
            return written.map { $0 == output.count ? output : Array(output.prefix($0)) }
        }
        if let oneShot { return try oneShot.get() }
        let digest = try StreamingDigest(algorithm)
        try digest.update(data)
        return try digest.finalize()
    }

    /// The digest of `data` written to the start of `output` (at least `algorithm.outputSize`
    /// bytes), without an array: for a signature's canonical request, hashed once and
    /// hex-encoded at once. Returns its length.
    public static func digest(_ algorithm: DigestAlgorithm, _ data: UnsafeRawBufferPointer,
                              into output: UnsafeMutableRawBufferPointer) throws(CryptoError) -> Int {
        precondition(output.count >= algorithm.outputSize, "a digest buffer shorter than the digest")
        let algorithms = try Algorithms.get()
        var length: UInt32 = 0
        guard EVP_Digest(data.baseAddress, data.count, output.baseAddress?.assumingMemoryBound(to: UInt8.self), &length,
                         algorithms.md(algorithm), nil) == 1
        else { throw CryptoError("EVP_Digest") }
        return Int(length)
    }

    public static func sha256<Bytes: Sequence<UInt8>>(_ data: Bytes) throws(CryptoError) -> [UInt8] {
        try digest(.sha256, data)
    }

    public static func md5<Bytes: Sequence<UInt8>>(_ data: Bytes) throws(CryptoError) -> [UInt8] {
        try digest(.md5, data)
    }

    public static func sha1<Bytes: Sequence<UInt8>>(_ data: Bytes) throws(CryptoError) -> [UInt8] {
        try digest(.sha1, data)
    }

    /// HMAC with the given digest (SHA256 or SHA1).
    public static func hmac(_ algorithm: DigestAlgorithm, key: [UInt8], data: [UInt8]) throws(CryptoError) -> [UInt8] {
        let algorithms = try Algorithms.get()
        guard let context = EVP_MAC_CTX_new(algorithms.hmac) else { throw CryptoError("EVP_MAC_CTX_new") }
        defer { EVP_MAC_CTX_free(context) }
        let initialised = key.withUnsafeBufferPointer { keyBuffer in
            tollgate_hmac_init(context, keyBuffer.baseAddress, keyBuffer.count, algorithm.name)
        }
        guard initialised == 1 else { throw CryptoError("EVP_MAC_init") }
        let updated = data.withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) }
        guard updated == 1 else { throw CryptoError("EVP_MAC_update") }
        var output = [UInt8](repeating: 0, count: algorithm.outputSize)
        var length = 0
        guard EVP_MAC_final(context, &output, &length, output.count) == 1 else { throw CryptoError("EVP_MAC_final") }
        return Array(output.prefix(length))
    }

    public static func hmacSHA256(key: [UInt8], data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try hmac(.sha256, key: key, data: data)
    }

    public static func hmacSHA256(key: [UInt8], _ string: String) throws(CryptoError) -> [UInt8] {
        try hmac(.sha256, key: key, data: Array(string.utf8))
    }

    public static func hmacSHA1(key: [UInt8], data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try hmac(.sha1, key: key, data: data)
    }

    /// Cryptographically secure random bytes from OpenSSL's DRBG.
    public static func randomBytes(count: Int) throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard count == 0 || RAND_bytes(&bytes, Int32(count)) == 1 else { throw CryptoError("RAND_bytes") }
        return bytes
    }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { a in b.withUnsafeBytes { b in constantTimeEqual(a, b) } }
    }

    public static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
    }

    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        constantTimeEqual(Array(a.utf8), Array(b.utf8))
    }
}

/// Random bytes from libcrypto's DRBG, fetched a block at a time and handed out once each, in
/// order. Each `RAND_bytes` call re-keys the DRBG, which costs far more than the bytes
/// themselves; access key ids, minted on every token request, draw from here instead.
public final class RandomPool: Sendable {
    private let blockSize: Int
    private let state: Mutex<(block: [UInt8], used: Int)>

    public init(blockSize: Int = 4096) {
        precondition(blockSize > 0)
        self.blockSize = blockSize
        self.state = Mutex(([], 0))
    }

    /// `count` fresh random bytes; never the same bytes twice.
    public func bytes(count: Int) throws(CryptoError) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count {
            let exhausted = state.withLock { state in
                let take = min(count - out.count, state.block.count - state.used)
                out.append(contentsOf: state.block[state.used..<state.used + take])
                state.used += take
                return out.count < count
            }
            if exhausted {
                // Drawn outside the lock; if another thread refilled meanwhile, this block is dropped.
                let block = try Crypto.randomBytes(count: blockSize)
                state.withLock { state in
                    if state.used == state.block.count { state = (block, 0) }
                }
            }
        }
        return out
    }
}

