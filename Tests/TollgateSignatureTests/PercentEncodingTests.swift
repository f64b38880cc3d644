import Testing
@testable import TollgateSignature

/// Percent-decoding as S3 and OSS do it: `%XX` to a byte, any other `%` kept, `+` a space only
/// in queries, invalid UTF-8 replaced; the same through every entry point.
@Test(arguments: [
    ("a%20b", false, "a b"), ("a+b", true, "a b"), ("a+b", false, "a+b"), ("%zz", true, "%zz"), ("%4", true, "%4"),
    ("ab%", true, "ab%"), ("%41%42c", false, "ABc"), ("%2f%2F", false, "//"), ("%E2%82%AC", false, "€"),
    ("%FF", false, "\u{FFFD}"), ("x%C3", true, "x\u{FFFD}"), ("", true, ""), ("plain", true, "plain"),
    ("AK%2F20261124%2Fus-east-1%2Fs3%2Faws4_request", true, "AK/20261124/us-east-1/s3/aws4_request"),
])
func percentDecoding(raw: String, plusIsSpace: Bool, expected: String) {
    #expect(PercentEncoding.decode(raw, plusIsSpace: plusIsSpace) == expected)
    #expect(PercentEncoding.decode(raw[...], plusIsSpace: plusIsSpace) == expected)
    #expect(String(decoding: PercentEncoding.decodeBytes(raw, plusIsSpace: plusIsSpace), as: UTF8.self) == expected)
    if plusIsSpace {
        let query = RawQuery("n=" + raw + "&" + raw + "=v")
        #expect(query.items.first?.value == expected)
        #expect(query.value(at: 0) == expected)
        #expect(query.withValueBytes(at: 0) { String(decoding: $0, as: UTF8.self) } == expected)
        #expect(query.name(at: 1) == expected)
        #expect(query.withNameBytes(at: 1) { String(decoding: $0, as: UTF8.self) } == expected)
    }
}

/// The unreserved bytes of RFC 3986, which SigV4 leaves unescaped, and no other byte.
@Test func unreservedBytes() {
    let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~".utf8)
    for byte in UInt8.min...UInt8.max {
        #expect(PercentEncoding.isUnreserved(byte) == unreserved.contains(byte), "\(byte)")
    }
}

/// Percent-encoding as SigV4's UriEncode does it: unreserved bytes stay, `/` only when kept,
/// every other byte of the UTF-8 form `%XX` in upper-case hex; the same for a String and a Substring.
@Test(arguments: [
    ("", false, ""), ("plain-Name_1.2~", false, "plain-Name_1.2~"), ("a b+c", false, "a%20b%2Bc"),
    ("photos/2024/cat.jpg", true, "photos/2024/cat.jpg"), ("photos/2024/cat.jpg", false, "photos%2F2024%2Fcat.jpg"),
    ("€", false, "%E2%82%AC"), ("ключ/🐱", true, "%D0%BA%D0%BB%D1%8E%D1%87/%F0%9F%90%B1"),
    ("%2F&=?#\u{0}\u{7F}", false, "%252F%26%3D%3F%23%00%7F"),
])
func percentEncoding(raw: String, keepSlash: Bool, expected: String) {
    #expect(PercentEncoding.encode(raw, keepSlash: keepSlash) == expected)
    #expect(PercentEncoding.encode(("<" + raw + ">").dropFirst().dropLast(), keepSlash: keepSlash) == expected)
}

/// Every ASCII byte alone, against the rule; and decoding undoes encoding.
@Test func percentEncodingOfEveryASCIIByte() {
    for byte in UInt8(0)...UInt8(127) {
        let string = String(decoding: [byte], as: UTF8.self)
        let expected = PercentEncoding.isUnreserved(byte) ? string : "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
        #expect(PercentEncoding.encode(string) == expected, "\(byte)")
        #expect(PercentEncoding.decode(PercentEncoding.encode(string, keepSlash: true)) == string, "\(byte)")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
