import Hummingbird
import TollgateCrypto
import TollgateDates
import TollgateStore

extension Gateway {
    /// ListBuckets, paged as each dialect pages it: S3's `prefix`, `max-buckets` (1–10000, all
    /// by default) and `continuation-token`; OSS's `prefix`, `marker` and `max-keys` (1–1000,
    /// 100 by default). A tool that lists by prefix and deletes what comes back must get only
    /// the buckets it asked for.
    func listBuckets(_ call: Call) async throws -> Response {
        let query = call.query
        let prefix = query["prefix"] ?? ""
        let after: String?
        let limit: Int
        if call.dialect == .s3 {
            limit = try Self.intParameter(query, "max-buckets", default: 10_000, range: 1...10_000)
            after = try query["continuation-token"].flatMap { token throws(GatewayError) in
                guard !token.isEmpty else { return nil }
                guard let name = Base64.decode(token).flatMap({ String(validating: $0, as: UTF8.self) }) else {
                    throw .invalidArgument("The continuation token provided is incorrect", name: "continuation-token", value: token)
                }
                return name
            }
        } else {
            limit = try Self.intParameter(query, "max-keys", default: 100, range: 1...1000)
            after = query["marker"].flatMap { $0.isEmpty ? nil : $0 }
        }
        let (buckets, truncated) = Self.bucketPage(try await store.listBuckets(), prefix: prefix, after: after, limit: limit)
        var xml = document(call, root: "ListAllMyBucketsResult")
        if call.dialect == .oss {
            if query["prefix"] != nil { xml.element("Prefix", prefix) }
            if query["marker"] != nil { xml.element("Marker", after ?? "") }
            if query["max-keys"] != nil { xml.element("MaxKeys", String(limit)) }
            xml.element("IsTruncated", truncated ? "true" : "false")
            if truncated, let last = buckets.last { xml.element("NextMarker", last.name) }
        }
        owner(&xml)
        xml.element("Buckets") { list in
            for bucket in buckets {
                list.element("Bucket") { entry in
                    entry.element("Name", bucket.name)
                    entry.element("CreationDate", WireDate.iso8601(bucket.creationDate, milliseconds: 0))
                    if call.dialect == .oss {
                        // OSS lists each bucket's location and endpoints; oss2 requires them.
                        let host = call.head.authority ?? "127.0.0.1"
                        entry.element("Location", "oss-" + Self.region)
                        entry.element("ExtranetEndpoint", host)
                        entry.element("IntranetEndpoint", host)
                        entry.element("Region", Self.region)
                        entry.element("StorageClass", "Standard")
                    }
                }
            }
        }
        if call.dialect == .s3 {
            if truncated, let last = buckets.last { xml.element("ContinuationToken", Base64.encode(Array(last.name.utf8))) }
            if query["prefix"] != nil { xml.element("Prefix", prefix) }
        }
        return xmlResponse(xml)
    }

    /// The buckets named with `prefix` after `after`, in name order, at most `limit` of them, and
    /// whether more follow.
    static func bucketPage(_ all: [BucketInfo], prefix: String, after: String?, limit: Int) -> (buckets: [BucketInfo], truncated: Bool) {
        let matching = all.filter { bucket in
            bucket.name.hasPrefix(prefix) && (after.map { $0.utf8.lexicographicallyPrecedes(bucket.name.utf8) } ?? true)
        }.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        return (Array(matching.prefix(limit)), matching.count > limit)
    }

    func createBucket(_ call: Call, bucket: String) async throws -> Response {
        // The body may carry a CreateBucketConfiguration (a location constraint); one region here.
        _ = try await collectXMLBody(call, limit: 64 * 1024)
        do {
            try await store.createBucket(bucket)
        } catch StoreError.bucketExists {
            // Every caller allowed to create buckets owns them all. In us-east-1, the gateway's
            // one region, S3 answers a repeated CreateBucket by its owner with 200 (elsewhere it
            // is 409 BucketAlreadyOwnedByYou); setup code that creates its bucket on every start
            // relies on it.
        }
        return empty(headers: [.location: "/\(bucket)"])
    }

    func headBucket(_ call: Call, bucket: String) async throws -> Response {
        _ = try await store.headBucket(bucket)
        return empty(headers: [.amzBucketRegion: Self.region])
    }

