import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The two XML request bodies the gateway reads, parsed with Foundation's XMLParser (a
/// well-kept streaming parser already in the toolchain). Element names are matched without
/// namespace, since S3 clients send S3's namespace and OSS clients none.
struct DeleteRequest: Equatable {
    var quiet: Bool
    var keys: [String]

    static func parse(_ data: Data) throws(GatewayError) -> DeleteRequest {
        let root = try XMLTree.parse(data)
        guard root.name == "Delete" else { throw .malformedXML() }
        let keys = root.children.filter { $0.name == "Object" }.compactMap { $0.child("Key")?.text }
        guard !keys.isEmpty else { throw .malformedXML() }
        return DeleteRequest(quiet: root.child("Quiet")?.text.lowercased() == "true", keys: keys)
    }
}

struct CompleteRequest: Equatable {
    var parts: [(number: Int, etag: String)]

    static func == (lhs: CompleteRequest, rhs: CompleteRequest) -> Bool {
        lhs.parts.map(\.number) == rhs.parts.map(\.number) && lhs.parts.map(\.etag) == rhs.parts.map(\.etag)
    }

    static func parse(_ data: Data) throws(GatewayError) -> CompleteRequest {
        let root = try XMLTree.parse(data)
        guard root.name == "CompleteMultipartUpload" else { throw .malformedXML() }
        var parts: [(Int, String)] = []
        for part in root.children where part.name == "Part" {
            guard let number = part.child("PartNumber").flatMap({ Int($0.text.trimmingCharacters(in: .whitespacesAndNewlines)) }),
                  let etag = part.child("ETag")?.text
            else { throw .malformedXML() }
            parts.append((number, etag.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        guard !parts.isEmpty else {
            throw GatewayError(.badRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
        }
        return CompleteRequest(parts: parts)
    }
}

/// A small element tree built from XMLParser events.
final class XMLTree {
    let name: String
    private(set) var children: [XMLTree] = []
    private(set) var text = ""
    private weak var parent: XMLTree?

    init(name: String, parent: XMLTree?) {
        self.name = name
        self.parent = parent
    }

    func child(_ name: String) -> XMLTree? { children.first { $0.name == name } }

    static func parse(_ data: Data) throws(GatewayError) -> XMLTree {
        let builder = Builder()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else { throw .malformedXML() }
        return root
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var root: XMLTree?
        var current: XMLTree?

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            let node = XMLTree(name: elementName, parent: current)
            if let current { current.children.append(node) } else if root == nil { root = node }
            current = node
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            current = current?.parent
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            current?.text += string
        }
    }
}
