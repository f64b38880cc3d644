import NIOCore

/// A minimal XML writer for the gateway's fixed response shapes. Hand-written rather than a
/// Codable XML library: S3 and OSS documents are small, flat, and full of repeated elements
/// without wrappers, which maps poorly onto Codable, and this needs no dependency. It writes
/// UTF-8 straight into the response body's buffer: a 1000-key listing appended to a String
/// piece by piece spent a fifth of its CPU growing it.
package struct XMLWriter {
    package private(set) var buffer: ByteBuffer
    private var open: [String] = []

    package init() {
        buffer = ByteBuffer()
        buffer.writeString(#"<?xml version="1.0" encoding="UTF-8"?>"# + "\n")
    }

    package mutating func start(_ name: String, namespace: String? = nil) {
        if let namespace { writeStartTag(name, attributes: ["xmlns": namespace]) } else { writeStartTag(name) }
        open.append(name)
    }

    package var isOpen: Bool { !open.isEmpty }

    package mutating func end() {
        writeEndTag(open.removeLast())
    }

    /// Closes every element still open.
    package mutating func endAll() {
        while isOpen { end() }
    }

    /// Character data inside the current element.
    package mutating func characters(_ value: String) {
        Self.writeEscaped(value, into: &buffer)
    }

    package mutating func element(_ name: String, _ value: String) {
        writeStartTag(name)
        Self.writeEscaped(value, into: &buffer)
        writeEndTag(name)
    }

    package mutating func element(_ name: String, _ value: String?) {
        if let value { element(name, value) }
    }

    /// An element with attributes (`xmlns:xsi`, `xsi:type`, …), in the order given.
    package mutating func element(_ name: String, attributes: KeyValuePairs<String, String>, _ body: (inout XMLWriter) -> Void) {
        writeStartTag(name, attributes: attributes)
        open.append(name)
        body(&self)
        end()
    }

    package mutating func element(_ name: String, _ body: (inout XMLWriter) -> Void) {
        start(name)
        body(&self)
        end()
    }

    /// `<name attribute="value" …>`, the values escaped.
    private mutating func writeStartTag(_ name: String, attributes: KeyValuePairs<String, String> = [:]) {
        buffer.writeStaticString("<")
        buffer.writeString(name)
        for (attribute, value) in attributes {
            buffer.writeStaticString(" ")
            buffer.writeString(attribute)
            buffer.writeStaticString("=\"")
            Self.writeEscaped(value, into: &buffer)
            buffer.writeStaticString("\"")
        }
        buffer.writeStaticString(">")
    }

    private mutating func writeEndTag(_ name: String) {
        buffer.writeStaticString("</")
        buffer.writeString(name)
        buffer.writeStaticString(">")
    }

    /// Writes `string` as XML character data or attribute value: markup characters and tab,
    /// newline and carriage return as references; other control characters and U+FFFE/U+FFFF,
    /// which XML 1.0 cannot carry (clients asked for encoding-type=url get these escaped), as
    /// U+FFFD. Works on UTF-8 bytes, copying the runs between escapes whole; nearly every
    /// string (keys, codes) is one run.
    package static func writeEscaped(_ string: String, into buffer: inout ByteBuffer) {
        var string = string
        string.withUTF8 { bytes in
            var run = 0
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                guard needsEscape(byte) else {
                    index += 1
                    continue
                }
                var skip = 1
                let replacement: StaticString
                switch byte {
                case UInt8(ascii: "&"): replacement = "&amp;"
                case UInt8(ascii: "<"): replacement = "&lt;"
                case UInt8(ascii: ">"): replacement = "&gt;"
                case UInt8(ascii: "\""): replacement = "&quot;"
                case UInt8(ascii: "'"): replacement = "&apos;"
                case UInt8(ascii: "\t"): replacement = "&#9;"
                case UInt8(ascii: "\n"): replacement = "&#10;"
                case UInt8(ascii: "\r"): replacement = "&#13;"
                case ..<0x20: replacement = "&#xFFFD;"
                default:
                    // 0xEF: U+FFFE or U+FFFF (EF BF BE, EF BF BF) are replaced; other scalars stay.
                    guard index + 2 < bytes.count, bytes[index + 1] == 0xBF, bytes[index + 2] >= 0xBE else {
                        index += 1
                        continue
                    }
                    replacement = "&#xFFFD;"
                    skip = 3
                }
                buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[run..<index])))
                buffer.writeStaticString(replacement)
                index += skip
                run = index
            }
            buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[run...])))
        }
    }

    /// Whether a byte may start something `writeEscaped` changes (0xEF: U+FFFE or U+FFFF, perhaps).
    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "&"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\""), UInt8(ascii: "'"), ..<0x20, 0xEF: true
        default: false
        }
    }
}
