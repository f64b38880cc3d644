import Hummingbird
import NIOCore
import TollgateDates
import TollgateJSON
import TollgateToken

/// The token endpoint's JSON, written by hand so that the field order is exactly the one the
/// OSS mobile SDKs' sample server prints (`JSONEncoder` does not promise an order).
public enum TokenJSON {
    public static func credentials(_ issued: IssuedCredentials, expiration: String? = nil) -> String {
        var json = JSONObjectWriter(capacity: 512) // the token alone is about 250 bytes
        json.add("StatusCode", 200)
        json.add("AccessKeyId", issued.accessKeyId)
        json.add("AccessKeySecret", issued.accessKeySecret)
        json.add("SecurityToken", issued.securityToken)
        json.add("Expiration", expiration ?? WireDate.iso8601(issued.claims.expiresAt))
        return json.finish()
    }

    static func error(status: Int, code: String, message: String) -> String {
        var json = JSONObjectWriter()
        json.add("StatusCode", Int64(status))
        json.add("ErrorCode", code)
        json.add("ErrorMessage", message)
        return json.finish()
    }

    public static func response(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// The same two headers on every answer, built once (copying them only shares their storage).
    private static let headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]
}

/// An error of the token endpoint, rendered in the endpoint's JSON shape with HTTP status N.
public struct TokenEndpointError: HTTPResponseError {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// Extra response headers (`Retry-After` on a 429).
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = TokenJSON.response(status, TokenJSON.error(status: status.code, code: code, message: message))
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// Turns every error of the token listener into the JSON shape: nothing escapes as a bare 500.
package struct TokenErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as TokenEndpointError {
            throw error
        } catch let error as HTTPError where error.status == .notFound {
            throw TokenEndpointError(.notFound, code: "NotFound", message: "No such endpoint: \(request.uri.path)")
        } catch let error as HTTPError where error.status == .methodNotAllowed {
            throw TokenEndpointError(.methodNotAllowed, code: "MethodNotAllowed", message: "Use GET or POST")
        } catch {
            context.logger.error("token endpoint failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            throw TokenEndpointError(.internalServerError, code: "InternalError", message: "The server could not issue a token")
        }
    }
}
