import TollgateStore
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import CLinux
import TollgateCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the store's blocking calls may run: on its `BlockingIO` threads (or any thread that
/// is neither an event loop nor running a task), never on an event loop or in a task (the
/// cooperative pool, or an event loop a task executor pins), except while the store opens
/// (`allowing`). Debug builds check it in every blocking call (`Posix`, `FileChunks.read`,
/// `cachedByMincore`) and stop the process when it is broken; `swift test` runs debug builds.
enum BlockingWork {
    @TaskLocal private static var allowed = false

    /// Runs `body`, whose blocking calls are allowed in the calling task: opening the store,
    /// before it serves (and tests that call the store's file functions directly).
    static func allowing<T>(_ body: () throws -> T) rethrows -> T {
        try $allowed.withValue(true, operation: body)
    }

    /// Whether a blocking call may run here.
    static var mayBlock: Bool {
        if MultiThreadedEventLoopGroup.currentEventLoop != nil { return false }
        return allowed || withUnsafeCurrentTask { $0 == nil }
    }

    /// Stops a debug build when `call` would block where nothing may (see above).
    @inline(__always)
    static func check(_ call: StaticString) {
        assert(mayBlock, "\(call) blocks: it must run on the store's BlockingIO threads, not on an event loop or in a task")
    }
}

/// Thin, checked wrappers over the POSIX calls the store needs. Every failure becomes
/// `StoreError.io` with the call and errno text (paths are ours, never client input),
/// except a full disk or exhausted quota, which is `StoreError.storageFull`. They block: call
/// them only inside `BlockingIO.run` (`BlockingWork` checks it in debug builds).
enum Posix {
    static func failure(_ operation: String, _ code: Int32 = errno) -> StoreError {
        let text = "\(operation): \(String(cString: strerror(code)))"
        return code == ENOSPC || code == EDQUOT ? .storageFull(text) : .io(text)
    }

    /// Files and directories are the server's alone: 0600 and 0700.
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(StoreError) -> Int32 {
        BlockingWork.check("open")
        while true {
            let fd = Foundation.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw failure("open")
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(StoreError) {
        BlockingWork.check("write")
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("write")
            }
            done += n
        }
    }

    /// The most buffers one pwritev(2) takes (IOV_MAX on Linux).
    static let maxVectors = 1024

    /// Writes `buffers` back to back at `offset`: one pwritev(2) per `maxVectors` buffers, and
    /// another only after a short write. One call for a batch lets the kernel cache it in large
    /// folios (ext4 sizes a folio by the write: a 1 MiB write, one 1 MiB folio), fewer for
    /// sendfile to look up and splice than the pages of many small writes.
    static func pwriteAll(_ fd: Int32, _ buffers: [ByteBuffer], at offset: Int64) throws(StoreError) {
        BlockingWork.check("pwritev")
        try withReadableBytes(of: buffers) { (pointers) throws(StoreError) in
            var vectors = pointers.compactMap { bytes -> iovec? in
                bytes.count == 0 ? nil : iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress!), iov_len: bytes.count)
            }
            var first = 0
            var position = offset
            while first < vectors.count {
                let count = min(vectors.count - first, maxVectors)
                let n = vectors.withUnsafeBufferPointer { pwritev(fd, $0.baseAddress! + first, Int32(count), off_t(position)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure("pwritev")
                }
                // Only a zero-length write returns 0, and none is asked for: never loop on it.
                if n == 0 { throw failure("pwritev", EIO) }
                position += Int64(n)
                var left = n
                while left > 0 {
                    if left >= vectors[first].iov_len {
                        left -= vectors[first].iov_len
                        first += 1
                    } else {
                        vectors[first].iov_base = vectors[first].iov_base! + left
                        vectors[first].iov_len -= left
                        left = 0
                    }
                }
            }
        }
    }

    /// Calls `body` with the readable bytes of every buffer, each pointer lent for the whole call
    /// (the closures nest, one per buffer: no pointer is used outside the closure that lends it).
    static func withReadableBytes<Result, Failure: Error>(
        of buffers: [ByteBuffer], _ body: ([UnsafeRawBufferPointer]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var pointers: [UnsafeRawBufferPointer] = []
        pointers.reserveCapacity(buffers.count)
        func lend(_ index: Int) throws(Failure) -> Result {
            guard index < buffers.count else { return try body(pointers) }
            return try buffers[index].withUnsafeReadableBytes { (bytes) throws(Failure) -> Result in
                pointers.append(bytes)
                return try lend(index + 1)
            }
        }
        return try lend(0)
    }

    /// Reads up to `buffer.count` bytes at `offset`, fewer only at end of file.
    static func preadFully(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(StoreError) -> Int {
        BlockingWork.check("pread")
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("pread")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    static func fsync(_ fd: Int32) throws(StoreError) {
        BlockingWork.check("fsync")
        guard Foundation.fsync(fd) == 0 else { throw failure("fsync") }
    }

    static func fsyncDirectory(_ path: String) throws(StoreError) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        try fsync(fd)
    }

    static func ftruncate(_ fd: Int32, _ length: Int64) throws(StoreError) {
        BlockingWork.check("ftruncate")
        guard Foundation.ftruncate(fd, off_t(length)) == 0 else { throw failure("ftruncate") }
    }

    /// Removes a file; a file that is already gone is not an error.
    static func unlinkIfPresent(_ path: String) {
        BlockingWork.check("unlink")
        _ = Foundation.unlink(path)
    }

    /// Creates a directory; returns true when it was created (so the parent needs an fsync).
    @discardableResult
    static func makeDirectory(_ path: String) throws(StoreError) -> Bool {
        BlockingWork.check("mkdir")
        if Foundation.mkdir(path, 0o700) == 0 { return true }
        if errno == EEXIST { return false }
        throw failure("mkdir")
    }

    static func fileSize(_ fd: Int32) throws(StoreError) -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure("fstat") }
        return Int64(st.st_size)
    }
}

