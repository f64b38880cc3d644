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

/// Multipart uploads. Each part is its own file under `objects/` (random id), referenced by a
/// part row in the index; completing concatenates the part files into a new object file
/// (streamed, never in memory), makes it durable, and in the commit transaction replaces the object
/// row and deletes the upload's rows. The part files are deleted after the commit; if a crash
/// intervenes they are orphans and start-up removes them.
extension LocalObjectStore {
    public func createMultipartUpload(bucket: String, key: String, metadata: ObjectMetadata, checksum: UploadChecksum?) async throws -> MultipartUpload {
        try StoreNames.validateBucket(bucket)
        try StoreNames.validateKey(key)
        let upload = MultipartUpload(bucket: bucket, key: key, uploadID: try StorageLayout.newID(), initiated: now(), metadata: metadata,
                                     checksum: checksum)
        try await index.createUpload(upload, limit: maxUploadsPerBucket)
        return upload
    }

    public func uploadPart<Body: AsyncSequence>(
        bucket: String, key: String, uploadID: String, partNumber: Int, body: Body, options: WriteOptions = WriteOptions()
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try MultipartRules.validatePartNumber(partNumber)
        let upload = try await index.upload(bucket: bucket, key: key, uploadID: uploadID)
        let file = try await stage(body, expectedMD5: options.expectedMD5)
        let checksums = options.bodyChecksums?() ?? .none
        do { try MultipartRules.checkPartChecksum(checksums, upload: upload) } catch {
            await removeFiles([file.id])
            throw error
        }
        return try await commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, file: file, checksums: checksums)
    }

    public func uploadPartCopy(
        bucket: String, key: String, uploadID: String, partNumber: Int,
        source: ObjectLocation, range: ByteRange?, options: CopyOptions = CopyOptions()
    ) async throws -> PartInfo {
        try MultipartRules.validatePartNumber(partNumber)
        _ = try await index.upload(bucket: bucket, key: key, uploadID: uploadID)
        let read = try await getObject(bucket: source.bucket, key: source.key, range: range)
        try options.sourceConditions.check(read.info)
        let file = try await stage(read.body)
        return try await commitPart(bucket: bucket, key: key, uploadID: uploadID, partNumber: partNumber, file: file,
                                    checksums: range == nil ? read.info.checksums.ofCopy : .none)
    }

    /// Records a published part file, then deletes the file of the part it replaced.
    func commitPart(bucket: String, key: String, uploadID: String, partNumber: Int, file: PublishedFile, checksums: ObjectChecksums) async throws -> PartInfo {
        let info = PartInfo(partNumber: partNumber, etag: ETag.quoted(md5: file.md5), size: file.size, lastModified: now(), checksums: checksums)
        let obsolete: String?
        do {
            obsolete = try await index.commitPart(bucket: bucket, key: key, uploadID: uploadID, part: PartRow(info: info, fileID: file.id))
        } catch {
            await removeFiles([file.id])
            throw error
        }
        await removeFiles(obsolete.map { [$0] } ?? [])
        return info
    }

    public func listParts(bucket: String, key: String, uploadID: String, partNumberMarker: Int = 0, maxParts: Int = 1000) async throws -> ListPartsResult {
        try await index.listParts(bucket: bucket, key: key, uploadID: uploadID, partNumberMarker: partNumberMarker, maxParts: maxParts)
    }

    public func listMultipartUploads(bucket: String, query: ListUploadsQuery) async throws -> ListUploadsResult {
        try await index.listUploads(bucket: bucket, query: query)
    }

    public func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        await removeFiles(try await index.abortUpload(bucket: bucket, key: key, uploadID: uploadID))
    }

    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [CompletedPart], options: CompleteOptions
    ) async throws -> ObjectInfo {
        try MultipartRules.validate(parts)
        let upload: MultipartUpload, stored: [PartRow]
        do {
            (upload, stored) = try await index.uploadWithParts(bucket: bucket, key: key, uploadID: uploadID)
        } catch StoreError.noSuchUpload(let uploadID) {
            // Completed already? The same request again gets the same answer (S3 and RGW do).
            let completed = try await index.completedUpload(uploadID)
            let current = try await index.currentObject(bucket: bucket, key: key)?.info
            if MultipartRules.isRetry(bucket: bucket, key: key, parts: parts, completed: completed, current: current), let current { return current }
            throw StoreError.noSuchUpload(uploadID: uploadID)
        }
        let chosen = try MultipartRules.choose(
            parts, from: Dictionary(uniqueKeysWithValues: stored.map { ($0.info.partNumber, $0) }), info: \.info,
            minimumPartSize: options.minimumPartSize ?? configuration.minimumPartSize
        )
        let etag = try MultipartRules.etag(chosen.map(\.info))
        let checksums = try MultipartRules.checksums(of: chosen.map(\.info), upload: upload.checksum, expected: options.expectedChecksum)

        let id = try StorageLayout.newFileID()
        let path = try layout.objectPath(id)
        let (layout, directories, fault) = (self.layout, self.directories, configuration.writeFault)
        let inputs = try chosen.map { (try layout.objectPath($0.fileID), $0.info) }
        let size: Int64
        do {
            size = try await io.run {
                try directories.prepare(containing: path)
                let total = try Self.concatenate(inputs, into: path, fault: fault)
                try Posix.fsyncDirectory((path as NSString).deletingLastPathComponent)
                return total
            }
            storageState.noteWritten()
        } catch {
            Posix.unlinkIfPresent(path)
            storageState.note(error)
            throw error
        }
        let file = PublishedFile(id: id, size: size, md5: [])
        return try await commitObject(
            bucket: bucket, key: key, file: file, etag: etag, metadata: upload.metadata, appendable: false,
            checksums: checksums, preconditions: options.preconditions,
            // The upload must still exist and every part used must be the one read here.
            completing: CompletedUpload(uploadID: uploadID, partFiles: Dictionary(uniqueKeysWithValues: chosen.map { ($0.info.partNumber, $0.fileID) }))
        )
    }

    /// Opens every part (one replaced meanwhile is gone: `invalidPart`), then copies them into
    /// a new file at `path` through one 1 MiB buffer, fsyncs it, and returns the total size.
    /// Removes the file on failure. Blocking.
    static func concatenate(_ parts: [(path: String, info: PartInfo)], into path: String, fault: (@Sendable () -> Int32?)?) throws -> Int64 {
        var sources: [(FileDescriptor, Int64)] = []
        for part in parts {
            let fd = Foundation.open(part.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                if errno == ENOENT { throw StoreError.invalidPart(partNumber: part.info.partNumber) }
                throw Posix.failure("open")
            }
            sources.append((FileDescriptor(fd), part.info.size))
        }
        let out = try Posix.open(path, O_WRONLY | O_CREAT | O_EXCL)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        do {
            var total: Int64 = 0
            for (file, size) in sources {
                var offset: Int64 = 0
                while offset < size {
                    let want = Int(Swift.min(Int64(buffer.count), size - offset))
                    let got = try Posix.preadFully(file.fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
                    guard got == want else { throw StoreError.corrupted("part file shorter than its committed size") }
                    if let code = fault?() { throw Posix.failure("write", code) }
                    try Posix.writeAll(out, UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                    offset += Int64(got)
                }
                total += size
            }
            try Posix.fsync(out)
            Foundation.close(out)
            return total
        } catch {
            Foundation.close(out)
            Posix.unlinkIfPresent(path)
            throw error
        }
    }

    /// Aborts every upload initiated before `cutoff` (S3's AbortIncompleteMultipartUpload
    /// lifecycle rule, counted from initiation), deleting its parts' files. Works in batches so
    /// that no transaction holds the writer for long; returns how many uploads it aborted. An
    /// UploadPart or Complete racing with it finds the upload gone (NoSuchUpload) at its commit.
    @discardableResult
    public func abortUploads(initiatedBefore cutoff: Date, batchSize: Int = 500) async throws -> Int {
        var aborted = 0
        while true {
            let (count, files) = try await index.abortUploads(initiatedBefore: cutoff, limit: batchSize)
            await removeFiles(files)
            aborted += count
            if count < batchSize { return aborted }
        }
    }
}
