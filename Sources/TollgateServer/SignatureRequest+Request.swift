import Foundation
import Hummingbird
import TollgateSignature

extension SignatureRequest {
    /// What a signature covers, from a Hummingbird request: method, raw path and query, and the
    /// headers, with Host (which HTTPTypes keeps as the request's authority) as `host`.
    init(_ request: Request, now: Date) {
        var headers = SignatureHeaders()
        if let authority = request.head.authority { headers.add(name: "host", value: authority) }
        for field in request.headers { headers.add(name: field.name.canonicalName, value: field.value) }
        let (rawPath, rawQuery) = Gateway.split(request.head.path ?? "/")
        self.init(method: request.method.rawValue, rawPath: rawPath, rawQuery: rawQuery, headers: headers, now: now)
    }
}
