/// Request headers as the HTTP layer received them: case-insensitive names, each name possibly
/// repeated. Order of repeated values is kept (SigV4 joins them with commas in that order).
public struct SignatureHeaders: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// (lowercased name, value as received)
    public private(set) var fields: [(name: String, value: String)]

    public init() { fields = [] }

    public init<S: Sequence>(_ pairs: S) where S.Element == (String, String) {
        fields = pairs.map { (name: Self.lowercased($0.0), value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// Room for `count` fields, added without growing the storage again.
    public mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    public mutating func add(name: String, value: String) {
        fields.append((name: Self.lowercased(name), value: value))
    }

    /// The first value of `name`, if any.
    public subscript(name: String) -> String? {
        let lower = Self.lowercased(name)
        return fields.first { $0.name == lower }?.value
    }

    /// All values of `name`, in the order received.
    public func values(_ name: String) -> [String] {
        var values: [String] = []
        forEachValue(name) { values.append($0) }
        return values
    }

    /// Calls `body` with each value of `name`, in the order received.
    public func forEachValue(_ name: String, _ body: (String) -> Void) {
        let lower = Self.lowercased(name)
        for field in fields where field.name == lower { body(field.value) }
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// One canonical line per name in `names` (`name:value`, repeated values joined by `,`, each
    /// written by `appendValue`, which trims it by its signature's rule), then an empty line: the
    /// header block of an S3 or OSS V4 canonical request.
    func appendCanonicalLines(_ names: [String], to out: inout [UInt8], appendValue: (String, inout [UInt8]) -> Void) {
        for name in names {
            out += name.utf8
            out.append(UInt8(ascii: ":"))
            var first = true
            forEachValue(name) { value in
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                appendValue(value, &out)
            }
            out.append(UInt8(ascii: "\n"))
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// The distinct lowercased names present.
    public var names: Set<String> { Set(fields.map(\.name)) }

    /// Header names are ASCII; most arrive lower-case already (HTTP/2 and HTTPTypes make them
    /// so), and then no new string is made.
    static func lowercased(_ name: String) -> String {
        var copy = name
        let hasUpper = copy.withUTF8 { $0.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") } }
        return hasUpper ? name.lowercased() : name
    }

    public static func == (lhs: SignatureHeaders, rhs: SignatureHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}
