import Foundation
import TollgateCrypto
import TollgateSignature

// Signature verification and body checksums on their own, as the gateway runs them for every
// request and every body byte. Release build, one core:
//   swift build -c release --product SigBench && .build/release/SigBench [s3|oss|crc|md5] [ITERATIONS]
// With no mode it runs all four and prints the OSS V4 / S3 SigV4 ratio. For instruction counts
// that do not drift with the machine's load:
//   valgrind --tool=callgrind .build/release/SigBench s3 20000
let arguments = CommandLine.arguments
let mode = arguments.count > 1 ? arguments[1] : "all"
let iterations = arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000
let secret = "bench-root-secret-0123456789abcdefghijklmn"
let now = Date(timeIntervalSince1970: 1_795_340_000) // within both URLs' validity

// A presigned GET of the same object from each client: boto3 (S3 SigV4) and oss2 (OSS V4).
let s3Target = "/bench/get-4k/obj-00000?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=TGBENCHROOT%2F20261122%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261122T073418Z&X-Amz-Expires=21600&X-Amz-SignedHeaders=host&X-Amz-Signature=94c7694b0de628eb9f49888c1a4848796131e10bea9a43bb7fe43a31ff462b40"
let ossTarget = "/bench/get-4k%2Fobj-00000?x-oss-date=20261122T073418Z&x-oss-expires=21600&x-oss-signature-version=OSS4-HMAC-SHA256&x-oss-credential=TGBENCHROOT%2F20261122%2Fus-east-1%2Foss%2Faliyun_v4_request&x-oss-signature=68dde99d3f99e5b92c3a6532d96ee88b9a4981885216ecbb6e46011a041cbf39"

func request(_ target: String) -> SignatureRequest {
    let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
    var headers = SignatureHeaders()
    headers.add(name: "host", value: "127.0.0.1:19000")
    headers.add(name: "user-agent", value: "wrk")
    return SignatureRequest(
        method: "GET", rawPath: String(target[..<mark]),
        rawQuery: mark == target.endIndex ? "" : String(target[target.utf8.index(after: mark)...]), headers: headers, now: now)
}

/// Nanoseconds per parse + verify of one presigned GET.
func verifyBench(_ name: String, _ verify: (SignatureRequest) throws -> String) -> UInt64 {
    let target = name == "S3 SigV4" ? s3Target : ossTarget
    var verified = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<iterations {
        do {
            if try verify(request(target)) == "TGBENCHROOT" { verified += 1 }
        } catch {
            print("\(name) verification failed: \(error)")
            exit(1)
        }
    }
    let perRequest = (DispatchTime.now().uptimeNanoseconds - start) / UInt64(iterations)
    print("\(name) presigned GET: \(verified) of \(iterations) verified, \(perRequest) ns per parse + verify")
    return perRequest
}

func s3() -> UInt64 {
    verifyBench("S3 SigV4") { request in
        try S3SigV4.verify(request) { (_) throws(CredentialLookupError) in secret }.identity.accessKeyId
    }
}

func oss() -> UInt64 {
    verifyBench("OSS V4") { request in
        try OSSSignature.verify(request, bucket: "bench", key: "get-4k/obj-00000") { (_) throws(CredentialLookupError) in secret }.accessKeyId
    }
}

/// MB/s of each CRC over 64 MiB, fed in 64 KiB buffers as bodies arrive.
func crc() {
    let buffer = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let total = 64 << 20
    for algorithm in [ChecksumAlgorithm.crc32, .crc32c, .crc64nvme] {
        let checksum = try! StreamingChecksum(algorithm)
        let start = DispatchTime.now().uptimeNanoseconds
        buffer.withUnsafeBytes { bytes in
            for _ in 0..<(total / bytes.count) { try! checksum.update(bytes) }
        }
        let digest = try! checksum.finalize()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print("\(algorithm.displayName): \(Int(Double(total) / 1e6 / seconds)) MB/s (\(digest.map { String($0, radix: 16) }.joined()))")
    }
}

/// The process's CPU time so far (user + system), in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// MD5 of 1 to 16 concurrent streams (a thread each, 32 MiB in 256 KiB updates, as uploads
/// arrive): MB hashed per second of CPU, each stream hashing alone with libcrypto against the
/// streams sharing `MD5Lanes`, and the ratio.
func md5() {
    let buffer = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let perStream = 32 << 20
    func run(_ streams: Int, shared: Bool) -> Double {
        let cpu = cpuSeconds()
        let finished = DispatchGroup()
        for _ in 0..<streams {
            finished.enter()
            Thread {
                let md5 = LaneMD5(lanes: shared ? MD5Lanes.shared : nil)
                buffer.withUnsafeBytes { bytes in
                    for _ in 0..<(perStream / bytes.count) { md5.update([bytes]) }
                }
                _ = md5.finalize()
                finished.leave()
            }.start()
        }
        finished.wait()
        return Double(streams * perStream) / 1e6 / (cpuSeconds() - cpu)
    }
    guard MD5Lanes.shared != nil else { return print("MD5: no multi-buffer kernel on this CPU (each stream hashes alone)") }
    for streams in [1, 2, 4, 8, 16] {
        let alone = run(streams, shared: false)
        let lanes = run(streams, shared: true)
        print("MD5, \(streams) streams: alone \(Int(alone)) MB per CPU-second, in lanes \(Int(lanes)) (\(String(format: "%.2f", lanes / alone)) ×)")
    }
}

switch mode {
case "s3": _ = s3()
case "oss": _ = oss()
case "crc": crc()
case "md5": md5()
default:
    let s3Time = s3()
    let ossTime = oss()
    print("OSS V4 / S3 SigV4: \(String(format: "%.2f", Double(ossTime) / Double(s3Time)))")
    crc()
    md5()
}
