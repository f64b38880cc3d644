// libFuzzer target: the request XML reader (TollgateXML) and the two bodies the gateway reads
// with it, DeleteObjects and CompleteMultipartUpload.
// Input: a request body. Every input goes through all three parsers. A document the reader
// accepts must respect its limits and be a tree in document order (every element but the root
// the child of exactly one element before it); whatever the body parsers accept must respect
// theirs.
import TollgateXML

/// Small limits, so that the fuzzer reaches them with small inputs.
private let limits = XMLLimits(maxBytes: 64 * 1024, maxDepth: 8, maxElements: 512)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzXML(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let document = try? XMLReader.parse(bytes, limits: limits) {
        check(document)
    }
    if let delete = try? DeleteObjectsRequest.parse(bytes) {
        precondition(!delete.objects.isEmpty && delete.objects.count <= DeleteObjectsRequest.maxObjects)
    }
    if let complete = try? CompleteMultipartUploadRequest.parse(bytes) {
        precondition(!complete.parts.isEmpty && complete.parts.count <= CompleteMultipartUploadRequest.maxParts)
        precondition(complete.parts.allSatisfy { $0.number >= 1 && $0.number <= 99_999 })
    }
    return 0
}

private func check(_ document: XMLDocument) {
    let elements = document.elements
    precondition(!elements.isEmpty && elements.count <= limits.maxElements, "element count \(elements.count)")
    var depth = [Int](repeating: 0, count: elements.count)
    depth[0] = 1
    var parents = 0
    for (index, element) in elements.enumerated() {
        precondition(depth[index] > 0, "element \(index) is nobody's child")
        precondition(depth[index] <= limits.maxDepth, "depth \(depth[index])")
        for child in element.children {
            precondition(child > index && child < elements.count, "child \(child) of \(index)")
            precondition(depth[child] == 0, "element \(child) has two parents")
            depth[child] = depth[index] + 1
            parents += 1
        }
        if let first = element.children.first {
            precondition(document.child(of: element, named: elements[first].name) != nil)
        }
    }
    precondition(parents == elements.count - 1)
}
