import Foundation
import TollgateSignature

// Signature verification on its own: parse and verify one presigned S3 GET, as the gateway does
// for every request, many times over. Release build, one core:
//   swift build -c release --product SigBench && .build/release/SigBench [TARGET] [ITERATIONS]
// For instruction counts that do not drift with the machine's load:
//   valgrind --tool=callgrind .build/release/SigBench "" 20000
let arguments = CommandLine.arguments
let target = arguments.count > 1 && !arguments[1].isEmpty ? arguments[1] : "/bench/get-4k/obj-00000?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=TGBENCHROOT%2F20261122%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261122T073418Z&X-Amz-Expires=21600&X-Amz-SignedHeaders=host&X-Amz-Signature=94c7694b0de628eb9f49888c1a4848796131e10bea9a43bb7fe43a31ff462b40"
let iterations = arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000
let secret = "bench-root-secret-0123456789abcdefghijklmn"
let now = Date(timeIntervalSince1970: 1_795_340_000) // within the default URL's validity
var verified = 0
let start = DispatchTime.now().uptimeNanoseconds
for _ in 0..<iterations {
    let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
    var headers = SignatureHeaders()
    headers.add(name: "host", value: "127.0.0.1:19000")
    headers.add(name: "user-agent", value: "wrk")
    let request = SignatureRequest(
        method: "GET", rawPath: String(target[..<mark]),
        rawQuery: mark == target.endIndex ? "" : String(target[target.utf8.index(after: mark)...]), headers: headers, now: now)
    do {
        let result = try S3SigV4.verify(request) { (_) throws(CredentialLookupError) in secret }
        if result.identity.accessKeyId == "TGBENCHROOT" { verified += 1 }
    } catch {
        print("verification failed: \(error)")
        exit(1)
    }
}
let elapsed = DispatchTime.now().uptimeNanoseconds - start
print("\(verified) of \(iterations) verified: \(elapsed / UInt64(iterations)) ns per parse + verify")
