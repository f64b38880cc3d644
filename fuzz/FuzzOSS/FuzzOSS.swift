// libFuzzer target: OSS request verification (V1 HMAC-SHA1, V2 HMAC-SHA256 and V4, header and presigned forms).
// Input: a first line naming the resource, `BUCKET/KEY` as the gateway's router decoded it
// (empty: no bucket; no slash: a bucket without key; `BUCKET/`: key ""), then a request in
// FuzzSupport's text form.
import FuzzSupport
import TollgateSignature

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOSS(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = FuzzSupport.text(data, size)
    let resource: Substring
    let rest: Substring
    if let newline = text.firstIndex(of: "\n") {
        resource = text[..<newline]
        rest = text[text.index(after: newline)...]
    } else {
        resource = text[...]
        rest = ""
    }
    var bucket: String?
    var key: String?
    if let slash = resource.firstIndex(of: "/") {
        bucket = String(resource[..<slash])
        key = String(resource[resource.index(after: slash)...])
    } else if !resource.isEmpty {
        bucket = String(resource)
    }
    let request = FuzzSupport.request(rest)
    _ = try? OSSSignature.verify(request, bucket: bucket, key: key, lookup: FuzzSupport.lookup)
    return 0
}
