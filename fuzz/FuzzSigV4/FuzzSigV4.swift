// libFuzzer target: S3 SigV4 verification, Authorization header and presigned query forms.
// Input: a request in FuzzSupport's text form (request line, then `Name: value` headers).
// A request that verifies goes on to the payload checks it selected (header checksums,
// Content-MD5, an aws-chunked decoder finished on an empty body).
import FuzzSupport
import TollgateSignature

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSigV4(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let request = FuzzSupport.request(FuzzSupport.text(data, size)[...])
    guard let verified = try? S3SigV4.verify(request, lookup: FuzzSupport.lookup) else { return 0 }
    if let verifier = try? verified.makePayloadVerifier() {
        if (try? verifier.update(Array("fuzz".utf8))) != nil { _ = try? verifier.finish() }
    }
    if let decoder = try? verified.makeChunkedDecoder(maxChunkSize: 1024) {
        _ = try? decoder.finish()
    }
    return 0
}
