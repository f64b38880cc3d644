// libFuzzer target: the policy parser, then one evaluation of whatever it accepted.
// Input: the text of a policy file (any bytes; invalid UTF-8 is repaired as String(decoding:) does).
import Foundation
import TollgatePolicy

private let variables = ["BUCKET_NAME": "photos", "USER": "alice"]
/// Fixed, so a run is reproducible: conditions on aws:CurrentTime see the same instant every time.
private let now = Date(timeIntervalSince1970: 1_773_500_966)
private let context: PolicyContext = {
    var context = PolicyContext(now: now, sourceIp: "192.0.2.7", secureTransport: false, username: "alice",
                                userid: "alice", userAgent: "aws-sdk-java/1.0", referer: "https://example.com/",
                                jwtClaims: ["sub": "alice"])
    context.setListing(prefix: "alice/", delimiter: "/", maxKeys: 1000)
    return context
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicy(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let policy = try? Policy.load(text: text, file: "fuzz.json", variables: variables) else { return 0 }
    // Compiled patterns and conditions run against a fixed request, one operation of each kind.
    for operation in [GatewayOperation.listBuckets, .listObjects, .getObject, .copyObject] {
        _ = policy.evaluate(operation, bucket: "photos", key: "alice/a b/€.txt", context: context)
    }
    return 0
}