/// Whether the last write of object data found the storage full, so that a change is reported
/// once (to `LocalObjectStore.Configuration.storageFullChanged`) rather than on every request.
final class StorageFullState: Sendable {
    private let full = Mutex(false)
    private let changed: (@Sendable (Bool, String) -> Void)?

    init(changed: (@Sendable (Bool, String) -> Void)?) { self.changed = changed }

    /// Records a failed write: reports the change when `error` is the first `storageFull`.
    func note(_ error: any Error) {
        if case StoreError.storageFull(let detail) = error { set(true, detail) }
    }

    /// Records object data written and made durable: reports the change when storage was full.
    func noteWritten() { set(false, "") }

    private func set(_ value: Bool, _ detail: String) {
        let flipped = full.withLock { current in
            defer { current = value }
            return current != value
        }
        if flipped { changed?(value, detail) }
    }
}

/// An open file descriptor, closed when the last reference goes away. The descriptor is only
/// used with positional I/O (`pread`/`pwrite`), so sharing it between tasks is safe.
final class FileDescriptor: Sendable {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { close(fd) }
}

/// The store's one blocking-I/O policy. Nothing that can block on the disk runs on the Swift
/// concurrency pool (whose few threads every request shares) or on an event loop:
/// - file system calls (open, read, write, fsync, mkdir, unlink of object files) run here, on
///   a `NIOThreadPool` with a fixed number of threads (the server's one blocking pool, or one
///   the store owns), so at most that many calls wait on the disk at once and the rest queue;
/// - SQLite runs through GRDB's async access (`MetadataIndex`), on GRDB's own bounded queues
///   (one writer, a few readers).
/// Each hop costs a thread switch, so work is batched per hop: a GET opens the file and reads
/// its first chunk (a small object whole) in one job, later chunks are `readChunkSize` each, and
/// an upload writes its body in batches and ends with one job that writes the last batch,
/// fsyncs the file and fsyncs its directory.
final class BlockingIO: Sendable {
    private let pool: NIOThreadPool
    /// Jobs submitted so far (tests count the hops an operation costs).
    let submitted = Atomic<Int>(0)

    /// The pool is this store's own, shut down with it (not one it was given).
    private let ownsPool: Bool

    /// A pool of its own (started here, shut down with this), or the caller's.
    init(_ io: LocalObjectStore.IOPool) {
        switch io {
        case .own(let threads):
            pool = NIOThreadPool(numberOfThreads: Swift.max(1, threads))
            pool.start()
            ownsPool = true
        case .shared(let given):
            pool = given
            ownsPool = false
        }
    }

    deinit {
        if ownsPool { pool.shutdownGracefully { _ in } }
    }

