/// A minimal XML writer for the gateway's fixed response shapes. Hand-written rather than a
/// Codable XML library: S3 and OSS documents are small, flat, and full of repeated elements
/// without wrappers, which maps poorly onto Codable, and this needs no dependency.
struct XMLWriter {
    private(set) var text = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
    private var open: [String] = []

    mutating func start(_ name: String, namespace: String? = nil) {
        if let namespace {
            text += "<\(name) xmlns=\"\(Self.escape(namespace))\">"
        } else {
            text += "<\(name)>"
        }
        open.append(name)
    }

    var isOpen: Bool { !open.isEmpty }

    mutating func end() {
        text += "</\(open.removeLast())>"
    }

    /// Character data inside the current element.
    mutating func characters(_ value: String) {
        text += Self.escape(value)
    }

    mutating func element(_ name: String, _ value: String) {
        text += "<\(name)>\(Self.escape(value))</\(name)>"
    }

    mutating func element(_ name: String, _ value: String?) {
        if let value { element(name, value) }
    }

    /// An element with attributes (`xmlns:xsi`, `xsi:type`, …), in the order given.
    mutating func element(_ name: String, attributes: KeyValuePairs<String, String>, _ body: (inout XMLWriter) -> Void) {
        text += "<\(name)" + attributes.map { " \($0.key)=\"\(Self.escape($0.value))\"" }.joined() + ">"
        open.append(name)
        body(&self)
        end()
    }

    mutating func element(_ name: String, _ body: (inout XMLWriter) -> Void) {
        start(name)
        body(&self)
        end()
    }

    static func escape(_ string: String) -> String {
        var out = ""
        out.reserveCapacity(string.utf8.count)
        for scalar in string.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out += "&#\(scalar.value);"
            case _ where scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value):
                // Not representable in XML 1.0; clients asked for encoding-type=url get these escaped.
                out += "&#xFFFD;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
