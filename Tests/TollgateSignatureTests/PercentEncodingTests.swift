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