    /// Runs `body` on one of the pool's threads. A task cancelled before its job starts gets
    /// `CancellationError` and the job never runs, so jobs must not be the only owner of a cleanup.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        submitted.add(1, ordering: .relaxed)
        return try await pool.runIfActive(body)
    }

    /// Queues `body` on the pool without waiting for it (cleanup from synchronous code, such as
    /// a deinit). Only a pool that is shutting down skips it.
    func submit(_ body: @escaping @Sendable () -> Void) {
        submitted.add(1, ordering: .relaxed)
        pool.submit { state in
            if case .active = state { body() }
        }
    }

    /// Runs `body` on one of the pool's threads even when the calling task is cancelled: for
    /// cleanup that must not be skipped. Only a pool that is shutting down skips it.
    func runToCompletion(_ body: @escaping @Sendable () -> Void) async {
        submitted.add(1, ordering: .relaxed)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            pool.submit { state in
                if case .active = state { body() }
                done.resume()
            }
        }
    }
}

/// Where things live under the data directory. File names are random ids, never derived
/// from bucket names or keys, so no key can name a path outside the directory.
struct StorageLayout: Sendable {
    let root: String
    var tmpDirectory: String { root + "/tmp" }
    var objectsDirectory: String { root + "/objects" }
    var databasePath: String { root + "/meta.sqlite" }

    /// 128 random bits, hex (an upload id).
    static func newID() throws(StoreError) -> String {
        Hex.encode(try randomBytes())
    }

    /// A new object file's id: 120 random bits, hex, with a zero second byte, so that new files
    /// go to the 256 directories `objects/ab/00` (see `objectDirectory`). A store then makes at
    /// most 256 directories, each with an fsync of its parent, rather than a new one for most of
    /// its first hundred thousand writes, and start-up lists 256 directories, not 65,536. Files
    /// an earlier version wrote under other `ab/cd` stay where they are and are read there.
    static func newFileID() throws(StoreError) -> String {
        var bytes = try randomBytes()
        bytes[1] = 0
        return Hex.encode(bytes)
    }

    private static func randomBytes() throws(StoreError) -> [UInt8] {
        do { return try Crypto.randomBytes(count: 16) } catch { throw .io("random: \(error)") }
    }

    static func isValidID(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }


    /// `objects/ab/cd/<id>`, where ab and cd are the id's first two bytes (cd is 00 for the files
    /// `newFileID` names). Refuses anything that is not one of our ids (defence in depth
    /// against a tampered database).
    func objectDirectory(_ id: String) throws(StoreError) -> String {
        guard Self.isValidID(id) else { throw .corrupted("invalid storage id in metadata") }
        let u = Array(id.utf8)
        return objectsDirectory + "/" + String(decoding: u[0..<2], as: UTF8.self) + "/" + String(decoding: u[2..<4], as: UTF8.self)
    }

    func objectPath(_ id: String) throws(StoreError) -> String {
        try objectDirectory(id) + "/" + id
    }
}

/// The object directories (`objects/ab/cd`) known to exist. A write makes its file's directory
/// (and that one's parent) the first time the store meets it, fsyncing the parent that gained
/// an entry so the new directory survives a crash; afterwards it costs no system call.
final class ObjectDirectories: Sendable {
    private let layout: StorageLayout
    private let known = Mutex(Set<String>())

    init(layout: StorageLayout) {
        self.layout = layout
    }

    /// Makes the directory of `path` (an object file's path) if it is not known to exist, and
    /// its parent if that is not known either. Blocking.
    func prepare(containing path: String) throws(StoreError) {
        let directory = (path as NSString).deletingLastPathComponent
        let parent = (directory as NSString).deletingLastPathComponent
        let (knowsDirectory, knowsParent) = known.withLock { ($0.contains(directory), $0.contains(parent)) }
        if knowsDirectory { return }
        if !knowsParent, try Posix.makeDirectory(parent) { try Posix.fsyncDirectory(layout.objectsDirectory) }
        if try Posix.makeDirectory(directory) { try Posix.fsyncDirectory(parent) }
        known.withLock { $0.formUnion([parent, directory]) }
    }
}

