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
/// part row in the index, made durable when it is uploaded. Completing copies nothing: one
/// transaction replaces the object row with one whose files are the chosen parts' files, in
/// order (`StoredObject.extents`), and deletes the upload's rows. The files of the parts left
/// out are deleted after the commit; if a crash intervenes they are orphans and start-up
/// removes them. A crash before the commit leaves the upload as it was; after it, the object.
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
        // The object is its parts' files, in order: nothing is copied (one part: its file).
        let extents = chosen.map { FileExtent(fileID: $0.fileID, size: $0.info.size) }
        let info = ObjectInfo(
            bucket: bucket, key: key, size: extents.reduce(0) { $0 + $1.size }, etag: etag, lastModified: now(),
            metadata: upload.metadata, isAppendable: false, checksums: checksums
        )
        return try await commit(
            StoredObject(info: info, fileID: extents[0].fileID, extents: extents.count > 1 ? extents : []),
            preconditions: options.preconditions,
            // The upload must still exist and every part used must be the one read here.
            completing: CompletedUpload(uploadID: uploadID, partFiles: Dictionary(uniqueKeysWithValues: chosen.map { ($0.info.partNumber, $0.fileID) })),
            // On failure the parts stay the upload's.
            staged: []
        )
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
