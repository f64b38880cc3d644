// PolicyBench: the cost of one authorisation decision on a realistic 20-statement policy
// with conditions (StringLike, IpAddress, Bool, DateLessThan, policy variables).
// Run with bench/policy.sh (release build). Goal: median ≤ 5 µs per decision.
import Foundation
import TollgatePolicy

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@inline(__always)
func nowNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func statement(_ i: Int) -> String {
    switch i % 5 {
    case 0:
        return #"{"Sid":"Home\#(i)","Effect":"Allow","Action":["oss:GetObject","oss:PutObject"],"Resource":"acs:oss:*:*:bucket\#(i)/${aws:username}/*","Condition":{"IpAddress":{"acs:SourceIp":["10.0.0.0/8","192.168.0.0/16"]},"Bool":{"acs:SecureTransport":"true"}}}"#
    case 1:
        return #"{"Sid":"List\#(i)","Effect":"Allow","Action":"oss:ListObjects","Resource":"acs:oss:*:*:bucket\#(i)","Condition":{"StringLike":{"oss:Prefix":["${aws:username}/*"]}}}"#
    case 2:
        return #"{"Sid":"Shared\#(i)","Effect":"Allow","Action":"s3:Get*","Resource":"arn:aws:s3:::shared/*/public/*","Condition":{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"},"StringLike":{"aws:UserAgent":["aliyun-sdk-*","aws-sdk-*"]}}}"#
    case 3:
        return #"{"Sid":"Tenant\#(i)","Effect":"Allow","Action":"oss:*","Resource":"acs:oss:*:*:tenant-${jwt:tenant}/*","Condition":{"StringEquals":{"jwt:aud":"mobile"},"NotIpAddress":{"aws:SourceIp":"203.0.113.0/24"}}}"#
    default:
        return #"{"Sid":"NoDelete\#(i)","Effect":"Deny","Action":["oss:DeleteObject","oss:DeleteBucket"],"Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}"#
    }
}

let text = #"{"Version":"1","Statement":["# + (0..<20).map(statement).joined(separator: ",\n") + "]}"
let policy: Policy
do {
    policy = try Policy.load(text: text, file: "bench.json")
} catch {
    print(error)
    exit(2)
}

var context = PolicyContext(
    now: Date(timeIntervalSince1970: 1_790_000_000),
    sourceIp: "10.1.2.3",
    secureTransport: true,
    username: "alice",
    userAgent: "aws-sdk-swift/1.0",
    jwtClaims: ["tenant": "acme", "aud": "mobile"]
)
context.set("oss:Prefix", "alice/")

// Every statement whose action matches is evaluated in full (the request is allowed, so no
// Deny ends the scan early): variables resolved, CIDRs, dates, globs.
let requests: [(GatewayOperation, String, String?)] = [
    (.getObject, "tenant-acme", "alice/photos/2026/a.jpg"),
    (.getObject, "shared", "x/public/y.txt"),
    (.putObject, "bucket10", "alice/inbox/b.bin"),
]
for (op, bucket, key) in requests {
    let d = policy.evaluate(op, bucket: bucket, key: key, context: context)
    guard d.isAllowed else {
        print("unexpected decision for \(op) \(bucket)/\(key ?? ""): \(d)")
        exit(1)
    }
}

let iterations = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 300_000 : 300_000
var samples = [UInt64](repeating: 0, count: iterations)
var allowed = 0
// Warm-up.
for i in 0..<10_000 {
    let (op, bucket, key) = requests[i % requests.count]
    if policy.evaluate(op, bucket: bucket, key: key, context: context).isAllowed { allowed += 1 }
}
let start = nowNanoseconds()
for i in 0..<iterations {
    let (op, bucket, key) = requests[i % requests.count]
    let t0 = nowNanoseconds()
    let d = policy.evaluate(op, bucket: bucket, key: key, context: context)
    let t1 = nowNanoseconds()
    if d.isAllowed { allowed += 1 }
    samples[i] = t1 - t0
}
let total = nowNanoseconds() - start
samples.sort()
let median = samples[iterations / 2]
let p99 = samples[iterations * 99 / 100]
print("policy: 20 statements; \(iterations) decisions (\(allowed) allowed incl. warm-up)")
print("median \(median) ns/decision, p99 \(p99) ns, mean \(total / UInt64(iterations)) ns (incl. timer)")
print(median <= 5_000 ? "goal met: median ≤ 5 µs" : "goal missed: median > 5 µs")
