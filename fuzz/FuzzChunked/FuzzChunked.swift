// libFuzzer target: the aws-chunked body decoder, fed in slices of varying sizes, then finish().
// Input: four bytes, then the body.
//   [0] selector: the low bits pick the request the body belongs to (below, verified once at
//       start-up: signed chunks, signed chunks + trailer, unsigned chunks + trailer, with CRC32 or
//       SHA-256 trailers); bit 7 caps chunks at 64 bytes instead of 16 MiB.
//   [1] slice seed: 0 feeds the body in one call; otherwise slices of 1...seed bytes, sizes drawn
//       from a generator seeded with it (deterministic: a crash replays).
//   [2...3] x-amz-decoded-content-length, big endian (the length the request announced).
// Seeds are the test vectors' bodies (python3 fuzz/make_corpus.py), which decode and verify.
import FuzzSupport
import TollgateSignature

/// Requests in FuzzSupport's text form, from Tests/TollgateSignatureTests/GeneratedVectors.swift
/// (`python3 fuzz/make_corpus.py --chunked-bases` prints them).
private let bases: [S3VerifiedRequest] = [
    // signed chunked small
    """
        PUT /photos/chunk/a.txt
        Host: 127.0.0.1:9000
        x-amz-date: 20260314T150926Z
        x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD
        Content-Encoding: aws-chunked
        x-amz-decoded-content-length: 300
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length, Signature=9306c3b96a63a55e9b17ae4d5cb280ee82a3fcb3cf200ec4da6863ef94ff90a6

        """,
    // signed chunked trailer crc32
    """
        PUT /photos/chunk/tr
        Host: 127.0.0.1:9000
        x-amz-date: 20260314T150926Z
        x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
        Content-Encoding: aws-chunked
        x-amz-decoded-content-length: 225
        x-amz-trailer: x-amz-checksum-crc32
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-trailer, Signature=f850a01b38f40942f9610122376a7aa7b084df80e2bb718f6dc6d28df5aeb3d4

        """,
    // signed chunked trailer sha256
    """
        PUT /photos/chunk/tr2
        Host: 127.0.0.1:9000
        x-amz-date: 20260314T150926Z
        x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
        Content-Encoding: aws-chunked
        x-amz-decoded-content-length: 333
        x-amz-trailer: x-amz-checksum-sha256
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/eu-west-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-trailer, Signature=c3c861bc2a183d5dd1926efcb3c02e359b804dd95a61c059b962d015f96b83f4

        """,
    // boto3 put_object https trailer 0
    """
        PUT /photos/plain.txt
        Host: gateway.example.com
        User-Agent: Boto3/1.43.11 md/Botocore#1.43.11 ua/2.1 os/linux#6.18.44-fc-v657 md/arch#x86_64 lang/python#3.11.7 md/pyimpl#CPython m/Z,b,U,e,D,N cfg/retry-mode#legacy Botocore/1.43.11
        Expect: 100-continue
        Transfer-Encoding: chunked
        Content-Encoding: aws-chunked
        X-Amz-Trailer: x-amz-checksum-crc32
        X-Amz-Decoded-Content-Length: 1000
        x-amz-sdk-checksum-algorithm: CRC32
        X-Amz-Date: 20260314T150926Z
        X-Amz-Content-SHA256: STREAMING-UNSIGNED-PAYLOAD-TRAILER
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-sdk-checksum-algorithm;x-amz-trailer, Signature=e307347b8a9df9f1d35259caeeef00e0ed9dc9c710aa09f32dd3f0de0df1aaae
        amz-sdk-invocation-id: b947aa00-b237-4bf9-be02-1791891eb771
        amz-sdk-request: attempt=1

        """,
    // boto3 put_object https sha256 trailer
    """
        PUT /photos/sha.bin
        Host: gateway.example.com
        x-amz-sdk-checksum-algorithm: SHA256
        User-Agent: Boto3/1.43.11 md/Botocore#1.43.11 ua/2.1 os/linux#6.18.44-fc-v657 md/arch#x86_64 lang/python#3.11.7 md/pyimpl#CPython m/Z,b,e,D,Y,N cfg/retry-mode#legacy Botocore/1.43.11
        Expect: 100-continue
        Transfer-Encoding: chunked
        Content-Encoding: aws-chunked
        X-Amz-Trailer: x-amz-checksum-sha256
        X-Amz-Decoded-Content-Length: 11
        X-Amz-Date: 20260314T150926Z
        X-Amz-Content-SHA256: STREAMING-UNSIGNED-PAYLOAD-TRAILER
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-sdk-checksum-algorithm;x-amz-trailer, Signature=246402673c53721c3dcf74621b79b41e44cc6e770e457a6c4565b9847d9da509
        amz-sdk-invocation-id: 5c2966ef-3072-4f80-b2d7-895d06b48d45
        amz-sdk-request: attempt=1

        """,
    // signed chunked empty
    """
        PUT /photos/chunk/empty
        Host: 127.0.0.1:9000
        x-amz-date: 20260314T150926Z
        x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD
        Content-Encoding: aws-chunked
        x-amz-decoded-content-length: 0
        Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260314/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length, Signature=63c82d997463866643ddeaddad01161925c66a4007357d2149e8743c8b07277b

        """,
].map { text in
    // The harness is wrong if a base does not verify: stop the run instead of fuzzing nothing.
    do { return try S3SigV4.verify(FuzzSupport.request(text[...]), lookup: FuzzSupport.lookup) } catch {
        fatalError("FuzzChunked: base request does not verify: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChunked(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 4 else { return 0 }
    var request = bases[Int(data[0] & 0x7F) % bases.count]
    request.decodedContentLength = Int(data[2]) << 8 | Int(data[3])
    guard let decoder = try? request.makeChunkedDecoder(maxChunkSize: data[0] & 0x80 != 0 ? 64 : 16 * 1024 * 1024) else {
        return 0
    }
    let body = UnsafeRawBufferPointer(start: data + 4, count: size - 4)
    let seed = data[1]
    var state = UInt32(seed) &* 0x9E37_79B9 | 1
    var output: [UInt8] = []
    var offset = 0
    do {
        while offset < body.count {
            var slice = body.count - offset
            if seed != 0 {
                // xorshift32: slice sizes 1...seed
                state ^= state << 13; state ^= state >> 17; state ^= state << 5
                slice = min(slice, 1 + Int(state % UInt32(seed)))
            }
            try decoder.decode(UnsafeRawBufferPointer(rebasing: body[offset..<offset + slice]), into: &output)
            offset += slice
        }
        try decoder.finish()
    } catch {
        return 0
    }
    // A body that finished must have produced exactly the announced length.
    precondition(output.count == request.decodedContentLength, "decoded \(output.count) bytes, announced \(request.decodedContentLength ?? -1)")
    return 0
}
