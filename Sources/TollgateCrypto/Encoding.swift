/// Hex and base64 encodings used by the signature and token formats.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out = [UInt8]()
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the lower-case hex of `bytes` to `out`.
    public static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0, to: &out) }
    }

    public static func append<Bytes: Sequence<UInt8>>(_ bytes: Bytes, to out: inout [UInt8]) {
        if bytes.withContiguousStorageIfAvailable({ append($0, to: &out) }) != nil { return }
        Array(bytes).withUnsafeBufferPointer { append($0, to: &out) }
    }

    /// Writes two digits a byte, in place, into room made once.
    public static func append(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: bytes.count * 2))
        out.withUnsafeMutableBufferPointer { out in
            digits.withUnsafeBufferPointer { digits in
                for (index, byte) in bytes.enumerated() {
                    out[start + 2 * index] = digits[Int(byte >> 4)]
                    out[start + 2 * index + 1] = digits[Int(byte & 0x0f)]
                }
            }
        }
    }

    /// Decodes lower- or upper-case hex; nil for odd length or a non-hex character.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        string.utf8.withContiguousStorageIfAvailable(decode) ?? Array(string.utf8).withUnsafeBufferPointer(decode)
    }

    private static func decode(_ utf8: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard utf8.count % 2 == 0 else { return nil }
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: utf8.count / 2) { out, written in
            valid = decode(utf8, into: out)
            written = valid ? out.count : 0
        }
        return valid ? out : nil
    }

    /// Decodes lower- or upper-case hex into `out`, which holds exactly half as many bytes as
    /// `utf8`; false for a non-hex character or another length (`out` is then partly written).
    public static func decode(_ utf8: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        guard utf8.count == 2 * out.count else { return false }
        for index in out.indices {
            guard let high = value(utf8[2 * index]), let low = value(utf8[2 * index + 1]) else { return false }
            out[index] = high << 4 | low
        }
        return true
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

public enum Base64 {
    private static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let url = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Standard base64 with padding (Content-MD5, OSS V1 signatures, checksums).
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        encode(Array(bytes), alphabet: standard, pad: true)
    }

    /// base64url without padding (tokens).
    public static func encodeURL<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        encode(Array(bytes), alphabet: url, pad: false)
    }

    /// Appends the base64url (unpadded) of `bytes` to `out`: tokens are built in one buffer.
    public static func appendURL(_ bytes: [UInt8], to out: inout [UInt8]) {
        let start = out.count
        let count = (bytes.count + 2) / 3 * 4
        out.append(contentsOf: repeatElement(0, count: count))
        let written = out.withUnsafeMutableBufferPointer { buffer in
            write(bytes, alphabet: url, pad: false, into: UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
        out.removeLast(count - written)
    }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        String(unsafeUninitializedCapacity: (bytes.count + 2) / 3 * 4) { out in
            write(bytes, alphabet: alphabet, pad: pad, into: out)
        }
    }

    /// Writes the encoding into `out`, which holds at least `(bytes.count + 2) / 3 * 4` bytes;
    /// returns how many it wrote.
    private static func write(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition(alphabet.count == 64 && out.count >= (bytes.count + 2) / 3 * 4)
        // Unchecked indexing (the precondition covers every index): tokens are encoded on every issue.
        return bytes.withUnsafeBufferPointer { bytes in
            alphabet.withUnsafeBufferPointer { alphabet in
                var o = 0
                var i = 0
                func put(_ value: UInt32) {
                    out.baseAddress.unsafelyUnwrapped[o] = alphabet.baseAddress.unsafelyUnwrapped[Int(value & 63)]
                    o += 1
                }
                func byte(_ index: Int) -> UInt32 { UInt32(bytes.baseAddress.unsafelyUnwrapped[index]) }
                while i + 3 <= bytes.count {
                    let n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2)
                    put(n >> 18); put(n >> 12); put(n >> 6); put(n)
                    i += 3
                }
                let rest = bytes.count - i
                if rest > 0 {
                    let n = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0)
                    put(n >> 18); put(n >> 12)
                    if rest == 2 { put(n >> 6) }
                    if pad {
                        for _ in rest..<3 {
                            out[o] = UInt8(ascii: "=")
                            o += 1
                        }
                    }
                }
                return o
            }
        }
    }

    /// Decodes standard or url-safe base64, padded or not. Strict: any other character,
    /// or impossible trailing bits, gives nil.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        var chars = Array(string.utf8)
        while chars.last == UInt8(ascii: "=") { chars.removeLast() }
        return decode(chars: chars)
    }

    /// Decodes base64url without padding, and nothing else: every byte string has exactly one
    /// accepted encoding, so changing any character of a token changes the bytes it decodes to.
    public static func decodeURLStrict(_ string: some StringProtocol) -> [UInt8]? {
        let chars = Array(string.utf8)
        guard !chars.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "=") }) else {
            return nil
        }
        return decode(chars: chars)
    }

    private static func decode(chars: [UInt8]) -> [UInt8]? {
        if chars.count % 4 == 1 { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let v = value(c) else { return nil }
            buffer = buffer << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, so that each byte string has exactly one encoding.
        if bits > 0, buffer & ((1 << UInt32(bits)) - 1) != 0 { return nil }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"), UInt8(ascii: "-"): 62
        case UInt8(ascii: "/"), UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
