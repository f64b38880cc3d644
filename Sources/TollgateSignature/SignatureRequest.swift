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
                ? String(decoding: PercentEncoding.decodeBytes(bytes, plusIsSpace: true), as: UTF8.self)
                : String(decoding: bytes, as: UTF8.self)
        } ?? PercentEncoding.decode(rawValue, plusIsSpace: true)
    }

    public static func parse(_ query: String) -> [RawQueryItem] {
        guard !query.isEmpty else { return [] }
        // Offsets found over the raw bytes, then turned into indices (O(1) for native strings).
        var bounds: [(start: Int, equals: Int?, end: Int)] = []
        var copy = query
        copy.withUTF8 { bytes in
            var start = 0
            var equals: Int?
            for offset in 0...bytes.count {
                let byte = offset < bytes.count ? bytes[offset] : UInt8(ascii: "&")
                if byte == UInt8(ascii: "&") {
                    if offset > start { bounds.append((start, equals, offset)) }
                    start = offset + 1
                    equals = nil
                } else if byte == UInt8(ascii: "="), equals == nil {
                    equals = offset
                }
            }
        }
        let utf8 = copy.utf8
        func index(_ offset: Int) -> String.Index { utf8.index(utf8.startIndex, offsetBy: offset) }
        return bounds.map { bound in
            guard let equals = bound.equals else { return RawQueryItem(rawName: copy[index(bound.start)..<index(bound.end)], rawValue: nil) }
            return RawQueryItem(rawName: copy[index(bound.start)..<index(equals)], rawValue: copy[index(equals + 1)..<index(bound.end)])
        }
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
