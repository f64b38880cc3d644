import TollgateStore
import Foundation
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
/// write protocol (a new file under a fresh id, fsync, directory fsync, commit) with `appendable` set.
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
        guard position >= 0 else { throw StoreError.negativePosition }
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
        guard let current = try await index.currentObject(bucket: bucket, key: key) else {
            guard position == 0 else { throw StoreError.positionNotEqualToLength(next: 0) }
            let file = try await stage(body, expectedMD5: options.expectedMD5)
            return try await commitObject(
                bucket: bucket, key: key, file: file, etag: ETag.quoted(md5: file.md5), metadata: metadata,
                appendable: true, checksums: ObjectChecksums(crc64ecma: options.bodyChecksums?().crc64ecma), preconditions: options.preconditions,
                check: { existing in
                    // A PUT may have created the key since we looked.
                    if let existing { throw existing.appendRefusal(position: position) ?? StoreError.positionNotEqualToLength(next: existing.size) }
                }
            )
        }
        if let refusal = current.info.appendRefusal(position: position) { throw refusal }
        try options.preconditions.check(against: current.info)

        let writer = try FileWriter(path: try layout.objectPath(current.fileID), mode: .append(at: position), fault: configuration.writeFault)
        let appended: (size: Int64, md5: [UInt8])
        do {
            let last = try await writeBatches(body, to: writer)
            appended = try await io.run {
                try writer.write(last)
                return try writer.finish(expectedMD5: options.expectedMD5)
            }
            storageState.noteWritten()
        } catch {
            await io.runToCompletion { writer.abandon() }
            storageState.note(error)
            throw error
        }

        let chained = try Crypto.md5(Array(ETag.normalize(current.info.etag).utf8) + appended.md5)
        let info = ObjectInfo(
            bucket: bucket, key: key, size: position + appended.size, etag: ETag.quoted(md5: chained),
            lastModified: now(), metadata: current.info.metadata, isAppendable: true,
            checksums: current.info.checksums.appending(options.bodyChecksums?() ?? .none, length: appended.size)
        )
        try await index.commitAppend(
            StoredObject(info: info, fileID: current.fileID), previousSize: position, preconditions: options.preconditions,
            refusal: { row in
                guard let row else { return .positionNotEqualToLength(next: 0) }
                return row.appendRefusal(position: position) ?? .positionNotEqualToLength(next: row.size)
            }
        )
        return info
    }
}
