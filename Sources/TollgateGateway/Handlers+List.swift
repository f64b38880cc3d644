import Hummingbird
import TollgateDates
import TollgateSignature
import TollgateStore

extension Gateway {
    /// ListObjects (v1) and ListObjectsV2: one store query, two renderings.
    func listObjects(_ call: Call, bucket: String, version: Int) async throws -> Response {
        let query = call.query
        let maxKeys = try Self.intParameter(query, "max-keys", default: 1000, range: 0...Int.max)
        let encodeURL = try Self.encodesURL(query)
        let prefix = query["prefix"] ?? ""
        let delimiter = query["delimiter"].flatMap { $0.isEmpty ? nil : $0 }
        let listQuery = version == 1
            ? ListQuery(prefix: prefix, delimiter: delimiter, startAfter: query["marker"].flatMap { $0.isEmpty ? nil : $0 }, maxKeys: min(maxKeys, 1000))
            : ListQuery(prefix: prefix, delimiter: delimiter, startAfter: query["start-after"].flatMap { $0.isEmpty ? nil : $0 },
                        continuationToken: query["continuation-token"].flatMap { $0.isEmpty ? nil : $0 }, maxKeys: min(maxKeys, 1000))
        let result = try await store.listObjects(bucket: bucket, query: listQuery)
        func encoded(_ value: String) -> String { encodeURL ? Self.urlEncodeForListing(value) : value }

        var xml = document(call, root: "ListBucketResult")
        xml.element("Name", bucket)
        // S3's ListObjects (v1) leaves its Prefix as given, which botocore does not decode
        // (it decodes v1's Marker, NextMarker, Delimiter, keys and common prefixes); OSS's v1
        // encodes it, as both encode v2's.
        xml.element("Prefix", version == 1 && call.dialect == .s3 ? prefix : encoded(prefix))
        if version == 1 {
            xml.element("Marker", encoded(query["marker"] ?? ""))
            if result.isTruncated, let next = result.nextMarker { xml.element("NextMarker", encoded(next)) }
        } else {
            if let startAfter = query["start-after"] { xml.element("StartAfter", encoded(startAfter)) }
            if let token = query["continuation-token"], !token.isEmpty { xml.element("ContinuationToken", token) }
            if result.isTruncated, let next = result.nextContinuationToken { xml.element("NextContinuationToken", next) }
            xml.element("KeyCount", String(result.keyCount))
        }
        xml.element("MaxKeys", String(maxKeys))
        if let delimiter { xml.element("Delimiter", encoded(delimiter)) }
        if encodeURL { xml.element("EncodingType", "url") }
        xml.element("IsTruncated", result.isTruncated ? "true" : "false")
        let fetchOwner = version == 1 || query["fetch-owner"] == "true"
        for object in result.objects {
            xml.element("Contents") { entry in
                entry.element("Key", encoded(object.key))
                entry.element("LastModified", WireDate.iso8601(object.lastModified, milliseconds: 0))
                entry.element("ETag", call.dialect.etag(object.etag))
                if call.dialect == .oss { entry.element("Type", object.etag.contains("-") ? "Multipart" : "Normal") }
                entry.element("Size", String(object.size))
                entry.element("StorageClass", "STANDARD")
                if fetchOwner { owner(&entry) }
            }
        }
        for commonPrefix in result.commonPrefixes {
            xml.element("CommonPrefixes") { $0.element("Prefix", encoded(commonPrefix)) }
        }
        return xmlResponse(xml)
    }

    /// ListObjectVersions, on a store that keeps one version per key: every object is its only
    /// and latest version, whose id is `null`, and there are no delete markers. Pages by
    /// key-marker; `null` is the only version-id-marker there can be.
    func listObjectVersions(_ call: Call, bucket: String) async throws -> Response {
        let query = call.query
        let maxKeys = try Self.intParameter(query, "max-keys", default: 1000, range: 0...Int.max)
        let encodeURL = try Self.encodesURL(query)
        let prefix = query["prefix"] ?? ""
        let delimiter = query["delimiter"].flatMap { $0.isEmpty ? nil : $0 }
        let keyMarker = query["key-marker"].flatMap { $0.isEmpty ? nil : $0 }
        let versionMarker = query["version-id-marker"].flatMap { $0.isEmpty ? nil : $0 }
        if let versionMarker {
            guard keyMarker != nil else {
                throw GatewayError.invalidArgument("A version-id marker cannot be specified without a key marker.",
                                                   name: "version-id-marker", value: versionMarker)
            }
            guard versionMarker == "null" else {
                throw GatewayError.invalidArgument("Invalid version id specified", name: "version-id-marker", value: versionMarker)
            }
        }
        let result = try await store.listObjects(
            bucket: bucket, query: ListQuery(prefix: prefix, delimiter: delimiter, startAfter: keyMarker, maxKeys: min(maxKeys, 1000))
        )
        func encoded(_ value: String) -> String { encodeURL ? Self.urlEncodeForListing(value) : value }

        var xml = document(call, root: "ListVersionsResult")
        xml.element("Name", bucket)
        xml.element("Prefix", encoded(prefix))
        xml.element("KeyMarker", encoded(keyMarker ?? ""))
        xml.element("VersionIdMarker", versionMarker ?? "")
        if result.isTruncated, let next = result.nextMarker {
            xml.element("NextKeyMarker", encoded(next))
            xml.element("NextVersionIdMarker", "null")
        }
        xml.element("MaxKeys", String(maxKeys))
        // oss2 requires a Delimiter element, empty when none was given.
        if delimiter != nil || call.dialect == .oss { xml.element("Delimiter", encoded(delimiter ?? "")) }
        if encodeURL { xml.element("EncodingType", "url") }
        xml.element("IsTruncated", result.isTruncated ? "true" : "false")
        for object in result.objects {
            xml.element("Version") { entry in
                entry.element("Key", encoded(object.key))
                entry.element("VersionId", "null")
                entry.element("IsLatest", "true")
                entry.element("LastModified", WireDate.iso8601(object.lastModified, milliseconds: 0))
                entry.element("ETag", call.dialect.etag(object.etag))
                if call.dialect == .oss { entry.element("Type", object.etag.contains("-") ? "Multipart" : "Normal") }
                entry.element("Size", String(object.size))
                entry.element("StorageClass", "STANDARD")
                owner(&entry)
            }
        }
        for commonPrefix in result.commonPrefixes {
            xml.element("CommonPrefixes") { $0.element("Prefix", encoded(commonPrefix)) }
        }
        return xmlResponse(xml)
    }

    /// `encoding-type`: absent, or `url`.
    static func encodesURL(_ query: [String: String]) throws(GatewayError) -> Bool {
        switch query["encoding-type"] {
        case nil: false
        case "url": true
        case let other?: throw .invalidArgument("Invalid Encoding Method specified in Request", name: "encoding-type", value: other)
        }
    }

    /// S3's `encoding-type=url`: percent-encoding of everything but unreserved characters and
    /// `/`; a space is `%20`, which clients decoding with unquote_plus read as a space too.
    static func urlEncodeForListing(_ value: String) -> String {
        PercentEncoding.encode(value, keepSlash: true)
    }

    static func intParameter(_ query: [String: String], _ name: String, default value: Int, range: ClosedRange<Int>) throws(GatewayError) -> Int {
        guard let raw = query[name], !raw.isEmpty else { return value }
        guard let number = Int(raw), range.contains(number) else {
            throw .invalidArgument("Provided \(name) not an integer or within integer range", name: name, value: raw)
        }
        return number
    }
}
