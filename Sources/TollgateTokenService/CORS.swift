import HTTPTypes
import Hummingbird
import TollgateCORS
import TollgateConfig
import TollgateIdentity

/// CORS on the token endpoint: an `Origin` from `CORS.TokenEndpoint` gets
/// `Access-Control-Allow-Origin` on every answer (errors too, so a web app can read why it was
/// refused), and its preflight `OPTIONS` is answered here. Other origins get no CORS headers,
/// so browsers keep their answers from the page.
package struct TokenCORSMiddleware: RouterMiddleware {
    package typealias Context = TollgateRequestContext
    let live: LiveConfig

    package init(live: LiveConfig) {
        self.live = live
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], live.current.config.cors.tokenEndpointAdmits(origin) else {
            return try await next(request, context)
        }
        if request.method == .options {
            var headers: HTTPFields = [
                .accessControlAllowOrigin: origin,
                .accessControlAllowMethods: "GET, POST",
                .accessControlMaxAge: "600",
                .vary: "Origin",
            ]
            let requested = CORSSettings.requestedHeaders(request.headers[.accessControlRequestHeaders])
            if !requested.isEmpty { headers[.accessControlAllowHeaders] = requested.joined(separator: ", ") }
            return Response(status: .noContent, headers: headers)
        }
        var response = try await next(request, context)
        response.headers[.accessControlAllowOrigin] = origin
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
        return response
    }
}
