import Testing
import TollgatePolicy

/// A policy with one statement of `effect` over `resources` (`NotResource` when `not`).
private func policy(_ resources: [String], effect: String = "Allow", not: Bool = false, version: String = "1") -> String {
    let list = resources.map { "\"\($0)\"" }.joined(separator: ",")
    return #"{"Version":"\#(version)","Statement":[{"Effect":"\#(effect)","Action":["oss:*","s3:*"],"\#(not ? "NotResource" : "Resource")":[\#(list)]}]}"#
}

@Test("buckets a policy names literally", arguments: [
    ("RAM, bucket and its objects", policy(["acs:oss:*:*:photos", "acs:oss:*:*:photos/*"]), ["photos"]),
    ("RAM with region and account", policy(["acs:oss:cn-hangzhou:1234:logs/2024/*"]), ["logs"]),
    ("IAM dialect", policy(["arn:aws:s3:::media", "arn:aws:s3:::media/*"], version: "2012-10-17"), ["media"]),
    ("both dialects, in order, once each", policy(["arn:aws:s3:::b-two/*", "acs:oss:*:*:a-one/x", "acs:oss:*:*:b-two"]), ["b-two", "a-one"]),
    ("a policy variable in the key only", policy(["acs:oss:*:*:users/${aws:username}/*"]), ["users"]),
    ("a literal key with no wildcard", policy(["arn:aws:s3:::docs/readme.txt"]), ["docs"]),
    ("everything", policy(["*"]), []),
    ("every bucket", policy(["acs:oss:*:*:*"]), []),
    ("a wildcard in the bucket", policy(["acs:oss:*:*:app-*/*", "arn:aws:s3:::logs?/*", "arn:aws:s3:::*/x"]), []),
    ("a policy variable in the bucket", policy(["acs:oss:*:*:${aws:username}/*", "arn:aws:s3:::team-${jwt:team}"]), []),
    ("an empty bucket part", policy(["arn:aws:s3:::/key"]), []),
    ("Deny names what may not be touched", policy(["acs:oss:*:*:secret/*"], effect: "Deny"), []),
    ("NotResource names what is excluded", policy(["acs:oss:*:*:secret/*"], not: true), []),
    ("names kept as written (the store judges them)", policy(["arn:aws:s3:::Upper_Case/*"]), ["Upper_Case"]),
])
func literalBucketNames(_ name: String, _ text: String, _ expected: [String]) throws {
    #expect(try Policy.load(text: text, file: "p.json").literalBucketNames == expected, "\(name)")
}

@Test func placeholdersAreFilledBeforeBucketsAreRead() throws {
    let text = policy(["acs:oss:*:*:$BUCKET_NAME/*", "acs:oss:*:*:$BUCKET_NAME"])
    let loaded = try Policy.load(text: text, file: "p.json", variables: ["BUCKET_NAME": "my-app-bucket"])
    #expect(loaded.literalBucketNames == ["my-app-bucket"])
}

@Test func onlyAllowStatementsOfAMixedPolicyCount() throws {
    let text = #"""
        {"Version":"2012-10-17","Statement":[
          {"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::public/*"},
          {"Effect":"Deny","Action":"s3:*","Resource":"arn:aws:s3:::private/*"},
          {"Effect":"Allow","Action":"s3:PutObject","Resource":["arn:aws:s3:::uploads/${aws:username}/*","arn:aws:s3:::public/x"]}
        ]}
        """#
    #expect(try Policy.load(text: text, file: "p.json").literalBucketNames == ["public", "uploads"])
}