    /// OSS GetBucketInfo: what oss2's and the v2 SDK's `get_bucket_info` read, truthfully for a
    /// single-node gateway (private ACL, locally redundant, versioning never enabled).
    func getBucketInfo(_ call: Call, bucket: String) async throws -> Response {
        let info = try await store.headBucket(bucket)
        let host = call.head.authority ?? "127.0.0.1"
        var xml = document(call, root: "BucketInfo")
        xml.element("Bucket") { entry in
            entry.element("Name", bucket)
            entry.element("CreationDate", WireDate.iso8601(info.creationDate, milliseconds: 3))
            entry.element("Location", "oss-" + Self.region)
            entry.element("Region", Self.region)
            entry.element("ExtranetEndpoint", host)
            entry.element("IntranetEndpoint", host)
            entry.element("StorageClass", "Standard")
            entry.element("DataRedundancyType", "LRS")
            entry.element("AccessMonitor", "Disabled")
            entry.element("TransferAcceleration", "Disabled")
            entry.element("CrossRegionReplication", "Disabled")
            owner(&entry)
            entry.element("AccessControlList") { acl in acl.element("Grant", "private") }
            // A bucket here has no comment; OSS then answers an empty one.
            entry.element("Comment", "")
        }
        return xmlResponse(xml)
    }

    /// The storage classes OSS's GetBucketStat counts besides Standard, in its order: each has
    /// `…Storage` (billed bytes), `…RealStorage` and `…ObjectCount`.
    static let otherStorageClasses = ["InfrequentAccess", "Archive", "ColdArchive", "DeepColdArchive"]

    /// OSS GetBucketStat, with every counter OSS documents: every object is Standard storage
    /// (the other classes' counters are 0), nothing is a live channel or a delete marker.
    func getBucketStat(_ call: Call, bucket: String) async throws -> Response {
        let stats = try await store.bucketStats(bucket)
        var xml = document(call, root: "BucketStat")
        xml.element("Storage", String(stats.storageBytes))
        xml.element("ObjectCount", String(stats.objectCount))
        xml.element("MultipartUploadCount", String(stats.multipartUploadCount))
        xml.element("LiveChannelCount", "0")
        xml.element("LastModifiedTime", String(Int64(stats.lastModified?.timeIntervalSince1970 ?? 0)))
        xml.element("StandardStorage", String(stats.storageBytes))
        xml.element("StandardObjectCount", String(stats.objectCount))
        for storageClass in Self.otherStorageClasses {
            xml.element(storageClass + "Storage", "0")
            xml.element(storageClass + "RealStorage", "0")
            xml.element(storageClass + "ObjectCount", "0")
        }
        xml.element("MultipartPartCount", String(stats.multipartPartCount))
        xml.element("DeleteMarkerCount", "0")
        return xmlResponse(xml)
    }

    /// GetBucketVersioning: versioning was never enabled here, which S3 and OSS answer with an
    /// empty configuration.
    func getBucketVersioning(_ call: Call, bucket: String) async throws -> Response {
        _ = try await store.headBucket(bucket)
        return xmlResponse(document(call, root: "VersioningConfiguration"))
    }

    /// GetBucketAcl / GetObjectAcl: the one owner has full control; nothing is public (OSS
    /// names that `private` for a bucket and `default`, the bucket's, for an object).
    func getAcl(_ call: Call, bucket: String, key: String?) async throws -> Response {
        if let key { _ = try await store.headObject(bucket: bucket, key: key) } else { _ = try await store.headBucket(bucket) }
        var xml = document(call, root: "AccessControlPolicy")
        owner(&xml)
        xml.element("AccessControlList") { list in
            guard call.dialect == .s3 else {
                list.element("Grant", key == nil ? "private" : "default")
                return
            }
            list.element("Grant") { grant in
                grant.element("Grantee", attributes: ["xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance", "xsi:type": "CanonicalUser"]) { grantee in
                    grantee.element("ID", Self.ownerID)
                    grantee.element("DisplayName", Self.ownerID)
                }
                grant.element("Permission", "FULL_CONTROL")
            }
        }
        return xmlResponse(xml)
    }

    func deleteBucket(_ call: Call, bucket: String) async throws -> Response {
        try await store.deleteBucket(bucket)
        return empty(.noContent)
    }

    func getBucketLocation(_ call: Call, bucket: String) async throws -> Response {
        _ = try await store.headBucket(bucket)
        var xml = document(call, root: "LocationConstraint")
        // S3 answers an empty constraint for us-east-1; OSS names its region.
        if call.dialect == .oss { xml.characters("oss-" + Self.region) }
        return xmlResponse(xml)
    }
}
