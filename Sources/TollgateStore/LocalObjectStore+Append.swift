import Foundation
import GRDB
import NIOCore
import TollgateCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// OSS AppendObject.
///
/// The first append (position 0 on a missing key) creates the object through the ordinary
/// write protocol (temp file, fsync, rename, commit) with `appendable` set.
///
/// Later appends write **in place**: the row's `size` is the committed length and every reader
/// is bounded by it (`getObject` serves `0..<size` from a descriptor opened on the file). An
/// append takes a per-object lock, truncates the file to the committed size (dropping any tail
/// a crashed or failed append left), writes the new bytes after it, fsyncs, and then commits the
/// new size in a transaction that checks the row still names the same file and length. A crash
/// before the commit leaves bytes past the committed size that nobody reads and the next append
/// truncates; bytes below the committed size are never rewritten, so concurrent readers of an
/// older, shorter version still see exactly that version.
///
/// The ETag of an appended object is not the MD5 of its content (neither is OSS's): it chains
/// the previous ETag with the MD5 of the appended bytes, so it changes with every append.
extension LocalObjectStore {
    public func appendObject<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions = WriteOptions()
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        guard position >= 0 else { throw StoreError.invalidArgument("Position must not be negative") }
        _ = try await headBucket(bucket)
        let lockKey = bucket + "/" + key
        await appendLocks.acquire(lockKey)
        do {
            let info = try await appendLocked(bucket: bucket, key: key, position: position, body: body, metadata: metadata, options: options)
            await appendLocks.release(lockKey)
            return info
        } catch {
            await appendLocks.release(lockKey)
            throw error
        }
    }

    private func appendLocked<Body: AsyncSequence>(
        bucket: String, key: String, position: Int64, body: Body, metadata: ObjectMetadata, options: WriteOptions
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        let current = try await read { db in try Self.fetchObject(db, bucket, key) }
        guard let current else {
            guard position == 0 else { throw StoreError.positionNotEqualToLength(next: 0) }
            let file = try await stage(body, computeSHA256: options.computeSHA256, verify: options.verify)
            return try await commitObject(
                bucket: bucket, key: key, file: file, etag: Self.quotedETag(file.md5), metadata: metadata,
                appendable: true, preconditions: options.preconditions,
                extra: { _, existing in
                    // A PUT may have created the key since we looked.
                    if let existing { throw Self.appendRefusal(existing, position: position) ?? StoreError.positionNotEqualToLength(next: existing.size) }
                    return []
                }
            )
        }
        if let refusal = Self.appendRefusal(current, position: position) { throw refusal }
        try Self.check(options.preconditions, current: current)

        let path = try layout.objectPath(current.storageID)
        let fd = Foundation.open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            // Replaced or deleted since we read the row.
            if errno == ENOENT { throw StoreError.positionNotEqualToLength(next: 0) }
            throw Posix.failure("open")
        }
        let file = FileDescriptor(fd)
        let appended: BodyDigest
        do {
            try Posix.ftruncate(file.fd, position)
            let md5 = try StreamingDigest(.md5)
            let sha = options.computeSHA256 ? try StreamingDigest(.sha256) : nil
            var offset = position
            for try await buffer in body {
                let at = offset
                try buffer.withUnsafeReadableBytes { bytes in
                    try md5.update(bytes)
                    try sha?.update(bytes)
                    try checkWriteFault()
                    try Posix.pwriteAll(file.fd, bytes, at: at)
                }
                offset += Int64(buffer.readableBytes)
            }
            appended = BodyDigest(size: offset - position, md5: try md5.finalize(), sha256: try sha?.finalize())
            if let verify = options.verify { try await verify(appended) }
            try await BlockingIO.run { try Posix.fsync(file.fd) }
            storageState.noteWritten()
        } catch {
            // Drop the uncommitted tail now rather than at the next append.
            try? Posix.ftruncate(file.fd, position)
            storageState.note(error)
            throw error
        }

        let chained = try Crypto.md5(Array(ETag.normalize(current.etag).utf8) + appended.md5)
        let info = ObjectInfo(
            bucket: bucket, key: key, size: position + appended.size, etag: Self.quotedETag(chained),
            lastModified: now(), metadata: current.metadata, storageID: current.storageID, isAppendable: true
        )
        let preconditions = options.preconditions
        try await write { db in
            guard let row = try Self.fetchObject(db, bucket, key) else { throw StoreError.positionNotEqualToLength(next: 0) }
            guard row.storageID == current.storageID, row.size == position else {
                throw Self.appendRefusal(row, position: position) ?? StoreError.positionNotEqualToLength(next: row.size)
            }
            try Self.check(preconditions, current: row)
            try db.execute(
                sql: "UPDATE object SET size = ?, etag = ?, last_modified_ms = ? WHERE bucket = ? AND key = ?",
                arguments: [info.size, info.etag, Millis.from(info.lastModified), bucket, key.keyBlob]
            )
        }
        return info
    }

    /// Why an append at `position` to `object` is refused, or nil when it may proceed.
    static func appendRefusal(_ object: ObjectInfo, position: Int64) -> StoreError? {
        if !object.isAppendable { return .objectNotAppendable }
        if object.size != position { return .positionNotEqualToLength(next: object.size) }
        return nil
    }
}
