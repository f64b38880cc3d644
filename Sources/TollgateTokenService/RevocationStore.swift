import Foundation
import NIOPosix
import Synchronization
import TollgateConfig
import TollgateStore
import TollgateToken

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A revocation file that cannot be read, parsed or written.
public struct RevocationStoreError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let message: String

    public var description: String { "\(path): \(message)" }
}

/// The revocations in force, kept durably in `DataDirectory/revocations.json`, or, with the s3
/// storage backend, in the backend (`SharedDocuments`), where every instance reads them.
///
/// Every writer (the `tollgate token revoke` command, the admin endpoint) takes an exclusive
/// `flock` on `revocations.json.lock`, re-reads the file, adds its entry, drops entries whose
/// tokens have all expired, and replaces the file atomically (temporary file, fsync, rename,
/// fsync of the directory; mode 0600). So the command may write while the server runs, and a
/// crash leaves the old list or the new one. The server notices a replaced file by its inode,
/// size and modification time (`RevocationWatcher`) and swaps the list it checks.
///
/// Shared (`init(shared:)`): the list is the backend's document `revocations.json`. A writer
/// reads it, adds its entry, prunes, and writes it back only if no other instance wrote in
/// between (a conditional write; on a conflict it starts over); every instance reads it again
/// every second with a conditional GET (`refresh`), which costs no transfer while it is unchanged.
public final class RevocationStore: Sendable {
    public static let fileName = "revocations.json"

    public let path: String
    /// The longest a token lives; an entry is dropped that long after its revocation.
    public let maxTokenLifetime: Int64
    private let state: Mutex<(list: RevocationList, stamp: FileStamp?)>
    /// Where the list lives.
    private enum Backing {
        /// A file in the data directory, read and written on this pool (it blocks).
        case file(pool: NIOThreadPool)
        /// The backend's document, read and written asynchronously.
        case shared(any SharedDocuments)
    }

    private let backing: Backing
    /// The version of the backend's document in force, when the list is shared.
    private let version = Mutex<String?>(nil)

    /// The list shared by every instance through the storage backend, empty until `refresh`.
    public init(shared documents: any SharedDocuments, maxTokenLifetime: Int = TollgateConfig.maximumTokenLifetime) {
        backing = .shared(documents)
        path = "storage backend: " + Self.fileName
        self.maxTokenLifetime = Int64(maxTokenLifetime)
        state = Mutex((RevocationList(), nil))
    }

    /// Whether the list is the storage backend's, shared by every instance.
    public var isShared: Bool {
        if case .shared = backing { true } else { false }
    }

    /// Records a revocation at `now`: in the file (`revokeOffloaded`), or in the backend's document.
    public func record(_ kind: RevocationKind, _ value: String, now: Date) async throws(RevocationStoreError) -> Revocation {
        switch backing {
        case .file(let pool): try await revokeOffloaded(kind, value, now: now, pool: pool)
        case .shared(let documents): try await recordShared(kind, value, now: now, in: documents)
        }
    }

    /// Adds the revocation to the backend's document, read and replaced only if no other
    /// instance replaced it meanwhile (else read again, at most 20 times).
    private func recordShared(_ kind: RevocationKind, _ value: String, now: Date,
                              in shared: any SharedDocuments) async throws(RevocationStoreError) -> Revocation {
        do { try Revocation.validate(kind: kind, value: value) } catch {
            throw RevocationStoreError(path: path, message: "\(error)")
        }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        for _ in 0..<20 {
            do {
                var list = RevocationList()
                var current: String?
                if case .document(let bytes, let found) = try await shared.read(Self.fileName, ifChangedFrom: nil) {
                    list = try RevocationList.decode(Data(bytes))
                    current = found
                }
                let entry = list.add(Revocation(kind: kind, value: value, revokedAt: nowSeconds))
                list = list.pruned(now: nowSeconds, maxTokenLifetime: maxTokenLifetime)
                let written = try await shared.write(Self.fileName, Array(list.encoded()), replacing: current)
                state.withLock { $0.list = list }
                version.withLock { $0 = written }
                return entry
            } catch StoreError.preconditionFailed {
                // Another instance wrote first: read its list and add to it.
                try? await Task.sleep(for: .milliseconds(Int.random(in: 10...50)))
                continue
            } catch let error as RevocationStoreError {
                throw error
            } catch {
                throw RevocationStoreError(path: path, message: "\(error)")
            }
        }
        throw RevocationStoreError(path: path, message: "other instances kept writing the list; try again")
    }

