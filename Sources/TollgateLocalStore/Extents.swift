import TollgateStore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Files that reads of objects made of several files (`StoredObject.extents`) are using, kept
/// from deletion until the last such read ends.
///
/// A single-file object needs none of this: a read opens its one file first, and an open file
/// outlives its deletion. An object of many files (a completed multipart upload: up to 10,000)
/// cannot open them all first, so its read takes a lease on them instead, and `removeFiles`
/// defers deleting a leased file to the end of its last lease. A read takes its lease, then
/// checks that the row still names the same files (`LocalObjectStore.getObject`): a commit that
/// replaced the row after that check deletes its files only after the check, so it sees the lease.
final class FileLeases: Sendable {
    private struct State {
        /// Leases per leased file.
        var holders: [String: Int] = [:]
        /// Leased files whose rows are gone: deleted when their last lease ends.
        var doomed: Set<String> = []
    }

    private let state = Mutex(State())
    /// Deletes files (queues the unlinks on the store's blocking pool; never blocks).
    private let delete: @Sendable ([String]) -> Void

    init(delete: @escaping @Sendable ([String]) -> Void) {
        self.delete = delete
    }

    /// A lease on `ids`, held until the lease is released (dropped).
    func lease(_ ids: [String]) -> FileLease {
        state.withLock { state in
            for id in ids { state.holders[id, default: 0] += 1 }
        }
        return FileLease(ids: ids, leases: self)
    }

    /// The ids among `ids` that may be deleted now; the leased rest are deleted when their last
    /// lease ends.
    func claim(_ ids: [String]) -> [String] {
        state.withLock { state in
            ids.filter { id in
                guard state.holders[id] != nil else { return true }
                state.doomed.insert(id)
                return false
            }
        }
    }

    /// Files leased now (tests).
    var leased: Int { state.withLock { $0.holders.count } }

    fileprivate func release(_ ids: [String]) {
        let free = state.withLock { state in
            ids.filter { id in
                let left = state.holders[id, default: 1] - 1
                state.holders[id] = left > 0 ? left : nil
                return left == 0 && state.doomed.remove(id) != nil
            }
        }
        if !free.isEmpty { delete(free) }
    }
}

/// A lease on files (`FileLeases`), released when the last reference to it goes: a body holds
/// it, so it lasts as long as the body or any iteration of it.
final class FileLease: Sendable {
    private let ids: [String]
    private let leases: FileLeases

    fileprivate init(ids: [String], leases: FileLeases) {
        self.ids = ids
        self.leases = leases
    }

    deinit { leases.release(ids) }
}

/// A range of an object made of several files, as one sequence: each file's share of the range
/// in turn, its file opened (in a `BlockingIO` job, with whatever `make` does there) when the
/// sequence reaches it. The files stay leased as long as the sequence or an iterator exists.
struct ExtentSequence<Inner: AsyncSequence & Sendable>: AsyncSequence, Sendable where Inner.Element: Sendable {
    typealias Element = Inner.Element

    let pieces: [ExtentPiece]
    let io: BlockingIO
    let lease: FileLease
    /// A file's sequence over its range; blocking (it runs in the job that opened the file).
    let make: @Sendable (FileDescriptor, Range<Int64>) throws(StoreError) -> Inner

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(sequence: self) }

    struct AsyncIterator: AsyncIteratorProtocol {
        let sequence: ExtentSequence
        var index = 0
        var current: Inner.AsyncIterator?

        mutating func next() async throws -> Element? {
            while true {
                if current != nil, let element = try await current!.next() { return element }
                current = nil
                guard index < sequence.pieces.count else { return nil }
                let (piece, make) = (sequence.pieces[index], sequence.make)
                index += 1
                let inner = try await sequence.io.run { () throws(StoreError) -> Inner in
                    let fd = Foundation.open(piece.path, O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else {
                        // Leased: only damage outside the store removes it.
                        throw errno == ENOENT ? StoreError.corrupted("a file of a multipart object is missing") : Posix.failure("open")
                    }
                    return try make(FileDescriptor(fd), piece.range)
                }
                current = inner.makeAsyncIterator()
            }
        }
    }
}

/// The share of a range that lies in one file of an object made of several.
struct ExtentPiece: Sendable {
    let path: String
    /// The bytes of the file to read.
    let range: Range<Int64>

    /// The pieces of `range` in the files of `extents`, which follow each other in the object.
    static func pieces(of extents: [FileExtent], range: Range<Int64>, layout: StorageLayout) throws(StoreError) -> [ExtentPiece] {
        var pieces: [ExtentPiece] = []
        var start: Int64 = 0
        for extent in extents {
            let end = start + extent.size
            let (lower, upper) = (Swift.max(start, range.lowerBound), Swift.min(end, range.upperBound))
            if lower < upper { pieces.append(ExtentPiece(path: try layout.objectPath(extent.fileID), range: (lower - start)..<(upper - start))) }
            start = end
        }
        return pieces
    }
}