/// The bytes of a range of an open file, read in chunks of `chunkSize` on `BlockingIO` as they
/// are consumed. Each iteration reads the range afresh with `pread`, so the sequence can be
/// iterated more than once; the file stays open as long as the sequence or an iterator exists.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let file: FileDescriptor
    let range: Range<Int64>
    let chunkSize: Int
    let io: BlockingIO

    /// `count` bytes at `offset` when all of them are in the page cache, read without waiting
    /// on the disk (`tollgate_pread_nowait`: an event loop may call it); nil when some are not.
    static func readIfCached(_ file: FileDescriptor, at offset: Int64, count: Int) -> ByteBuffer? {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
            count == 0 ? 0 : Swift.max(0, tollgate_pread_nowait(file.fd, pointer.baseAddress, UInt(count), offset))
        }
        return got == count ? buffer : nil
    }

    /// Reads `count` bytes at `offset`; a file shorter than that is damaged (the committed size
    /// is the truth). Blocking.
    static func read(_ file: FileDescriptor, at offset: Int64, count: Int) throws(StoreError) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        let got = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { (pointer) throws(StoreError) -> Int in
            try Posix.preadFully(file.fd, UnsafeMutableRawBufferPointer(rebasing: pointer[0..<count]), at: offset)
        }
        guard got == count else { throw StoreError.corrupted("object file shorter than its committed size") }
        return buffer
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(chunks: self, offset: range.lowerBound)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let chunks: FileChunks
        var offset: Int64

        mutating func next() async throws -> ByteBuffer? {
            guard offset < chunks.range.upperBound else { return nil }
            try Task.checkCancellation()
            let count = Int(Swift.min(Int64(chunks.chunkSize), chunks.range.upperBound - offset))
            let (file, at) = (chunks.file, offset)
            let buffer = try await chunks.io.run { try FileChunks.read(file, at: at, count: count) }
            offset += Int64(count)
            return buffer
        }
    }
}

/// A range of an open file whose pages were in the page cache when it was checked: a sender
/// can pass it to the kernel (`sendfile`) without reading it, and without the kernel waiting on
/// the disk. The file stays open as long as the span exists.
struct FileSpan: Sendable {
    let file: FileDescriptor
    let range: Range<Int64>

    /// The span as the store's zero-copy region, which keeps the file open.
    var region: ZeroCopyRegion { ZeroCopyRegion(descriptor: file.fd, range: range, keepingOpen: file) }
}

/// A range of an open file as `ZeroCopyPiece`s of up to `segmentSize` bytes, each decided by one
/// `BlockingIO` job: `mincore` says whether the segment's pages are cached; if not, the job reads
/// them. So whoever sends the segments never waits on the disk outside the pool. Whether the
/// first segment is cached is checked in the job that opened the file.
struct FileSegments: AsyncSequence, Sendable {
    typealias Element = ZeroCopyPiece

    let file: FileDescriptor
    let range: Range<Int64>
    let segmentSize: Int
    let io: BlockingIO
    /// The first segment's pages were cached when the file was opened.
    let firstCached: Bool

    /// Opens the sequence: checks its first segment, unless `firstCached` says (blocking).
    static func open(_ file: FileDescriptor, range: Range<Int64>, segmentSize: Int, io: BlockingIO, firstCached: Bool? = nil) -> FileSegments {
        let first = range.lowerBound..<Swift.min(range.lowerBound + Int64(segmentSize), range.upperBound)
        return FileSegments(file: file, range: range, segmentSize: segmentSize, io: io, firstCached: firstCached ?? isCached(file, first))
    }

    /// The whole range as one span, when it is one segment and its pages were cached when the
    /// file was opened: a sender can pass it to the kernel at once, without a further job.
    var cachedWhole: FileSpan? {
        guard firstCached, range.count <= segmentSize else { return nil }
        return FileSpan(file: file, range: range)
    }

    /// The cached span of `piece`, or its bytes. Blocking.
    static func segment(_ file: FileDescriptor, _ piece: Range<Int64>) throws(StoreError) -> ZeroCopyPiece {
        if isCached(file, piece) { return .region(FileSpan(file: file, range: piece).region) }
        return .bytes(try FileChunks.read(file, at: piece.lowerBound, count: piece.count))
    }

    private static let pageSize = Int64(sysconf(Int32(_SC_PAGESIZE)))

