import Foundation
import TollgateDates
import TollgateSignature
import TollgateStore
import TollgateXML

/// The backend's XML answers, read with the project's bounded reader, and the XML bodies the
/// store sends.
struct S3XML {
    let document: XMLDocument

    static let limits = XMLLimits(maxBytes: 8 * 1024 * 1024, maxDepth: 8, maxElements: 200_000)

    init(_ bytes: [UInt8]) throws {
        do {
            document = try XMLReader.parse(bytes, limits: Self.limits)
        } catch {
            throw StoreError.io("the backend's XML answer could not be read: \(error)")
        }
    }

    var root: XMLDocument.Element { document.root }

    func text(_ element: XMLDocument.Element, _ name: String) -> String? {
        document.child(of: element, named: name)?.text
    }

    func children(_ element: XMLDocument.Element, _ name: String) -> [XMLDocument.Element] {
        document.children(of: element, named: name)
    }

    func child(_ element: XMLDocument.Element, _ name: String) -> XMLDocument.Element? {
        document.child(of: element, named: name)
    }

    /// A date as S3 writes it in XML (ISO 8601, with or without fractions).
    static func date(_ text: String?) -> Date {
        guard let text, let seconds = WireDate.parseISO8601(text) else { return Date(timeIntervalSince1970: 0) }
        return Date(timeIntervalSince1970: seconds)
    }

    /// A value the backend sent URL-encoded (`encoding-type=url`).
    static func decoded(_ text: String?) -> String {
        PercentEncoding.decode(text ?? "", plusIsSpace: false)
    }

    /// Element text: `&`, `<`, `>` escaped (quotes need not be, and ETags keep theirs).
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\r": out += "&#13;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
