import Hummingbird
import TollgateDates
import TollgateStore

extension Gateway {
    func listBuckets(_ call: Call) async throws -> Response {
        let buckets = try await store.listBuckets()
        var xml = document(call, root: "ListAllMyBucketsResult")
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
        return xmlResponse(xml)
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
        }
        return xmlResponse(xml)
    }

    /// OSS GetBucketStat: every object is Standard storage, nothing is a live channel.
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