    /// Reads the list again when it changed (the file replaced, the backend's document
    /// rewritten). Returns true when the list changed; on an error the list in force stays.
    @discardableResult
    public func refresh() async throws(RevocationStoreError) -> Bool {
        guard case .shared(let shared) = backing else { return try reloadIfChanged() }
        let read: SharedDocumentRead
        do { read = try await shared.read(Self.fileName, ifChangedFrom: version.withLock { $0 }) } catch {
            throw RevocationStoreError(path: path, message: "\(error)")
        }
        let list: RevocationList
        switch read {
        case .unchanged:
            return false
        case .absent:
            list = RevocationList()
            version.withLock { $0 = nil }
        case .document(let bytes, let found):
            do { list = try RevocationList.decode(Data(bytes)) } catch {
                throw RevocationStoreError(path: path, message: "\(error)")
            }
            version.withLock { $0 = found }
        }
        return state.withLock { current in
            let changed = current.list != list
            current.list = list
            return changed
        }
    }

    struct FileStamp: Equatable, Sendable {
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int
    }

    /// Opens the list in `dataDirectory` (creating nothing until the first revocation). A file
    /// that exists but cannot be read or parsed is an error: starting without it would lift
    /// every revocation.
    public init(dataDirectory: String, maxTokenLifetime: Int = TollgateConfig.maximumTokenLifetime,
                pool: NIOThreadPool) throws(RevocationStoreError) {
        backing = .file(pool: pool)
        path = (dataDirectory as NSString).appendingPathComponent(Self.fileName)
        self.maxTokenLifetime = Int64(maxTokenLifetime)
        let stamp = Self.stamp(path)
        let list = try Self.read(path)
        state = Mutex((list, stamp))
    }

    /// The list in force.
    public var list: RevocationList { state.withLock { $0.list } }

    /// The revocation that refuses a token with these claims, or nil. On the gateway's path for
    /// every request with temporary credentials: a lock and, when the list is not empty, up to
    /// three dictionary lookups.
    public func match(_ claims: TokenClaims) -> Revocation? {
        state.withLock { $0.list.isEmpty ? nil : $0.list.match(claims) }
    }

