import TollgateCORS

/// The XML request bodies the gateway reads. Element names are matched without namespace,
/// since S3 clients send S3's namespace and OSS clients none.
public enum RequestBodies {
    /// The largest Delete or CompleteMultipartUpload body read (S3 allows 1000 keys of up to
    /// 1024 bytes, and 10 000 parts).
    public static let maxBytes = 2 * 1024 * 1024
    /// Deeper than either schema needs (3 levels) with room for the unexpected, far below
    /// anything that strains a stack or an allocator.
    static let limits = XMLLimits(maxBytes: maxBytes, maxDepth: 8, maxElements: 100_000)
}

/// DeleteObjects (S3) / DeleteMultipleObjects (OSS).
public struct DeleteObjectsRequest: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public var key: String
        public var versionId: String?
    }

    /// S3 refuses more keys than this in one request.
    public static let maxObjects = 1000

    public var quiet: Bool
    public var objects: [Entry]

    public var keys: [String] { objects.map(\.key) }

    public static func parse(_ bytes: [UInt8]) throws(XMLReadError) -> DeleteObjectsRequest {
        let document = try XMLReader.parse(bytes, limits: RequestBodies.limits)
        let root = document.root
        guard root.name == "Delete" else { throw XMLReadError(reason: "the root element is not Delete", offset: 0) }
        var objects: [Entry] = []
        for object in document.children(of: root, named: "Object") {
            guard let key = document.child(of: object, named: "Key") else {
                throw XMLReadError(reason: "an Object without a Key", offset: 0)
            }
            objects.append(Entry(key: key.text, versionId: document.child(of: object, named: "VersionId")?.text))
        }
        guard !objects.isEmpty else { throw XMLReadError(reason: "no Object to delete", offset: 0) }
        guard objects.count <= maxObjects else { throw XMLReadError(reason: "more than \(maxObjects) objects", offset: 0) }
        let quiet = document.child(of: root, named: "Quiet").map { $0.text.trimmedXMLSpace().lowercased() == "true" } ?? false
        return DeleteObjectsRequest(quiet: quiet, objects: objects)
    }
}

/// CompleteMultipartUpload: the parts, in the order given.
public struct CompleteMultipartUploadRequest: Equatable, Sendable {
    public struct Part: Equatable, Sendable {
        public var number: Int
        public var etag: String
        /// The part's `<ChecksumCRC32>` (or another algorithm's) element, as sent: the algorithm
        /// as named after `Checksum`, and the base64 value.
        public var checksum: ListedChecksum?

        public init(number: Int, etag: String, checksum: ListedChecksum? = nil) {
            self.number = number
            self.etag = etag
            self.checksum = checksum
        }
    }

    public struct ListedChecksum: Equatable, Sendable {
        public var algorithm: String
        public var value: String
    }

    /// The checksum elements a part may carry.
    static let checksumElements = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]

    public static let maxParts = 10_000

    public var parts: [Part]

    public static func parse(_ bytes: [UInt8]) throws(XMLReadError) -> CompleteMultipartUploadRequest {
        let document = try XMLReader.parse(bytes, limits: RequestBodies.limits)
        let root = document.root
        guard root.name == "CompleteMultipartUpload" else {
            throw XMLReadError(reason: "the root element is not CompleteMultipartUpload", offset: 0)
        }
        var parts: [Part] = []
        for part in document.children(of: root, named: "Part") {
            guard let numberText = document.child(of: part, named: "PartNumber")?.text.trimmedXMLSpace(),
                  numberText.utf8.count <= 5, let number = Int(numberText), number >= 1,
                  let etag = document.child(of: part, named: "ETag")?.text
            else { throw XMLReadError(reason: "a Part without a valid PartNumber and ETag", offset: 0) }
            let checksums = checksumElements.compactMap { name in
                document.child(of: part, named: "Checksum" + name).map { ListedChecksum(algorithm: name, value: $0.text.trimmedXMLSpace()) }
            }
            guard checksums.count <= 1 else { throw XMLReadError(reason: "a Part with more than one checksum", offset: 0) }
            parts.append(Part(number: number, etag: etag.trimmedXMLSpace(), checksum: checksums.first))
        }
        guard !parts.isEmpty else { throw XMLReadError(reason: "no Part", offset: 0) }
        guard parts.count <= maxParts else { throw XMLReadError(reason: "more than \(maxParts) parts", offset: 0) }
        return CompleteMultipartUploadRequest(parts: parts)
    }
}

extension String {
    /// Without leading and trailing XML whitespace (space, tab, CR, LF).
    func trimmedXMLSpace() -> String {
        let utf8 = self.utf8
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}

/// PutObjectTagging: `<Tagging><TagSet><Tag><Key>…</Key><Value>…</Value></Tag>…</TagSet></Tagging>`,
/// in document order (the gateway checks S3's limits on what it returns).
public struct TaggingRequest: Equatable, Sendable {
    public var tags: [(key: String, value: String)]

    public static func == (a: TaggingRequest, b: TaggingRequest) -> Bool {
        a.tags.map(\.key) == b.tags.map(\.key) && a.tags.map(\.value) == b.tags.map(\.value)
    }