    /// Whether every page of `range` is in the page cache: by cachestat(2) (one system call),
    /// or, where the kernel has none (before Linux 6.5) or a sandbox forbids it, by mincore.
    /// Blocking (mincore maps the file).
    static func isCached(_ file: FileDescriptor, _ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return false }
        return cachedWithoutWaiting(file, range) ?? cachedByMincore(file, range)
    }

    /// Whether every page of `range` is in the page cache, by cachestat(2), which never waits
    /// on anything (an event loop may ask); nil when the kernel cannot tell that way.
    static func cachedWithoutWaiting(_ file: FileDescriptor, _ range: Range<Int64>) -> Bool? {
        guard hasCachestat.load(ordering: .relaxed) else { return nil }
        if let cached = cachedByCachestat(file, range) { return cached }
        if errno == ENOSYS || errno == EPERM { hasCachestat.store(false, ordering: .relaxed) }
        return nil
    }

    /// cachestat(2) is not known to be missing (ENOSYS) or forbidden (EPERM, by a seccomp filter).
    private static let hasCachestat = Atomic<Bool>(true)

    /// Whether every page of `range` is cached, by cachestat(2); nil when the call fails.
    static func cachedByCachestat(_ file: FileDescriptor, _ range: Range<Int64>) -> Bool? {
        var cached: UInt64 = 0
        guard tollgate_cached_pages(file.fd, UInt64(range.lowerBound), UInt64(range.count), &cached) == 0 else { return nil }
        let pages = (range.upperBound - 1) / pageSize - range.lowerBound / pageSize + 1
        return cached >= UInt64(pages)
    }

    /// Whether every page of `range` is cached, by mmap, mincore and munmap (three system calls,
    /// and a TLB flush on the process's other CPUs).
    static func cachedByMincore(_ file: FileDescriptor, _ range: Range<Int64>) -> Bool {
        BlockingWork.check("mmap, mincore")
        let start = range.lowerBound / pageSize * pageSize
        let length = Int(range.upperBound - start)
        guard length > 0, let map = mmap(nil, length, PROT_READ, MAP_SHARED, file.fd, off_t(start)), map != MAP_FAILED else {
            return false
        }
        defer { munmap(map, length) }
        let pages = (length + Int(pageSize) - 1) / Int(pageSize)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: pages) { vector in
            guard mincore(map, length, vector.baseAddress!) == 0 else { return false }
            return vector.allSatisfy { $0 & 1 == 1 }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(segments: self, offset: range.lowerBound)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let segments: FileSegments
        var offset: Int64

        mutating func next() async throws -> ZeroCopyPiece? {
            guard offset < segments.range.upperBound else { return nil }
            let piece = offset..<Swift.min(offset + Int64(segments.segmentSize), segments.range.upperBound)
            defer { offset = piece.upperBound }
            if offset == segments.range.lowerBound, segments.firstCached { return .region(FileSpan(file: segments.file, range: piece).region) }
            try Task.checkCancellation()
            let file = segments.file
            return try await segments.io.run { try FileSegments.segment(file, piece) }
        }
    }
}

/// The store's claim on its data directory: an exclusive `flock` on `<directory>/lock`, held
/// while the store is open, with the holder's pid in the file. Two processes on one store would
/// each delete, at start-up, the files the other is still writing, and each would serve from a
/// cache the other's writes never empty; so a second one is refused instead. On a file system
/// that has no locks, the store opens without one and says so (`unguarded`), for a warning at start-up.
final class DirectoryLock: Sendable {
    private let fd = Mutex<Int32>(-1)
    /// Why the directory could not be locked (the file system has no locks), or nil when it is.
    let unguarded: String?

    init(directory: String, lock: (Int32, Int32) -> Int32 = { flock($0, $1) }) throws {
        let path = directory + "/lock"
        let fd = try Posix.open(path, O_RDWR | O_CREAT)
        var unguarded: String?
        while lock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            // A file system without locks (some FUSE mounts) opens unguarded, as before the lock.
            if [ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL].contains(errno) {
                unguarded = "flock \(path): \(String(cString: strerror(errno)))"
                break
            }
            let busy = errno == EWOULDBLOCK
            let failure = Posix.failure("flock \(path)")
            let holder = busy ? Self.holder(fd) : nil
            close(fd)
            if busy { throw StoreOpenError.inUse(directory: directory, pid: holder) }
            throw failure
        }
        // The pid is for the message a second process prints; the lock holds without it.
        do {
            try Posix.ftruncate(fd, 0)
            try Posix.pwriteAll(fd, [ByteBuffer(string: "\(getpid())\n")], at: 0)
        } catch {}
        self.fd.withLock { $0 = fd }
        self.unguarded = unguarded
    }

    /// Releases the directory (also at deinit).
    func release() {
        fd.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    deinit { release() }

    /// The pid the holder wrote, if it is one.
    private static func holder(_ fd: Int32) -> Int? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int(String(decoding: bytes[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// Why a store could not be opened, other than a failing call.
public enum StoreOpenError: Error, Equatable, CustomStringConvertible {
    /// Another open store (another process, or another `LocalObjectStore` in this one) holds
    /// the directory's lock.
    case inUse(directory: String, pid: Int?)

    public var description: String {
        switch self {
        case .inUse(let directory, let pid):
            "\(directory) is in use by another tollgate process\(pid.map { " (pid \($0))" } ?? ""): stop it first, or give this one another DataDirectory"
        }
    }
}