    /// Records a revocation at `now` and returns the entry in force. Blocking file I/O: call
    /// it off the event loops (`revokeOffloaded`) in the server.
    @discardableResult
    public func revoke(_ kind: RevocationKind, _ value: String, now: Date) throws(RevocationStoreError) -> Revocation {
        do { try Revocation.validate(kind: kind, value: value) } catch {
            throw RevocationStoreError(path: path, message: "\(error)")
        }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw RevocationStoreError(path: directory, message: "cannot create the data directory (\(error.localizedDescription))")
        }
        let lock = try openFile(path + ".lock", O_RDWR | O_CREAT)
        giveToDirectoryOwner(lock)
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw failure("flock") }
        }
        var list = try Self.read(path)
        let entry = list.add(Revocation(kind: kind, value: value, revokedAt: nowSeconds))
        list = list.pruned(now: nowSeconds, maxTokenLifetime: maxTokenLifetime)
        try write(list.encoded())
        let stamp = Self.stamp(path)
        state.withLock { $0 = (list, stamp) }
        return entry
    }

    /// `revoke` on the blocking pool the store was given, so the file I/O holds neither an event
    /// loop nor the cooperative pool. Should the pool refuse the job (it is shutting down), it
    /// runs here.
    private func revokeOffloaded(_ kind: RevocationKind, _ value: String, now: Date,
                                 pool: NIOThreadPool) async throws(RevocationStoreError) -> Revocation {
        let attempt = { @Sendable () -> Result<Revocation, RevocationStoreError> in
            Result { () throws(RevocationStoreError) in try self.revoke(kind, value, now: now) }
        }
        let result = (try? await pool.runIfActive(attempt)) ?? attempt()
        return try result.get()
    }

    /// Re-reads the file if it was replaced since it was last read. Returns true when the list
    /// changed. On an error the list in force stays and the error is thrown (the next change
    /// of the file is tried again).
    @discardableResult
    public func reloadIfChanged() throws(RevocationStoreError) -> Bool {
        let stamp = Self.stamp(path)
        guard stamp != state.withLock({ $0.stamp }) else { return false }
        let list: RevocationList
        do { list = try Self.read(path) } catch {
            state.withLock { $0.stamp = stamp }
            throw error
        }
        return state.withLock { current in
            let changed = current.list != list
            current = (list, stamp)
            return changed
        }
    }

    // MARK: Files

    static func stamp(_ path: String) -> FileStamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        return FileStamp(inode: UInt64(info.st_ino), size: Int64(info.st_size),
                         modifiedSeconds: Int(modified.tv_sec), modifiedNanoseconds: Int(modified.tv_nsec))
    }

    /// The list in the file; an empty list when there is no file.
    static func read(_ path: String) throws(RevocationStoreError) -> RevocationList {
        guard FileManager.default.fileExists(atPath: path) else { return RevocationList() }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw RevocationStoreError(path: path, message: "cannot read the file (\(error.localizedDescription))")
        }
        do { return try RevocationList.decode(data) } catch {
            throw RevocationStoreError(path: path, message: "\(error)")
        }
    }

    /// Replaces the file atomically: a temporary file in the same directory, written and
    /// fsynced, renamed over the old one, then the directory fsynced so the rename is durable.
    private func write(_ data: Data) throws(RevocationStoreError) {
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = try openFile(temporary, O_WRONLY | O_CREAT | O_EXCL)
        giveToDirectoryOwner(fd)
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            let error = data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int32 in
                var done = 0
                while done < bytes.count {
                    let n = Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
                    if n < 0 {
                        if errno == EINTR { continue }
                        return errno
                    }
                    done += n
                }
                return 0
            }
            guard error == 0 else {
                errno = error
                throw failure("write")
            }
            guard fsync(fd) == 0 else { throw failure("fsync") }
        }
        guard rename(temporary, path) == 0 else { throw failure("rename") }
        ok = true
        let directory = (path as NSString).deletingLastPathComponent
        let dirfd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            _ = fsync(dirfd)
            close(dirfd)
        }
    }

    /// Run as root (say `docker exec -u 0 … tollgate token revoke`), a writer hands the file to
    /// the data directory's owner, the server's user: a root-owned 0600 file would be unreadable
    /// to the server and would stop its next start.
    private func giveToDirectoryOwner(_ fd: Int32) {
        guard geteuid() == 0 else { return }
        var info = stat()
        let directory = (path as NSString).deletingLastPathComponent
        guard stat(directory.isEmpty ? "." : directory, &info) == 0, info.st_uid != 0 else { return }
        _ = fchown(fd, info.st_uid, info.st_gid)
    }

    private func openFile(_ file: String, _ flags: Int32) throws(RevocationStoreError) -> Int32 {
        while true {
            let fd = open(file, flags | O_CLOEXEC, 0o600)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw RevocationStoreError(path: file, message: "cannot open (\(String(cString: strerror(errno))))")
        }
    }

    private func failure(_ operation: String) -> RevocationStoreError {
        RevocationStoreError(path: path, message: "\(operation) failed (\(String(cString: strerror(errno))))")
    }
}
