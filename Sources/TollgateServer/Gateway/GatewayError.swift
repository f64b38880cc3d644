import HTTPTypes
import Hummingbird
import NIOCore

/// Which protocol a gateway request speaks; errors and headers answer in the same one.
enum Dialect: Sendable {
    case s3, oss
}

/// A client-visible gateway error. It renders itself as S3 or OSS XML, with Code, Message,
/// Resource, RequestId and HostId, plus any extra elements (StringToSign, ServerTime, …).
struct GatewayError: Error, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    /// Extra elements after Message, in order.
    var details: [(String, String)] = []
    /// Extra response headers (for example `Content-Range` for InvalidRange).
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String, details: [(String, String)] = []) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
    }

    func response(dialect: Dialect, requestID: String, resource: String, isHead: Bool) -> Response {
        var headers = self.headers
        headers[.contentType] = "application/xml"
        switch dialect {
        case .s3: headers[.amzRequestID] = requestID
        case .oss: headers[.ossRequestID] = requestID
        }
        var xml = XMLWriter()
        xml.start("Error")
        xml.element("Code", code)
        xml.element("Message", message)
        for (name, value) in details { xml.element(name, value) }
        if dialect == .s3 { xml.element("Resource", resource) }
        xml.element("RequestId", requestID)
        xml.element("HostId", "tollgate")
        xml.end()
        let body = ByteBuffer(string: xml.text)
        if isHead {
            headers[.contentLength] = "0"
            return Response(status: status, headers: headers)
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    // MARK: The common errors

    static func accessDenied(_ message: String = "Access Denied") -> GatewayError {
        GatewayError(.forbidden, "AccessDenied", message)
    }

    static func notImplemented(_ message: String) -> GatewayError {
        GatewayError(.notImplemented, "NotImplemented", message)
    }

    static func methodNotAllowed(_ method: String) -> GatewayError {
        GatewayError(.methodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.",
                     details: [("Method", method)])
    }

    static func invalidArgument(_ message: String, name: String, value: String) -> GatewayError {
        GatewayError(.badRequest, "InvalidArgument", message, details: [("ArgumentName", name), ("ArgumentValue", value)])
    }

    static func invalidRequest(_ message: String) -> GatewayError {
        GatewayError(.badRequest, "InvalidRequest", message)
    }

    static func malformedXML() -> GatewayError {
        GatewayError(.badRequest, "MalformedXML",
                     "The XML you provided was not well-formed or did not validate against our published schema")
    }

    static func internalError() -> GatewayError {
        GatewayError(.internalServerError, "InternalError", "We encountered an internal error. Please try again.")
    }
}
