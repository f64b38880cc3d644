import Foundation
import NIOCore
import TollgateCrypto
@testable import TollgateStore
@testable import TollgateS3Store
@testable import TollgateLocalStore
@testable import TollgateMemoryStore

/// A fresh directory per test: `<root>/data` is the store's data directory; `<root>` itself
/// must hold nothing else, which lets tests prove that no file escapes the data directory.
final class Sandbox {
    let root: String
    let data: String

    init() throws {
        root = NSTemporaryDirectory() + "tollgate-store-" + Hex.encode(try Crypto.randomBytes(count: 8))
        data = root + "/data"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func open(minimumPartSize: Int64 = 5 * 1024 * 1024, readChunkSize: Int = 256 * 1024, sendSegmentSize: Int = 2 * 1024 * 1024) throws -> LocalObjectStore {
        try LocalObjectStore(configuration: .init(
            directory: data, minimumPartSize: minimumPartSize, readChunkSize: readChunkSize, sendSegmentSize: sendSegmentSize
        ))
    }

    /// Every regular file under `path`, relative to it.
    func files(under path: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: path) else { return [] }
        var out: [String] = []
        while let next = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + next, isDirectory: &isDirectory), !isDirectory.boolValue {
                out.append(next)
            }
        }
        return out.sorted()
    }

    var objectFiles: [String] { files(under: data + "/objects") }
    var tmpFiles: [String] { files(under: data + "/tmp") }
    /// Entries of the sandbox root: must be exactly ["data"].
    var rootEntries: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted() }
}

/// A body made of the given chunks.
struct Chunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let chunks: [[UInt8]]
    init(_ chunks: [[UInt8]]) { self.chunks = chunks }
    init(_ bytes: [UInt8]) { self.chunks = [bytes] }
    init(_ string: String) { self.chunks = [Array(string.utf8)] }

    struct AsyncIterator: AsyncIteratorProtocol {
        var rest: ArraySlice<[UInt8]>
        mutating func next() async throws -> ByteBuffer? {
            guard let first = rest.popFirst() else { return nil }
            return ByteBuffer(bytes: first)
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rest: chunks[...]) }
}

struct ClientAborted: Error {}

/// Yields `good` chunks, then throws (a client that disconnects mid-upload).
struct FailingBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let chunk: [UInt8]
    let good: Int
    struct AsyncIterator: AsyncIteratorProtocol {
        let chunk: [UInt8]
        var left: Int
        mutating func next() async throws -> ByteBuffer? {
            guard left > 0 else { throw ClientAborted() }
            left -= 1
            return ByteBuffer(bytes: chunk)
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunk: chunk, left: good) }
}

/// A deterministic body of `total` bytes generated lazily in `chunkSize` pieces.
struct GeneratedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let total: Int
    let chunkSize: Int

    static func byte(at index: Int) -> UInt8 { UInt8(truncatingIfNeeded: (index &* 2_654_435_761) >> 7) }

    /// The body's MD5, hashed as it is generated (never held whole).
    func md5() async throws -> [UInt8] {
        let digest = try StreamingDigest(.md5)
        for try await chunk in self { try chunk.withUnsafeReadableBytes { try digest.update($0) } }
        return try digest.finalize()
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let total: Int
        let chunkSize: Int
        var offset = 0
        mutating func next() async throws -> ByteBuffer? {
            guard offset < total else { return nil }
            let n = Swift.min(chunkSize, total - offset)
            var buffer = ByteBuffer()
            buffer.reserveCapacity(n)
            let start = offset
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: n) { pointer in
                for i in 0..<n { pointer[i] = GeneratedBody.byte(at: start + i) }
                return n
            }
            offset += n
            return buffer
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(total: total, chunkSize: chunkSize) }
}

func collect(_ body: ObjectBody) async throws -> [UInt8] {
    var out: [UInt8] = []
    for try await buffer in body { out += buffer.readableBytesView }
    return out
}

func string(_ body: ObjectBody) async throws -> String {
    String(decoding: try await collect(body), as: UTF8.self)
}

