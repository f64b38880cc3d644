import Foundation
import Testing
@testable import TollgateGateway
import TollgatePolicy
import TollgateSignature
import TollgateStore
@testable import TollgateTokenService

let labelCases: [(GatewayOperation?, Dialect, Int, [String])] = [
    (.getObject, .s3, 200, ["getObject", "s3", "200"]),
    (.putObject, .oss, 403, ["putObject", "oss", "403"]),
    (.listObjectsV2, .s3, 404, ["listObjectsV2", "s3", "404"]),
    (nil, .oss, 405, ["unknown", "oss", "405"]),
]

@Test("request labels: operation (unknown when unrouted), dialect, status", arguments: labelCases)
func requestLabels(operation: GatewayOperation?, dialect: Dialect, status: Int, values: [String]) {
    let labels = GatewayMetrics.labels(GatewayMetrics.RequestKey(operation: operation, dialect: dialect, status: status))
    #expect(labels.map { $0.0 } == ["operation", "dialect", "status"])
    #expect(labels.map { $0.1 } == values)
    let duration = GatewayMetrics.labels(GatewayMetrics.OperationKey(operation: operation, dialect: dialect))
    #expect(duration.map { $0.0 } == ["operation", "dialect"])
    #expect(duration.map { $0.1 } == Array(values.prefix(2)))
}

let mismatch = SignatureMismatch(accessKeyId: "AK", stringToSign: "s", signatureProvided: "p", canonicalRequest: "")
let epoch = Date(timeIntervalSince1970: 0)

let s3DenialCases: [(S3AuthError, DenialReason?)] = [
    (.signatureDoesNotMatch(mismatch), .signatureMismatch),
    (.invalidAccessKeyId("AK"), .unknownAccessKey),
    (.requestExpired(expires: epoch, serverTime: epoch, expiresSeconds: 60), .presignedExpired),
    (.requestTimeTooSkewed(requestTime: epoch, serverTime: epoch), .clockSkew),
    (.missingSecurityHeader, .tokenInvalid),
    (.invalidToken, .tokenInvalid),
    (.expiredToken, .tokenExpired),
    (.authorizationHeaderMalformed("x"), .malformedAuth),
    (.accessDenied("There were headers present in the request which were not signed"), .malformedAuth),
    (.internalError, nil),
]

@Test("S3 authentication failures map to a denial reason", arguments: s3DenialCases)
func s3Denials(error: S3AuthError, reason: DenialReason?) {
    #expect(DenialReason(error) == reason)
}

let ossDenialCases: [(OSSAuthError, DenialReason?)] = [
    (.signatureDoesNotMatch(mismatch), .signatureMismatch),
    (.invalidAccessKeyId("AK"), .unknownAccessKey),
    (.requestExpired(expires: epoch, serverTime: epoch), .presignedExpired),
    (.requestTimeTooSkewed(requestTime: epoch, serverTime: epoch), .clockSkew),
    (.invalidSecurityToken, .tokenInvalid),
    (.securityTokenExpired, .tokenExpired),
    (.invalidArgument(message: "m", name: "n", value: "v"), .malformedAuth),
    (.internalError, nil),
]

@Test("OSS authentication failures map to a denial reason", arguments: ossDenialCases)
func ossDenials(error: OSSAuthError, reason: DenialReason?) {
    #expect(DenialReason(error) == reason)
}

@Test func policyOutcomesMapToTheirDenialReason() {
    #expect(DenialReason(PolicyDecision.Outcome.explicitDeny) == .policyExplicitDeny)
    #expect(DenialReason(PolicyDecision.Outcome.implicitDeny) == .policyImplicitDeny)
}

let storeErrorCases: [(StoreError, StoreErrorKind?)] = [
    (.storageFull("ENOSPC"), .storageFull),
    (.io("fsync: Input/output error"), .io),
    (.database("database: disk I/O error"), .database),
    (.corrupted("object file shorter than its committed size"), .corrupted),
    (.noSuchKey(bucket: "b", key: "k"), nil),
    (.noSuchBucket(bucket: "b"), nil),
    (.preconditionFailed, nil),
]

@Test("store failures are counted, the store's refusals are not", arguments: storeErrorCases)
func storeErrorKinds(error: StoreError, kind: StoreErrorKind?) {
    #expect(StoreErrorKind(error) == kind)
}
