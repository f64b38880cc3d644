import Foundation
import Testing
import TollgateJSON

@Test func jsonWriterKeepsOrderAndEscapes() throws {
    var json = JSONObjectWriter()
    json.add("b", "plain")
    json.add("a", "quote\" backslash\\ newline\n tab\t bell\u{07} 你好")
    json.add("n", Int64(-42))
    json.add("t", true)
    json.add("z", nil as String?)
    let text = json.finish()
    #expect(text.hasPrefix(#"{"b":"plain","a":"quote\" backslash\\ newline\n tab\t bell\u0007 你好","n":-42,"t":true,"z":null}"#))
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    #expect(parsed["a"] as? String == "quote\" backslash\\ newline\n tab\t bell\u{07} 你好")
}

/// The word-at-a-time escape check against a byte-by-byte reference: every special byte at every
/// position of strings both shorter and longer than one 8-byte word, next to bytes just around
/// the special ones that must pass through unchanged.
@Test func jsonWriterEscapesEverySpecialByteAtEveryPosition() throws {
    func reference(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
    let fillers: [Character] = ["a", " ", "!", "#", "[", "]", "\u{7f}", "é", "你"]
    let specials: [Character] = ["\"", "\\", "\n", "\u{00}", "\u{1f}", "\u{01}"]
    for length in [1, 7, 8, 9, 16, 17, 31] {
        for filler in fillers {
            let plain = String(repeating: filler, count: length)
            var json = JSONObjectWriter()
            json.add("k", plain)
            #expect(json.finish() == "{\"k\":\(reference(plain))}")
            for position in 0..<length {
                for special in specials {
                    var characters = Array(plain)
                    characters[position] = special
                    let value = String(characters)
                    var json = JSONObjectWriter()
                    json.add("k", value)
                    #expect(json.finish() == "{\"k\":\(reference(value))}", "\(length) \(filler) \(position)")
                }
            }
        }
    }
}

@Test("JSON integers", arguments: [Int64(0), 7, -7, 10, 1_795_000_900, Int64.max, Int64.min])
func jsonWriterIntegers(value: Int64) {
    var json = JSONObjectWriter()
    json.add("n", value)
    #expect(json.finish() == "{\"n\":\(value)}")
}

/// Names from our source are written as they are; a name from input (a token claim's) is
/// escaped like a value.
@Test func jsonWriterEscapesNamesFromInput() throws {
    var json = JSONObjectWriter()
    json.add("plain", "1")
    json.add(member: "quote\" newline\n", "2")
    let text = json.finish()
    #expect(text == #"{"plain":"1","quote\" newline\n":"2"}"#)
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
    #expect(parsed == ["plain": "1", "quote\" newline\n": "2"])
}
