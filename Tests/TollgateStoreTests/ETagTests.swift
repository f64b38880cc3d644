import Testing
import TollgateStore

/// How ETags given by clients and backends are compared: quotes, a weak `W/`, spaces and tabs
/// around the value and the case of ASCII letters do not count; every other byte does.
@Suite struct ETagTests {
    static let normalizing: [(given: String, normalized: String)] = [
        ("\"0123abcd\"", "0123abcd"),
        ("0123ABCD", "0123abcd"),
        ("\"0123ABCD-2\"", "0123abcd-2"),
        ("W/\"abc\"", "abc"),
        (" \t\"abc\"\t ", "abc"),
        ("\"\"", ""),
        ("\"", "\""),
        ("", ""),
        ("w/\"abc\"", "w/\"abc\""),
        ("\"abc", "\"abc"),
        ("\"ÄBC\"", "Äbc"),
        ("\u{00A0}\"abc\"", "\u{00A0}\"abc\""),
    ]

    @Test("normalize", arguments: normalizing.indices)
    func normalize(_ index: Int) {
        let (given, normalized) = Self.normalizing[index]
        #expect(ETag.normalize(given) == normalized, "\(given)")
    }

    static let matching: [(header: String, etag: String, matches: Bool)] = [
        ("\"abc\"", "\"abc\"", true),
        ("\"ABC\"", "\"abc\"", true),
        ("W/\"abc\"", "\"abc\"", true),
        ("*", "\"abc\"", true),
        (" * ", "\"abc\"", true),
        ("\"x\", \"abc\"", "\"abc\"", true),
        ("\"x\",\t\"ABC\" ", "\"abc\"", true),
        ("\"x\", \"y\"", "\"abc\"", false),
        ("\"*\"", "\"abc\"", false),
        ("", "\"abc\"", false),
        ("\"abcd\"", "\"abc\"", false),
    ]

    @Test("matches", arguments: matching.indices)
    func matches(_ index: Int) {
        let (header, etag, matches) = Self.matching[index]
        #expect(ETag.matches(header, etag) == matches, "\(header) against \(etag)")
    }
}
