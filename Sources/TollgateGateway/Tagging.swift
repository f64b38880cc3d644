import TollgateSignature

/// Object tags as S3 and OSS limit them: at most 10, keys of 1 to 128 characters, values of at
/// most 256, no key twice; in OSS, keys and values of letters, digits, spaces and `+ - = . _ : /`
/// only (OSS's documented set: `%`, `&`, `@`, `!`, … are refused). Anything else is
/// `400 InvalidTag`, before anything is stored.
enum Tagging {
    static let maxTags = 10

    static func validate(_ pairs: [(key: String, value: String)], dialect: Dialect) throws(GatewayError) -> [String: String] {
        guard pairs.count <= maxTags else { throw invalid("Object tags cannot be greater than 10") }
        var tags: [String: String] = [:]
        for (key, value) in pairs {
            guard (1...128).contains(key.count), dialect == .s3 || isOSSTagText(key) else { throw invalid("The TagKey you have provided is invalid") }
            guard value.count <= 256, dialect == .s3 || isOSSTagText(value) else { throw invalid("The TagValue you have provided is invalid") }
            guard tags.updateValue(value, forKey: key) == nil else { throw invalid("Cannot provide multiple Tags with the same key") }
        }
        return tags
    }

    /// OSS's tag characters: letters and digits (any script's), the space, and `+ - = . _ : /`.
    static func isOSSTagText(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || scalar.properties.numericType == .decimal || ossTagPunctuation.contains(scalar)
        }
    }

    static let ossTagPunctuation: Set<Unicode.Scalar> = [" ", "+", "-", "=", ".", "_", ":", "/"]

    /// The `x-amz-tagging` / `x-oss-tagging` header: a URL query, `k1=v1&k2=v2`, percent-encoded.
    static func parseHeader(_ value: String, dialect: Dialect) throws(GatewayError) -> [String: String] {
        let pairs = RawQuery(value).items.map { (key: $0.name, value: $0.value) }
        return try validate(pairs, dialect: dialect)
    }

    static func invalid(_ message: String) -> GatewayError {
        GatewayError(.badRequest, "InvalidTag", message)
    }
}

import Hummingbird
import TollgateTokenService
import TollgateXML

extension Gateway {
    func getObjectTagging(_ call: Call, bucket: String, key: String) async throws -> Response {
        let tags = try await store.objectTags(bucket: bucket, key: key)
        var xml = document(call, root: "Tagging")
        xml.element("TagSet") { set in
            for (key, value) in tags.sorted(by: { $0.key < $1.key }) {
                set.element("Tag") { tag in
                    tag.element("Key", key)
                    tag.element("Value", value)
                }
            }
        }
        return xmlResponse(xml)
    }

    func putObjectTagging(_ call: Call, bucket: String, key: String) async throws -> Response {
        let request = try Self.parseXML(try await collectXMLBody(call), TaggingRequest.parse)
        try await store.setObjectTags(bucket: bucket, key: key, tags: try Tagging.validate(request.tags, dialect: call.dialect))
        return empty()
    }
}
