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

    /// `string` as XML character data or attribute value: markup characters and tab, newline
    /// and carriage return as references; other control characters and U+FFFE/U+FFFF, which XML
    /// 1.0 cannot carry (clients asked for encoding-type=url get these escaped), as U+FFFD.
    /// Works on UTF-8 bytes and returns `string` itself when nothing needs escaping (nearly
    /// always: keys, ETags, codes): appending scalar by scalar cost a refusal a quarter of its CPU.
    static func escape(_ string: String) -> String {
        var string = string
        return string.withUTF8 { bytes in
            guard let first = bytes.firstIndex(where: needsEscape) else { return nil }
            var out = [UInt8](bytes[..<first])
            out.reserveCapacity(bytes.count + 16)
            var index = first
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "&"): out += "&amp;".utf8
                case UInt8(ascii: "<"): out += "&lt;".utf8
                case UInt8(ascii: ">"): out += "&gt;".utf8
                case UInt8(ascii: "\""): out += "&quot;".utf8
                case UInt8(ascii: "'"): out += "&apos;".utf8
                case UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): out += "&#\(byte);".utf8
                case ..<0x20: out += "&#xFFFD;".utf8
                case 0xEF where index + 1 < bytes.count && bytes[index] == 0xBF && bytes[index + 1] >= 0xBE:
                    // U+FFFE or U+FFFF (EF BF BE, EF BF BF).
                    out += "&#xFFFD;".utf8
                    index += 2
                default: out.append(byte)
                }
            }
            return String(decoding: out, as: UTF8.self)
        } ?? string
    }

    /// Whether a byte may start something `escape` changes (0xEF: U+FFFE or U+FFFF, perhaps).
    private static func needsEscape(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "&"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\""), UInt8(ascii: "'"), ..<0x20, 0xEF: true
        default: false
        }
    }
}