func quotedMD5(_ bytes: [UInt8]) throws -> String { "\"" + Hex.encode(try Crypto.md5(bytes)) + "\"" }

extension LocalObjectStore {
    @discardableResult
    func put(_ bucket: String, _ key: String, _ content: String, metadata: ObjectMetadata = ObjectMetadata(), options: WriteOptions = WriteOptions()) async throws -> ObjectInfo {
        try await putObject(bucket: bucket, key: key, body: Chunks(content), metadata: metadata, options: options)
    }

    /// What `readAtOnce` reads, when it has the read at hand (not in pieces).
    func readNow(_ bucket: String, _ key: String, range: ByteRange? = nil) throws -> ObjectRead? {
        guard case .read(let read)? = try readAtOnce(bucket: bucket, key: key, range: range) else { return nil }
        return read
    }

    func content(_ bucket: String, _ key: String) async throws -> String {
        try await string(getObject(bucket: bucket, key: key, range: nil).body)
    }

    /// The id of the file holding the object's bytes.
    func fileID(_ bucket: String, _ key: String) async throws -> String {
        try await index.object(bucket: bucket, key: key).fileID
    }
}

/// The error a throwing call raised, as a StoreError (nil if it succeeded or threw another type).
func storeError(_ body: () async throws -> Void) async -> StoreError? {
    do { try await body(); return nil } catch let error as StoreError { return error } catch { return nil }
}

/// The S3 backend the store tests run the S3 store against, when one is named: the cluster
/// `.ci/ceph/cluster.sh` started (`TOLLGATE_CEPH_DIR`, its `cluster.env`), or
/// `TOLLGATE_TEST_S3_ENDPOINT`, `_ACCESS_KEY`, `_SECRET_KEY`. Each store gets a bucket prefix of
/// its own, so tests running at once never meet.
struct S3TestBackend: Sendable {
    let endpoint: String
    let accessKey: String
    let secretKey: String
    let region: String

    struct Missing: Error, CustomStringConvertible {
        var description: String { "no S3 backend: set TOLLGATE_CEPH_DIR (bash .ci/ceph/cluster.sh start DIR)" }
    }

    static let current: S3TestBackend? = {
        let environment = ProcessInfo.processInfo.environment
        if let endpoint = environment["TOLLGATE_TEST_S3_ENDPOINT"], let key = environment["TOLLGATE_TEST_S3_ACCESS_KEY"],
           let secret = environment["TOLLGATE_TEST_S3_SECRET_KEY"] {
            return S3TestBackend(endpoint: endpoint, accessKey: key, secretKey: secret, region: environment["TOLLGATE_TEST_S3_REGION"] ?? "us-east-1")
        }
        guard let directory = environment["TOLLGATE_CEPH_DIR"],
              let text = try? String(contentsOfFile: directory + "/cluster.env", encoding: .utf8) else { return nil }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        guard let endpoint = values["RGW_ENDPOINT"], let key = values["RGW_ACCESS_KEY"], let secret = values["RGW_SECRET_KEY"] else { return nil }
        return S3TestBackend(endpoint: endpoint, accessKey: key, secretKey: secret, region: values["RGW_REGION"] ?? "us-east-1")
    }()

    /// A store in buckets of a fresh prefix (`t` and 8 hex digits).
    func store(minimumPartSize: Int64 = 5, maxUploadsPerBucket: Int = 1000, configure: (inout S3StoreConfiguration) -> Void = { _ in }) throws -> S3ObjectStore {
        var configuration = S3StoreConfiguration(
            endpoint: endpoint, region: region, accessKeyID: accessKey, secretAccessKey: secretKey,
            bucketPrefix: "t" + Hex.encode(try Crypto.randomBytes(count: 4)) + "-",
            minimumPartSize: minimumPartSize, backendMinimumPartSize: 1, maxUploadsPerBucket: maxUploadsPerBucket
        )
        configure(&configuration)
        return try S3ObjectStore(configuration: configuration)
    }
}