    public static func parse(_ bytes: [UInt8]) throws(XMLReadError) -> TaggingRequest {
        let document = try XMLReader.parse(bytes, limits: RequestBodies.limits)
        let root = document.root
        guard root.name == "Tagging" else { throw XMLReadError(reason: "the root element is not Tagging", offset: 0) }
        guard let set = document.child(of: root, named: "TagSet") else { throw XMLReadError(reason: "no TagSet", offset: 0) }
        var tags: [(key: String, value: String)] = []
        for tag in document.children(of: set, named: "Tag") {
            guard let key = document.child(of: tag, named: "Key") else { throw XMLReadError(reason: "a Tag without a Key", offset: 0) }
            tags.append((key.text, document.child(of: tag, named: "Value")?.text ?? ""))
            guard tags.count <= 1000 else { throw XMLReadError(reason: "too many tags", offset: 0) }
        }
        return TaggingRequest(tags: tags)
    }
}

/// PutBucketCors, S3's and OSS's: `<CORSConfiguration>` with one or more `<CORSRule>`, each with
/// an optional `ID`, one or more `AllowedOrigin` and `AllowedMethod`, any number of
/// `AllowedHeader` and `ExposeHeader`, an optional `MaxAgeSeconds`; OSS adds an optional
/// `ResponseVary` after the rules. Anything else in the document is refused, as S3's schema
/// refuses it; values are read without surrounding whitespace. What S3 refuses in a
/// well-formed configuration (methods, wildcards, more than 100 rules) is
/// `CORSConfiguration.refusal`'s to say.
extension CORSConfiguration {
    /// At most 64 KiB (S3's limit), and as many elements as that many bytes can hold.
    static let limits = XMLLimits(maxBytes: maxBytes, maxDepth: 8, maxElements: maxBytes / 4)
    static let ruleElements: Set<String> = ["ID", "AllowedOrigin", "AllowedMethod", "AllowedHeader", "ExposeHeader", "MaxAgeSeconds"]

    public static func parse(_ bytes: [UInt8]) throws(XMLReadError) -> CORSConfiguration {
        let document = try XMLReader.parse(bytes, limits: limits)
        let root = document.root
        guard root.name == "CORSConfiguration" else { throw XMLReadError(reason: "the root element is not CORSConfiguration", offset: 0) }
        var configuration = CORSConfiguration(rules: [])
        for index in root.children {
            let element = document.elements[index]
            switch element.name {
            case "CORSRule": configuration.rules.append(try rule(element, in: document))
            case "ResponseVary" where configuration.responseVary == nil:
                switch element.text.trimmedXMLSpace().lowercased() {
                case "true": configuration.responseVary = true
                case "false": configuration.responseVary = false
                default: throw XMLReadError(reason: "ResponseVary is not true or false", offset: 0)
                }
            default: throw XMLReadError(reason: "unexpected element \(element.name) in CORSConfiguration", offset: 0)
            }
        }
        guard !configuration.rules.isEmpty else { throw XMLReadError(reason: "no CORSRule", offset: 0) }
        return configuration
    }

    static func rule(_ element: XMLDocument.Element, in document: XMLDocument) throws(XMLReadError) -> CORSRule {
        var values: [String: [String]] = [:]
        for index in element.children {
            let child = document.elements[index]
            guard ruleElements.contains(child.name), child.children.isEmpty else {
                throw XMLReadError(reason: "unexpected element \(child.name) in CORSRule", offset: 0)
            }
            let value = child.text.trimmedXMLSpace()
            guard !value.isEmpty else { throw XMLReadError(reason: "an empty \(child.name)", offset: 0) }
            values[child.name, default: []].append(value)
        }
        let origins = values["AllowedOrigin"] ?? [], methods = values["AllowedMethod"] ?? []
        guard !origins.isEmpty, !methods.isEmpty else { throw XMLReadError(reason: "a CORSRule without AllowedOrigin or AllowedMethod", offset: 0) }
        guard (values["ID"]?.count ?? 0) <= 1, (values["MaxAgeSeconds"]?.count ?? 0) <= 1 else {
            throw XMLReadError(reason: "a CORSRule with two IDs or two MaxAgeSeconds", offset: 0)
        }
        var maxAge: Int?
        if let text = values["MaxAgeSeconds"]?.first {
            // A 32-bit integer; S3's schema wants it non-negative, and OSS refuses a negative
            // one as an invalid argument: `CORSConfiguration.negativeMaxAgeSeconds` tells.
            let digits = text.hasPrefix("-") ? text.utf8.dropFirst() : text.utf8[...]
            guard (1...10).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(text),
                  (Int(Int32.min)...Int(Int32.max)).contains(seconds) else {
                throw XMLReadError(reason: "MaxAgeSeconds is not an integer", offset: 0)
            }
            maxAge = seconds
        }
        return CORSRule(id: values["ID"]?.first, allowedOrigins: origins, allowedMethods: methods, allowedHeaders: values["AllowedHeader"] ?? [],
                        exposeHeaders: values["ExposeHeader"] ?? [], maxAgeSeconds: maxAge)
    }
}
