import NIOCore
import Testing
@testable import TollgateXML

/// `XMLWriter.writeEscaped`, which every S3 and OSS XML answer runs each key, ETag and message through.
@Suite struct XMLWriterTests {
    @Test(arguments: [
        ("", ""),
        ("photos/2024/cat.jpg", "photos/2024/cat.jpg"),
        ("\"0cc175b9c0f1b6a831c399e269772661\"", "&quot;0cc175b9c0f1b6a831c399e269772661&quot;"),
        ("a&b<c>d'e", "a&amp;b&lt;c&gt;d&apos;e"),
        ("tab\there\nline\rend", "tab&#9;here&#10;line&#13;end"),
        ("nul\u{0}bell\u{7}esc\u{1B}", "nul&#xFFFD;bell&#xFFFD;esc&#xFFFD;"),
        ("del\u{7F}", "del\u{7F}"),
        ("café/ключ/鍵/🐱", "café/ключ/鍵/🐱"),
        ("\u{FFFE}x\u{FFFF}", "&#xFFFD;x&#xFFFD;"),
        // Other scalars whose UTF-8 starts with EF pass through: U+FFFD, U+FEFF, U+F8FF.
        ("\u{FFFD}\u{FEFF}\u{F8FF}\u{FFFC}", "\u{FFFD}\u{FEFF}\u{F8FF}\u{FFFC}"),
        ("end\u{FFFF}", "end&#xFFFD;"),
        ("<\u{FFFE}>", "&lt;&#xFFFD;&gt;"),
    ])
    func escapes(input: String, expected: String) {
        #expect(Self.escape(input) == expected)
    }

    /// A whole document: declaration, namespace, attributes, nested and optional elements,
    /// character data, every value escaped, everything closed.
    @Test func document() {
        var xml = XMLWriter()
        xml.start("Error", namespace: "urn:x&y")
        xml.element("Key", "a<b>&\"c'\u{1}")
        xml.element("Missing", nil as String?)
        xml.element("Grantee", attributes: ["xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance", "xsi:type": "Canonical\"User"]) {
            $0.element("ID", "owner")
        }
        xml.element("Outer") { outer in
            outer.start("Text")
            outer.characters("x < y")
        }
        xml.endAll()
        #expect(!xml.isOpen)
        #expect(String(buffer: xml.buffer) == #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
            + #"<Error xmlns="urn:x&amp;y"><Key>a&lt;b&gt;&amp;&quot;c&apos;&#xFFFD;</Key>"#
            + #"<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Canonical&quot;User"><ID>owner</ID></Grantee>"#
            + #"<Outer><Text>x &lt; y</Text></Outer></Error>"#)
    }

    /// The same as escaping scalar by scalar, for strings drawn from every class of input.
    @Test func agreesWithScalarEscaping() {
        let alphabet: [Unicode.Scalar] = ["a", "Z", "0", "/", " ", "&", "<", ">", "\"", "'", "\t", "\n", "\r", "\u{0}", "\u{1F}",
                                          "\u{7F}", "é", "\u{FEFF}", "\u{FFFC}", "\u{FFFD}", "\u{FFFE}", "\u{FFFF}", "🐱", "鍵"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var input = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...12, using: &generator) { input.append(alphabet.randomElement(using: &generator)!) }
            let string = String(input)
            #expect(Self.escape(string) == Self.scalarEscape(string), "\(string.unicodeScalars.map(\.value))")
        }
    }

    /// What `writeEscaped` writes for `string`, as a string.
    static func escape(_ string: String) -> String {
        var buffer = ByteBuffer()
        XMLWriter.writeEscaped(string, into: &buffer)
        return String(buffer: buffer)
    }

    /// The rule, written scalar by scalar.
    static func scalarEscape(_ string: String) -> String {
        var out = ""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out += "&#\(scalar.value);"
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: out += "&#xFFFD;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
