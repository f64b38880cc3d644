extension Policy {
    /// The buckets this policy grants access to by name: the bucket part of each `Resource` of an
    /// `Allow` statement (`acs:oss:REGION:ACCOUNT:BUCKET[/KEY]` or `arn:aws:s3:::BUCKET[/KEY]`)
    /// when it holds no wildcard (`*`, `?`) and no policy variable (`${…}`). `$NAME` placeholders
    /// were filled when the policy was loaded, so `acs:oss:*:*:$BUCKET_NAME/*` counts. Deny
    /// statements and `NotResource` name what may not be touched, so their buckets are left out.
    /// Each name once, in the order the policy first names it; names are not checked against
    /// the store's bucket naming rules.
    public var literalBucketNames: [String] {
        var names: [String] = []
        for statement in statements where statement.effect == .allow && !statement.notResource {
            for resource in statement.resources {
                if let name = Self.literalBucket(resource.pattern.tokens), !names.contains(name) { names.append(name) }
            }
        }
        return names
    }

    /// The bucket part of a compiled resource (what follows the ARN prefix): the bytes before
    /// the first `/`, or all of them; nil when a wildcard or variable comes first, or it is empty.
    static func literalBucket(_ tokens: [PatternToken]) -> String? {
        var bucket: [UInt8] = []
        for token in tokens {
            guard case .literal(let bytes) = token else { return nil }
            if let slash = bytes.firstIndex(of: UInt8(ascii: "/")) {
                bucket += bytes[..<slash]
                return bucket.isEmpty ? nil : String(decoding: bucket, as: UTF8.self)
            }
            bucket += bytes
        }
        return bucket.isEmpty ? nil : String(decoding: bucket, as: UTF8.self)
    }
}
