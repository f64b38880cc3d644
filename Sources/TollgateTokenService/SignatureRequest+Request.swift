import Foundation
import HTTPTypes
import TollgateHTTP
import TollgateSignature

package extension SignatureRequest {
    /// What a signature covers, from a request head: method, raw path and query, and the
    /// headers, with Host (which HTTPTypes keeps as the request's authority) as `host`.
    init(_ head: HTTPRequest, now: Date) {
        var headers = SignatureHeaders()
        headers.reserveCapacity(head.headerFields.count + 1)
        if let authority = head.authority { headers.add(name: "host", value: authority) }
        for field in head.headerFields { headers.add(name: field.name.canonicalName, value: field.value) }
        let (rawPath, rawQuery) = RequestTarget.split(head.path ?? "/")
        self.init(method: head.method.rawValue, rawPath: rawPath, rawQuery: rawQuery, headers: headers, now: now)
    }
}
