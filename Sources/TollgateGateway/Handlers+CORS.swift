import Hummingbird
import TollgateCORS
import TollgateXML

/// A bucket's own CORS rules (`?cors`), the same in both dialects: the body's element names
/// are S3's, which OSS shares (OSS adds `ResponseVary`). Once stored they decide the bucket's
/// preflights and CORS headers in place of config.json's default (see `Gateway.respond`).
extension Gateway {
    static let noSuchCORSConfiguration = GatewayError(.notFound, "NoSuchCORSConfiguration", "The CORS configuration does not exist")

    func getBucketCors(_ call: Call, bucket: String) async throws -> Response {
        _ = try await store.headBucket(bucket)
        guard let configuration = try await store.bucketCORS(bucket) else { throw Self.noSuchCORSConfiguration }
        var xml = document(call, root: "CORSConfiguration")
        for rule in configuration.rules {
            xml.element("CORSRule") { entry in
                if let id = rule.id { entry.element("ID", id) }
                for origin in rule.allowedOrigins { entry.element("AllowedOrigin", origin) }
                for method in rule.allowedMethods { entry.element("AllowedMethod", method) }
                for header in rule.allowedHeaders { entry.element("AllowedHeader", header) }
                for header in rule.exposeHeaders { entry.element("ExposeHeader", header) }
                if let maxAge = rule.maxAgeSeconds { entry.element("MaxAgeSeconds", String(maxAge)) }
            }
        }
        // OSS always states it (false unless set).
        if call.dialect == .oss { xml.element("ResponseVary", configuration.responseVary == true ? "true" : "false") }
        return xmlResponse(xml)
    }

    /// Replaces the rules whole. Not S3's schema: `MalformedXML`; what S3 refuses in a
    /// well-formed configuration: `InvalidRequest`; nothing is stored either way. A negative
    /// `MaxAgeSeconds` is outside S3's schema (`MalformedXML`) and OSS's `InvalidArgument`.
    func putBucketCors(_ call: Call, bucket: String) async throws -> Response {
        let configuration = try Self.parseXML(try await collectXMLBody(call, limit: CORSConfiguration.maxBytes), CORSConfiguration.parse)
        if let negative = configuration.negativeMaxAgeSeconds {
            guard call.dialect == .oss else { throw GatewayError.malformedXML() }
            throw GatewayError.invalidArgument("MaxAgeSeconds must not be negative.", name: "MaxAgeSeconds", value: String(negative))
        }
        if let refusal = configuration.refusal { throw GatewayError.invalidRequest(refusal) }
        try await store.setBucketCORS(bucket, configuration)
        return empty()
    }

    func deleteBucketCors(_ call: Call, bucket: String) async throws -> Response {
        try await store.deleteBucketCORS(bucket)
        return empty(.noContent)
    }
}
