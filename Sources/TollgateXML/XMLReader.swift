/// Why a request body is not the XML the gateway accepts. The gateway answers every one of
/// these as `MalformedXML`; the reason is for logs and tests.
public struct XMLReadError: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public let offset: Int

    public var description: String { "\(reason) at byte \(offset)" }
}

/// The limits a request body is read under. Every one of them is checked while reading, so a
/// hostile body costs at most time linear in its size and memory bounded by these numbers.
public struct XMLLimits: Sendable {
    /// Bytes of the whole document.
    public var maxBytes: Int
    /// Nesting depth of elements (the root is depth 1).
    public var maxDepth: Int
    /// Elements in the whole document.
    public var maxElements: Int

    public init(maxBytes: Int, maxDepth: Int, maxElements: Int) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
        self.maxElements = maxElements
    }
}

/// A parsed document as a flat list of elements, in document order; element 0 is the root.
/// Nothing in it is recursive, so neither building nor releasing it grows the stack.
public struct XMLDocument: Sendable {
    public struct Element: Sendable {
        /// The local name (any namespace prefix removed).
        public let name: String
        /// The concatenated character data directly inside the element (entities decoded).
        public internal(set) var text: String
        /// Indices of the child elements, in order.
        public internal(set) var children: [Int]
    }

    public internal(set) var elements: [Element]

    public var root: Element { elements[0] }

    /// The child elements of `element` named `name`.
    public func children(of element: Element, named name: String) -> [Element] {
        element.children.lazy.map { elements[$0] }.filter { $0.name == name }
    }

    /// The first child element of `element` named `name`.
    public func child(of element: Element, named name: String) -> Element? {
        for index in element.children where elements[index].name == name { return elements[index] }
        return nil
    }
}

/// A small, strict XML reader for the request bodies S3 and OSS clients send (Delete,
/// CompleteMultipartUpload). It reads well-formed XML 1.0 documents without a DTD: the XML
/// declaration, comments, processing instructions, CDATA sections, attributes (read and
/// ignored), the five predefined entities and character references. A `<!DOCTYPE` is refused,
/// so no entity can expand. It is an explicit state machine over the bytes with a stack of
/// open element indices: no recursion, and the limits bound every loop and allocation.
public enum XMLReader {
    public static func parse(_ bytes: [UInt8], limits: XMLLimits) throws(XMLReadError) -> XMLDocument {
        guard bytes.count <= limits.maxBytes else { throw XMLReadError(reason: "document too large", offset: limits.maxBytes) }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw XMLReadError(reason: "not UTF-8", offset: 0) }
        var reader = Reader(bytes: bytes, limits: limits)
        return try reader.document()
    }
}

private struct Reader {
    let bytes: [UInt8]
    let limits: XMLLimits
    var index = 0
    var elements: [XMLDocument.Element] = []
    var open: [(element: Int, rawName: ArraySlice<UInt8>)] = []
    /// Character data of the innermost open element, not yet turned into its text.
    var pendingText: [UInt8] = []

    init(bytes: [UInt8], limits: XMLLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    func fail(_ reason: String) -> XMLReadError { XMLReadError(reason: reason, offset: index) }

    var atEnd: Bool { index >= bytes.count }

    func peek(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        return literal.withUTF8Buffer { literal in
            for offset in 0..<count where bytes[index + offset] != literal[offset] { return false }
            return true
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    mutating func skipSpace() {
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
    }

    /// Moves past the next occurrence of `terminator`, or fails with `reason`.
    mutating func skip(past terminator: StaticString, _ reason: String) throws(XMLReadError) -> Range<Int> {
        let start = index
        while index < bytes.count {
            if peek(terminator) {
                let content = start..<index
                index += terminator.utf8CodeUnitCount
                return content
            }
            index += 1
        }
        throw fail(reason)
    }

    mutating func document() throws(XMLReadError) -> XMLDocument {
        if peek("\u{FEFF}") { index += 3 }
        try misc(allowDeclaration: true)
        guard !atEnd, bytes[index] == UInt8(ascii: "<") else { throw fail("no root element") }
        try content()
        guard !elements.isEmpty else { throw fail("no root element") }
        try misc(allowDeclaration: false)
        guard atEnd else { throw fail("content after the root element") }
        return XMLDocument(elements: elements)
    }

    /// Whitespace, comments and processing instructions outside the root element.
    mutating func misc(allowDeclaration: Bool) throws(XMLReadError) {
        var first = allowDeclaration
        while true {
            skipSpace()
            if peek("<?") {
                try processingInstruction(allowDeclaration: first)
            } else if peek("<!--") {
                index += 4
                _ = try skip(past: "-->", "unterminated comment")
            } else if peek("<!") {
                throw fail("DTDs are not accepted")
            } else {
                return
            }
            first = false
        }
    }

    /// `<?target …?>`; the XML declaration `<?xml …?>` only where allowed (first in the document).
    mutating func processingInstruction(allowDeclaration: Bool) throws(XMLReadError) {
        let isDeclaration = peek("<?xml") && index + 5 < bytes.count && (Self.isSpace(bytes[index + 5]) || bytes[index + 5] == UInt8(ascii: "?"))
        if isDeclaration && !allowDeclaration { throw fail("misplaced XML declaration") }
        index += 2
        _ = try skip(past: "?>", "unterminated processing instruction")
    }

    /// The root element and everything inside it, with an explicit stack of open elements.
    mutating func content() throws(XMLReadError) {
        repeat {
            guard !atEnd else { throw fail("unexpected end of document inside an element") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "<") {
                if peek("</") {
                    try endTag()
                } else if peek("<!--") {
                    index += 4
                    _ = try skip(past: "-->", "unterminated comment")
                } else if peek("<![CDATA[") {
                    guard !open.isEmpty else { throw fail("CDATA outside the root element") }
                    index += 9
                    let data = try skip(past: "]]>", "unterminated CDATA section")
                    pendingText.append(contentsOf: bytes[data])
                } else if peek("<?") {
                    try processingInstruction(allowDeclaration: false)
                } else if peek("<!") {
                    throw fail("DTDs are not accepted")
                } else {
                    try startTag()
                }
            } else if byte == UInt8(ascii: "&") {
                try reference()
            } else {
                pendingText.append(byte)
                index += 1
            }
        } while !open.isEmpty
    }

    mutating func name() throws(XMLReadError) -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if Self.isSpace(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "=")
                || byte == UInt8(ascii: "<") || byte == UInt8(ascii: "&") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                break
            }
            index += 1
        }
        guard index > start else { throw fail("missing name") }
        let first = bytes[start]
        if first == UInt8(ascii: "-") || first == UInt8(ascii: ".") || (first >= 0x30 && first <= 0x39) {
            throw fail("invalid name")
        }
        return bytes[start..<index]
    }

