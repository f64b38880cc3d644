import HTTPTypes
import Hummingbird
import NIOCore
import TollgateCrypto
import TollgateStore
import TollgateTokenService
import TollgateXML

extension Dialect {
    /// An ETag as this dialect writes it, in headers and XML alike: OSS's hex is upper-case
    /// (`"5EB63BBBE01EEED093CB22BB8F5ACDC3"`, `"…-3"`), S3's lower-case, as the store keeps it.
    /// Every ETag an answer carries goes through here; comparisons (`ETag.normalize`) ignore case.
    func etag(_ stored: String) -> String {
        self == .oss ? stored.uppercased() : stored
    }
}

/// An answer whose body, if it has one, is in memory: what the gateway's steps that do not wait
/// make. Hummingbird writes it as a `Response`; `GatewayFastPath` writes it to the connection.
struct Rendered: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: ByteBuffer? = nil

    var response: Response {
        guard let body else { return Response(status: status, headers: headers) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
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
        rendered(dialect: dialect, requestID: requestID, resource: resource, isHead: isHead).response
    }

    func rendered(dialect: Dialect, requestID: String, resource: String, isHead: Bool) -> Rendered {
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
        if isHead {
            headers[.contentLength] = "0"
            // OSS sends a bodiless answer's error document in a header, base64-encoded: the
            // SDKs read the code from it (oss2 then tells NoSuchBucket from NoSuchKey on HEAD).
            if dialect == .oss { headers[.ossErr] = Base64.encode(xml.buffer.readableBytesView) }
            return Rendered(status: status, headers: headers)
        }
        return Rendered(status: status, headers: headers, body: xml.buffer)
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

    /// OSS's answer to a write under `x-oss-forbid-overwrite: true` whose key exists.
    static func fileAlreadyExists() -> GatewayError {
        GatewayError(.conflict, "FileAlreadyExists", "The object you specified already exists and can not be overwritten.")
    }

    static func internalError() -> GatewayError {
        GatewayError(.internalServerError, "InternalError", "We encountered an internal error. Please try again.")
    }
}

extension GatewayError {
    /// The S3 / OSS error for a store error: the store speaks no protocol, so its codes,
    /// statuses and messages live here (both dialects use S3's). Failures of the store itself
    /// are a generic 500 whose detail stays in the logs.
    init(_ error: StoreError) {
        // Statuses by number, as the store rendered them before this mapping moved here.
        switch error {
        case .noSuchBucket: self.init(status: 404, "NoSuchBucket", "The specified bucket does not exist.")
        case .noSuchKey: self.init(status: 404, "NoSuchKey", "The specified key does not exist.")
        case .noSuchUpload: self.init(status: 404, "NoSuchUpload", "The specified multipart upload does not exist.")
        case .bucketNotEmpty: self.init(status: 409, "BucketNotEmpty", "The bucket you tried to delete is not empty.")
        case .bucketExists:
            self.init(status: 409, "BucketAlreadyOwnedByYou",
                      "Your previous request to create the named bucket succeeded and you already own it.")
        case .invalidBucketName: self.init(status: 400, "InvalidBucketName", "The specified bucket is not valid.")
        case .emptyKey: self.init(status: 400, "InvalidArgument", "Object key must not be empty.")
        case .keyTooLong: self.init(status: 400, "KeyTooLongError", "Your key is too long.")
        case .keyContainsNUL: self.init(status: 400, "InvalidArgument", "Object key must not contain NUL.")
        case .invalidContinuationToken: self.init(status: 400, "InvalidArgument", "The continuation token provided is incorrect")
        case .invalidPartNumber:
            self.init(status: 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
        case .noPartsGiven: self.init(status: 400, "InvalidArgument", "You must specify at least one part")
        case .negativePosition: self.init(status: 400, "InvalidArgument", "Position must not be negative")
        case .invalidRange: self.init(status: 416, "InvalidRange", "The requested range is not satisfiable.")
        case .invalidPart:
            self.init(status: 400, "InvalidPart",
                      "One or more of the specified parts could not be found or its entity tag did not match.")
        case .invalidPartOrder: self.init(status: 400, "InvalidPartOrder", "The list of parts was not in ascending order.")
        case .entityTooSmall:
            self.init(status: 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.")
        case .preconditionFailed:
            self.init(status: 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold.")
        case .positionNotEqualToLength: self.init(status: 409, "PositionNotEqualToLength", "Position is not equal to file length.")
        case .objectNotAppendable: self.init(status: 409, "ObjectNotAppendable", "The object is not appendable.")
        case .tooManyUploads(_, let limit):
            self.init(status: 400, "TooManyUploads",
                      "The bucket already has \(limit) multipart uploads in progress; complete or abort some before starting another.")
        case .badDigest: self.init(status: 400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
        case .checksumMismatch(let algorithm):
            self.init(status: 400, "BadDigest", "The \(algorithm.displayName) you specified did not match the calculated checksum.")
        case .checksumAlgorithmMismatch(let expected, let actual):
            self.init(status: 400, "InvalidRequest",
                      "Checksum Type mismatch occurred, expected checksum Type: \(expected.rawValue), actual checksum Type: \(actual.rawValue)")
        case .storageFull:
            // MinIO's code and status (507, which SDKs do not retry), which S3 tools built for MinIO already know.
            self.init(status: 507, "XMinioStorageFull",
                      "The server's storage is full. Delete objects to make room; retrying will not help until space is freed.")
        case .copySourceConditionFailed:
            self.init(status: 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
        case .notSupported(let limit):
            self.init(status: 501, "NotImplemented", "A header or operation you provided implies functionality that is not implemented: \(limit)")
        // A backend that cannot serve now: 503, which every SDK retries, with Retry-After.
        case .backendUnavailable, .backendTimeout:
            self.init(status: 503, "ServiceUnavailable", "The storage backend is unavailable. Please retry.")
            headers[.retryAfter] = String(Self.backendRetryAfterSeconds)
        case .backendThrottled(let seconds):
            self.init(status: 503, "SlowDown", "Please reduce your request rate.")
            headers[.retryAfter] = String(seconds ?? Self.backendRetryAfterSeconds)
        case .io, .database, .corrupted: self.init(status: 500, "InternalError", "We encountered an internal error. Please try again.")
        }
    }

    /// `Retry-After` of a 503 for a backend that cannot serve: about how long the S3 store's
    /// circuit stays open before it tries the backend again.
    static let backendRetryAfterSeconds = 2

    private init(status: Int, _ code: String, _ message: String) {
        self.init(HTTPResponse.Status(code: status), code, message)
    }
}
