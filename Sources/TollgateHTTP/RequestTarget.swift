/// An origin-form request target (`/path?query`) as it came: split at the first `?`, nothing decoded.
package enum RequestTarget {
    package static func split(_ target: String) -> (path: String, query: String) {
        guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (target, "") }
        return (String(target[..<mark]), String(target[target.utf8.index(after: mark)...]))
    }
}
