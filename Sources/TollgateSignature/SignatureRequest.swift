import Foundation

/// A request as the HTTP layer sees it, before any body byte is read. Everything signature
/// verification needs and nothing else: no sockets, no clock (`now` is passed in).
public struct SignatureRequest: Sendable, Equatable {
    /// HTTP method, upper case as sent (`GET`, `PUT`, …).
    public var method: String
    /// The path exactly as sent on the request line, still percent-encoded, without the query.
    public var rawPath: String
    /// The query string exactly as sent, without the leading `?` (empty when there is none).
    public var rawQuery: String {
        get { query.text }
        set { query = RawQuery(newValue) }
    }
    /// The query, split once: detection, verification and routing all read it.
    public private(set) var query: RawQuery
    public var headers: SignatureHeaders
    /// The server's current time, used for clock skew and expiry checks.
    public var now: Date

    public init(method: String, rawPath: String, rawQuery: String = "", headers: SignatureHeaders, now: Date) {
        self.method = method
        self.rawPath = rawPath
        self.query = RawQuery(rawQuery)
        self.headers = headers
        self.now = now
    }
}

/// A query string exactly as sent (without the leading `?`), split once on `&` and on the first
/// `=` of each item, by bytes; empty items (`&&`) are skipped. An item is a pair of byte ranges
/// of the one string, addressed by its index: nothing is copied or decoded until asked for, and
/// looking a parameter up compares bytes. Names and values decode as every query parser S3 and
/// OSS clients meet does: `%XX` escapes, and `+` is a space.
public struct RawQuery: Sendable, Equatable {
    /// The query as sent.
    public let text: String
    private let spans: [Span]

    private struct Span: Sendable {
        let name: Range<Int>
        /// nil when the item has no `=` at all (`?acl`).
        let value: Range<Int>?
        /// The name holds `%` or `+`: it must be decoded before it is compared.
        let nameIsEncoded: Bool
    }

    /// One item, decoded (`items`).
    public struct Item: Sendable, Equatable {
        public let name: String
        /// Empty when absent.
        public let value: String
        /// The item had a `=` (`?acl` has none; `?acl=` has an empty value).
        public let hasValue: Bool
    }

    public init(_ text: String) {
        var text = text
        spans = text.withUTF8(Self.split)  // also makes the text contiguous UTF-8, if it was not
        self.text = text
    }

