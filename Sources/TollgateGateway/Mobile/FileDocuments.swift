import Foundation
import NIOPosix
import Synchronization
import TollgateStore

/// Shared documents in a directory, for a store that serves one instance alone (the local
/// store: its directory lock keeps every other process out). Each write replaces its file
/// atomically (temporary file, fsync, rename, fsync of the directory), so a crash leaves the
/// old document or the new one. Versions are kept in memory: compare-and-swap is between this
/// process's writers, under one lock. Files are read and written on NIO's thread pool.
final class FileDocuments: SharedDocuments {
    let directory: String
    /// Name → what the file holds (nil: no file), once read.
    private let known = Mutex<[String: Document?]>([:])

    struct Document: Sendable {
        var bytes: [UInt8]
        var version: String
    }

    /// Where the files are read and written (it blocks): the server's one blocking pool.
    let pool: NIOThreadPool

    init(directory: String, pool: NIOThreadPool) {
        self.directory = directory
        self.pool = pool
    }

    func read(_ name: String, ifChangedFrom version: String?) async throws -> SharedDocumentRead {
        let document = try await offload { try self.current(name) }
        guard let document else { return .absent }
        if document.version == version { return .unchanged }
        return .document(bytes: document.bytes, version: document.version)
    }

    func write(_ name: String, _ bytes: [UInt8], replacing version: String?) async throws -> String {
        try await offload {
            try self.writeLocked(name, bytes, replacing: version)
        }
    }

    func delete(_ name: String) async throws {
        try await offload {
            try self.writing.withLock { _ in
                guard unlink(self.path(name)) == 0 || errno == ENOENT else { throw Self.failure("unlink", self.path(name)) }
                self.known.withLock { $0[name] = .some(nil) }
            }
        }
    }

    private let writing = Mutex<Void>(())

    private func writeLocked(_ name: String, _ bytes: [UInt8], replacing version: String?) throws -> String {
        try writing.withLock { _ in
            guard try current(name)?.version == version else { throw StoreError.preconditionFailed }
            try replaceFile(path(name), bytes)
            let written = Document(bytes: bytes, version: Self.version(of: bytes, after: version))
            known.withLock { $0[name] = .some(written) }
            return written.version
        }
    }

    /// The document as last read or written; the file is read once.
    private func current(_ name: String) throws -> Document? {
        if let cached = known.withLock({ $0[name] }) { return cached }
        let path = path(name)
        let document: Document?
        if FileManager.default.fileExists(atPath: path) {
            do {
                let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
                document = Document(bytes: bytes, version: Self.version(of: bytes, after: nil))
            } catch {
                throw StoreError.io("cannot read \(path): \(error.localizedDescription)")
            }
        } else {
            document = nil
        }
        known.withLock { $0[name] = .some(document) }
        return document
    }

    /// A version no earlier one of this name has had in this process: a count, and a hash of the bytes.
    private static func version(of bytes: [UInt8], after previous: String?) -> String {
        let count = previous.flatMap { $0.split(separator: "-").first.flatMap { Int($0) } } ?? 0
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "\(count + 1)-\(String(hash, radix: 16))"
    }

    private func path(_ name: String) -> String {
        (directory as NSString).appendingPathComponent(name)
    }

    private func replaceFile(_ path: String, _ bytes: [UInt8]) throws {
        let folder = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure("open", temporary) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            var done = 0
            while done < bytes.count {
                let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + done, bytes.count - done) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw Self.failure("write", temporary)
                }
                done += n
            }
            guard fsync(fd) == 0 else { throw Self.failure("fsync", temporary) }
        }
        guard rename(temporary, path) == 0 else { throw Self.failure("rename", path) }
        renamed = true
        let dirfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            _ = fsync(dirfd)
            close(dirfd)
        }
    }

    private static func failure(_ operation: String, _ path: String) -> StoreError {
        let reason = String(cString: strerror(errno))
        if errno == ENOSPC || errno == EDQUOT { return .storageFull("\(operation) \(path): \(reason)") }
        return .io("\(operation) \(path): \(reason)")
    }

    private func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(work)
    }
}
