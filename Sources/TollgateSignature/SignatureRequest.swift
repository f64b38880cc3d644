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
        didSet { rawQueryItems = RawQueryItem.parse(rawQuery) }
    }
    public var headers: SignatureHeaders
    /// The server's current time, used for clock skew and expiry checks.
    public var now: Date

    public init(method: String, rawPath: String, rawQuery: String = "", headers: SignatureHeaders, now: Date) {
        self.method = method
        self.rawPath = rawPath
        self.rawQuery = rawQuery
        self.rawQueryItems = RawQueryItem.parse(rawQuery)
        self.headers = headers
        self.now = now
    }

    /// The query parameters, split on `&` and the first `=`, still encoded, in order; parsed
    /// once, since detection, verification and routing all read them.
    public private(set) var rawQueryItems: [RawQueryItem]
}

/// One `name=value` pair of a query string, still percent-encoded as sent.
public struct RawQueryItem: Sendable, Equatable {
    public let rawName: Substring
    /// nil when the item had no `=` at all (`?acl`).
    public let rawValue: Substring?
    /// Percent-decoded name (`+` is a space, as in every query parser S3 and OSS clients meet);
    /// decoded once, since verification looks names up many times. The raw name itself when
    /// there is nothing to decode, as for every parameter a signer writes.
    public let name: Substring

    public init(rawName: Substring, rawValue: Substring?) {
        self.rawName = rawName
        self.rawValue = rawValue
        self.name = PercentEncoding.needsDecoding(rawName.utf8, plusIsSpace: true)
            ? Substring(PercentEncoding.decode(rawName, plusIsSpace: true)) : rawName
    }
    /// Whether the decoded name starts with `prefix`, compared as bytes.
    public func nameHasPrefix(_ prefix: String) -> Bool {
        var prefix = prefix
        return prefix.withUTF8 { expected in
            name.utf8.withContiguousStorageIfAvailable { $0.count >= expected.count && $0.starts(with: expected) }
                ?? name.utf8.starts(with: expected)
        }
    }

    /// Percent-decoded value, empty when absent.
    public var value: String {
        guard let rawValue else { return "" }
        return rawValue.utf8.withContiguousStorageIfAvailable { bytes in
            PercentEncoding.needsDecoding(bytes, plusIsSpace: true)
                ? PercentEncoding.decodeString(bytes, plusIsSpace: true)
                : String(decoding: bytes, as: UTF8.self)
        } ?? PercentEncoding.decode(rawValue, plusIsSpace: true)
    }

    public static func parse(_ query: String) -> [RawQueryItem] {
        guard !query.isEmpty else { return [] }
        let utf8 = query.utf8
        // Offsets found over the raw bytes, turned into indices as they are found (O(1) for
        // native strings, which every request's query is).
        let items: [RawQueryItem]? = utf8.withContiguousStorageIfAvailable { bytes in
            func index(_ offset: Int) -> String.Index { utf8.index(utf8.startIndex, offsetBy: offset) }
            var items: [RawQueryItem] = []
            items.reserveCapacity(8)
            guard let base = bytes.baseAddress else { return items }
            /// The offset of the first `byte` in `start..<end`, if any (memchr: a query is long).
            func find(_ byte: UInt8, _ start: Int, _ end: Int) -> Int? {
                memchr(base + start, Int32(byte), end - start).map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) - base }
            }
            var start = 0
            while start < bytes.count {
                let end = find(UInt8(ascii: "&"), start, bytes.count) ?? bytes.count
                let equals = find(UInt8(ascii: "="), start, end)
                if end > start {
                    let name = query[index(start)..<index(equals ?? end)]
                    items.append(RawQueryItem(rawName: name, rawValue: equals.map { query[index($0 + 1)..<index(end)] }))
                }
                start = end + 1
            }
            return items
        }
        if let items { return items }
        var native = query
        native.makeContiguousUTF8()
        return parse(native)
    }
}

extension Array where Element == RawQueryItem {
    /// The decoded value of the first item whose decoded name is `name` (case-sensitive).
    func first(named name: String) -> String? {
        first { $0.name == name }?.value
    }

    /// The decoded values of the first items named `names[i]`, in one pass over the items.
    func firstValues(named names: [[UInt8]]) -> [String?] {
        var values = [String?](repeating: nil, count: names.count)
        for index in indices {
            let name = self[index].name.utf8
            let found: Int?? = name.withContiguousStorageIfAvailable { name in
                names.indices.first { slot in
                    values[slot] == nil && names[slot].count == name.count
                        && (name.isEmpty || names[slot].withUnsafeBufferPointer { memcmp($0.baseAddress!, name.baseAddress!, name.count) == 0 })
                }
            }
            let slot = found ?? names.indices.first { values[$0] == nil && names[$0].elementsEqual(name) }
            if let slot { values[slot] = self[index].value }
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
