/// The seed's permissions as policy statements, so that the policy engine decides every
/// Storage API request (and `policy simulate` can answer for it):
///
/// | permission | actions | resources |
/// |---|---|---|
/// | ReadOnly | s3:GetObject, s3:ListBucket | shared: `prefix*`; isolated: `prefix${user}/*` |
/// | ReadWrite | + s3:PutObject, s3:DeleteObject | the same |
/// | ReadOnlyAllUsers | s3:GetObject, s3:ListBucket | `prefix*` (every user's space) |
/// | ReadWriteAllUsers | + s3:PutObject, s3:DeleteObject | `prefix*` |
///
/// Listing is `s3:ListBucket` on the bucket with `s3:prefix` the listed space's prefix.
public enum CollectionPolicy {
    public static let readActions = ["s3:GetObject"]
    public static let writeActions = ["s3:PutObject", "s3:DeleteObject"]

    /// The policy document (JSON text) that `role` (nil: an anonymous caller) holds over
    /// `collections`; nil when it holds nothing.
    public static func document(role: String?, collections: [MobileCollection]) -> String? {
        var statements: [String] = []
        for collection in collections.sorted(by: { $0.name < $1.name }) {
            for permission in CollectionPermission.allCases where collection.permissions(of: role).contains(permission) {
                statements += self.statements(collection, permission)
            }
        }
        guard !statements.isEmpty else { return nil }
        return #"{"Version":"2012-10-17","Statement":["# + statements.joined(separator: ",") + "]}"
    }

    static func statements(_ collection: MobileCollection, _ permission: CollectionPermission) -> [String] {
        let own = collection.isolated && !permission.allUsers
        let space = own ? collection.prefix + "${user}/" : collection.prefix
        let actions = readActions + (permission.writes ? writeActions : [])
        let sid = quoted(collection.name + "." + permission.rawValue)
        let objects = #"{"Sid":\#(sid),"Effect":"Allow","Action":[\#(actions.map(quoted).joined(separator: ","))],"Resource":\#(quoted("arn:aws:s3:::" + collection.bucket + "/" + space + "*"))}"#
        let listing = #"{"Sid":\#(quoted(collection.name + "." + permission.rawValue + ".List")),"Effect":"Allow","Action":"s3:ListBucket","Resource":\#(quoted("arn:aws:s3:::" + collection.bucket)),"Condition":{"StringLike":{"s3:prefix":\#(quoted(space + "*"))}}}"#
        return [objects, listing]
    }

    /// A JSON string literal.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