    private static func split(_ bytes: UnsafeBufferPointer<UInt8>) -> [Span] {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return [] }
        /// The offset of the first `byte` in `start..<end`, if any (memchr: a query is long).
        func find(_ byte: UInt8, _ start: Int, _ end: Int) -> Int? {
            memchr(base + start, Int32(byte), end - start).map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) - base }
        }
        var spans: [Span] = []
        spans.reserveCapacity(8)
        var start = 0
        while start < bytes.count {
            let end = find(UInt8(ascii: "&"), start, bytes.count) ?? bytes.count
            if end > start {
                let equals = find(UInt8(ascii: "="), start, end)
                let name = start..<(equals ?? end)
                spans.append(Span(name: name, value: equals.map { ($0 + 1)..<end },
                                  nameIsEncoded: PercentEncoding.needsDecoding(UnsafeBufferPointer(rebasing: bytes[name]), plusIsSpace: true)))
            }
            start = end + 1
        }
        return spans
    }

    public static func == (lhs: RawQuery, rhs: RawQuery) -> Bool { lhs.text == rhs.text }

    public var count: Int { spans.count }
    public var isEmpty: Bool { spans.isEmpty }
    public var indices: Range<Int> { spans.indices }

    /// Every item, decoded: for the few readers that want them all (tagging headers, tests).
    /// Verification and routing look items up by name instead, which decodes nothing.
    public var items: [Item] {
        indices.map { Item(name: name(at: $0), value: value(at: $0), hasValue: hasValue(at: $0)) }
    }

    /// The item at `index` has a `=` (`?acl` has none; `?acl=` has an empty value).
    public func hasValue(at index: Int) -> Bool { spans[index].value != nil }

    /// The query's bytes, in place: `init` made the text contiguous UTF-8, so the fallback copy
    /// is never taken. (`String.withUTF8` on a copy measured about 800 instructions more per GET.)
    func withUTF8<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return try Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// Calls `body` with each item's name and value as sent (nil: no `=`), in order, over the
    /// query's bytes.
    func forEachRawItem(_ body: (_ bytes: UnsafeBufferPointer<UInt8>, _ name: Range<Int>, _ value: Range<Int>?) -> Void) {
        withUTF8 { bytes in
            for span in spans { body(bytes, span.name, span.value) }
        }
    }

    /// The decoded name of the item at `index`.
    public func name(at index: Int) -> String { decoded(spans[index].name) }

    /// The decoded value of the item at `index`, empty when it has none.
    public func value(at index: Int) -> String { spans[index].value.map(decoded) ?? "" }

    /// Calls `body` with the decoded bytes of the item's name: the query's own bytes when there is
    /// nothing to decode (no copy), else those of `name(at:)`.
    func withNameBytes<Result>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withDecodedBytes(spans[index].name, body)
    }

    /// The same for the item's value (empty when it has none).
    func withValueBytes<Result>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withDecodedBytes(spans[index].value ?? 0..<0, body)
    }

    /// Decoded as `decoded` decodes (invalid UTF-8 replaced), without a string when there is
    /// nothing to decode.
    private func withDecodedBytes<Result>(_ range: Range<Int>, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withUTF8 { bytes in
            let raw = UnsafeBufferPointer(rebasing: bytes[range])
            guard PercentEncoding.needsDecoding(raw, plusIsSpace: true) else { return body(raw) }
            var decoded = PercentEncoding.decodeString(raw, plusIsSpace: true)
            return decoded.withUTF8(body)
        }
    }

    private func decoded(_ range: Range<Int>) -> String {
        withUTF8 { bytes in
            let raw = UnsafeBufferPointer(rebasing: bytes[range])
            return PercentEncoding.needsDecoding(raw, plusIsSpace: true)
                ? PercentEncoding.decodeString(raw, plusIsSpace: true) : String(decoding: raw, as: UTF8.self)
        }
    }

    /// Whether the decoded name of the item at `index` is `expected`, compared as bytes.
    func nameIs(_ index: Int, _ expected: UnsafeBufferPointer<UInt8>) -> Bool {
        let span = spans[index]
        if span.nameIsEncoded { return name(at: index).utf8.elementsEqual(expected) }
        return span.name.count == expected.count && rawName(of: span, startsWith: expected)
    }

    /// Whether a name sent as is starts with `expected` (`memcmp`: no string is made).
    private func rawName(of span: Span, startsWith expected: UnsafeBufferPointer<UInt8>) -> Bool {
        guard span.name.count >= expected.count else { return false }
        return expected.isEmpty || withUTF8 { memcmp($0.baseAddress! + span.name.lowerBound, expected.baseAddress!, expected.count) == 0 }
    }

    /// Whether the decoded name of the item at `index` is `expected`.
    public func nameIs(_ index: Int, _ expected: String) -> Bool {
        var expected = expected
        return expected.withUTF8 { nameIs(index, $0) }
    }

    /// Whether the decoded name of the item at `index` starts with `prefix`.
    public func nameHasPrefix(_ index: Int, _ prefix: String) -> Bool {
        let span = spans[index]
        if span.nameIsEncoded { return name(at: index).hasPrefix(prefix) }
        var prefix = prefix
        return prefix.withUTF8 { rawName(of: span, startsWith: $0) }
    }

    /// The index of the first item whose decoded name is `name` (case-sensitive).
    public func firstIndex(named name: String) -> Int? {
        var name = name
        return name.withUTF8 { expected in indices.first { nameIs($0, expected) } }
    }

    /// The decoded value of the first item whose decoded name is `name` (case-sensitive).
    public func first(named name: String) -> String? {
        firstIndex(named: name).map(value(at:))
    }

    public func contains(named name: String) -> Bool { firstIndex(named: name) != nil }

    /// The decoded values of the first items named `names[i]`, in one pass over the items.
    func firstValues(named names: [[UInt8]]) -> [String?] {
        var values = [String?](repeating: nil, count: names.count)
        for index in indices {
            let slot = names.indices.first { slot in
                values[slot] == nil && names[slot].withUnsafeBufferPointer { nameIs(index, $0) }
            }
            if let slot { values[slot] = value(at: index) }
        }
        return values
    }
}

extension StringProtocol {
    /// Splits on an ASCII byte, keeping empty pieces; by UTF-8 bytes, not by Characters.
    func splitASCII(_ separator: UInt8) -> [SubSequence] {
        var pieces: [SubSequence] = []
        var start = startIndex
        while true {
            guard let end = self[start...].utf8.firstIndex(of: separator) else {
                pieces.append(self[start...])
                return pieces
            }
            pieces.append(self[start..<end])
            start = utf8.index(after: end)
        }
    }
}