    mutating func startTag() throws(XMLReadError) {
        index += 1
        let rawName = try name()
        if !open.isEmpty { flushText() }
        guard elements.count < limits.maxElements else { throw fail("too many elements") }
        guard open.count < limits.maxDepth else { throw fail("elements nested too deeply") }
        var seenAttributes: [ArraySlice<UInt8>] = []
        while true {
            let hadSpace = index < bytes.count && Self.isSpace(bytes[index])
            skipSpace()
            guard !atEnd else { throw fail("unterminated start tag") }
            if peek("/>") || bytes[index] == UInt8(ascii: ">") { break }
            guard hadSpace else { throw fail("attributes must be separated by whitespace") }
            let attribute = try name()
            guard !seenAttributes.contains(attribute) else { throw fail("duplicate attribute") }
            seenAttributes.append(attribute)
            skipSpace()
            guard !atEnd, bytes[index] == UInt8(ascii: "=") else { throw fail("attribute without a value") }
            index += 1
            skipSpace()
            guard !atEnd, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                throw fail("unquoted attribute value")
            }
            let quote = bytes[index]
            index += 1
            while true {
                guard !atEnd else { throw fail("unterminated attribute value") }
                let byte = bytes[index]
                if byte == quote { index += 1; break }
                if byte == UInt8(ascii: "<") { throw fail("'<' in an attribute value") }
                if byte == UInt8(ascii: "&") {
                    var ignored: [UInt8] = []
                    swap(&ignored, &pendingText)
                    defer { swap(&ignored, &pendingText) }
                    try reference()
                } else {
                    index += 1
                }
            }
        }
        let element = elements.count
        elements.append(.init(name: Self.localName(rawName), text: "", children: []))
        if let parent = open.last { elements[parent.element].children.append(element) }
        if peek("/>") {
            index += 2
        } else {
            index += 1
            open.append((element, rawName))
        }
    }

    mutating func endTag() throws(XMLReadError) {
        index += 2
        let rawName = try name()
        skipSpace()
        guard !atEnd, bytes[index] == UInt8(ascii: ">") else { throw fail("unterminated end tag") }
        index += 1
        guard let current = open.last else { throw fail("end tag without a start tag") }
        guard current.rawName.elementsEqual(rawName) else { throw fail("mismatched end tag") }
        flushText()
        open.removeLast()
    }

    /// Appends the pending character data to the innermost open element's text.
    mutating func flushText() {
        guard let current = open.last, !pendingText.isEmpty else { return }
        elements[current.element].text += String(decoding: pendingText, as: UTF8.self)
        pendingText.removeAll(keepingCapacity: true)
    }

    /// `&name;` or `&#N;` / `&#xH;`, decoded into the pending text.
    mutating func reference() throws(XMLReadError) {
        index += 1
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: ";"), index - start < 12 { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: ";") else { throw fail("unterminated entity reference") }
        let body = bytes[start..<index]
        index += 1
        switch String(decoding: body, as: UTF8.self) {
        case "lt": pendingText.append(UInt8(ascii: "<"))
        case "gt": pendingText.append(UInt8(ascii: ">"))
        case "amp": pendingText.append(UInt8(ascii: "&"))
        case "quot": pendingText.append(UInt8(ascii: "\""))
        case "apos": pendingText.append(UInt8(ascii: "'"))
        case let text where text.hasPrefix("#"):
            let digits = text.dropFirst()
            let value = digits.hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
            guard let value, value != 0, let scalar = Unicode.Scalar(value),
                  !digits.hasPrefix("x+"), !digits.hasPrefix("+"), !digits.hasPrefix("x-"), !digits.hasPrefix("-")
            else { throw fail("invalid character reference") }
            pendingText.append(contentsOf: String(Character(scalar)).utf8)
        default:
            throw fail("unknown entity")
        }
    }

    static func localName(_ raw: ArraySlice<UInt8>) -> String {
        let local = raw.lastIndex(of: UInt8(ascii: ":")).map { raw[($0 + 1)...] } ?? raw
        return String(decoding: local, as: UTF8.self)
    }
}
