import Foundation
import Testing
@testable import TollgatePolicy

struct SimCase: CustomTestStringConvertible, Sendable {
    var policy: String
    var action: String
    var resource: String
    var context: [String]
    /// nil: an input error is expected.
    var outcome: PolicyDecision.Outcome?
    var testDescription: String { "\(policy) \(action) \(resource) \(context)" }
}

let simCases: [SimCase] = [
    SimCase(policy: "all_policy.txt", action: "oss:GetObject", resource: "acs:oss:*:*:b/k", context: [], outcome: .allow),
    SimCase(policy: "all_policy.txt", action: "s3:GetObject", resource: "arn:aws:s3:::b/k", context: [], outcome: .allow),
    SimCase(policy: "all_policy.txt", action: "oss:ListBuckets", resource: "*", context: [], outcome: .allow),
    SimCase(policy: "all_policy.txt", action: "OSS:getobject", resource: "acs:oss:*:*:b/k", context: [], outcome: .allow),
    SimCase(policy: "all_policy.txt", action: "oss:PutObjectAcl", resource: "acs:oss:*:*:b/k", context: [], outcome: nil),
    SimCase(policy: "all_policy.txt", action: "s3:GetObjekt", resource: "arn:aws:s3:::b/k", context: [], outcome: nil),
    // s3:ListBucket also names OSS's GetBucketInfo and GetBucketStat, which the RAM policy does
    // not grant: every S3 request the action authorises is allowed all the same.
    SimCase(policy: "bucket_read_policy.txt", action: "s3:ListBucket", resource: "arn:aws:s3:::photos", context: [], outcome: .allow),
    SimCase(policy: "bucket_read_policy.txt", action: "oss:GetBucketStat", resource: "acs:oss:*:*:photos", context: [], outcome: .implicitDeny),
    SimCase(policy: "bucket_read_policy.txt", action: "oss:ListObjects", resource: "acs:oss:*:*:photos", context: [], outcome: .allow),
    SimCase(policy: "bucket_read_policy.txt", action: "s3:PutObject", resource: "arn:aws:s3:::photos/k", context: [], outcome: .implicitDeny),
    SimCase(policy: "user_isolated_policy.txt", action: "oss:ListObjects", resource: "acs:oss:*:*:photos",
            context: ["aws:username=alice", "oss:Prefix=alice/"], outcome: .allow),
    SimCase(policy: "user_isolated_policy.txt", action: "oss:ListObjects", resource: "acs:oss:*:*:photos",
            context: ["aws:username=alice", "oss:Prefix=bob/"], outcome: .implicitDeny),
    SimCase(policy: "user_isolated_policy.txt", action: "s3:PutObject", resource: "arn:aws:s3:::photos/alice/a",
            context: ["user=alice"], outcome: .allow),
    SimCase(policy: "all_policy.txt", action: "ec2:RunInstances", resource: "acs:oss:*:*:b/k", context: [], outcome: nil),
    SimCase(policy: "all_policy.txt", action: "oss:GetObject", resource: "acs:oss:*:*:b", context: [], outcome: nil),
    SimCase(policy: "all_policy.txt", action: "oss:ListObjects", resource: "acs:oss:*:*:b/k", context: [], outcome: nil),
    SimCase(policy: "all_policy.txt", action: "oss:GetObject", resource: "s3://b/k", context: [], outcome: nil),
    SimCase(policy: "all_policy.txt", action: "oss:GetObject", resource: "acs:oss:*:*:b/k", context: ["novalue"], outcome: nil),
]

@Suite("Simulator")
struct SimulatorTests {
    @Test(arguments: simCases)
    func simulate(_ c: SimCase) throws {
        let policy = EffectivePolicy(role: try shippedPolicy(c.policy))
        do {
            let context = try PolicySimulator.parseContext(c.context, now: Date(timeIntervalSince1970: 0))
            let result = try PolicySimulator.simulate(policy, action: c.action, resource: c.resource, context: context)
            #expect(result.decision.outcome == c.outcome)
        } catch {
            #expect(c.outcome == nil, "unexpected input error: \(error)")
        }
    }

    @Test func unknownActionIsBadInputWithTheLikelyName() throws {
        let policy = EffectivePolicy(role: try shippedPolicy("all_policy.txt"))
        let cases = [
            ("oss:GetObjekt", "unknown action \"oss:GetObjekt\": did you mean oss:GetObject?"),
            ("s3:GetObjekt", "unknown action \"s3:GetObjekt\": did you mean s3:GetObject?"),
            ("oss:ListBucket", "unknown action \"oss:ListBucket\": did you mean oss:ListObjects or oss:GetBucketInfo or oss:GetBucketStat?"),
            ("s3:ListObjects", "unknown action \"s3:ListObjects\": did you mean s3:ListBucket?"),
            ("oss:Frobnicate", "unknown action \"oss:Frobnicate\": expected one the gateway serves, e.g. oss:GetObject or s3:ListBucket"),
        ]
        for (action, message) in cases {
            #expect(throws: SimulationInputError.self) {
                _ = try PolicySimulator.simulate(policy, action: action, resource: "acs:oss:*:*:b/k", context: PolicyContext())
            }
            do {
                _ = try PolicySimulator.simulate(policy, action: action, resource: "acs:oss:*:*:b/k", context: PolicyContext())
            } catch {
                #expect(error.message == message)
            }
        }
    }

    @Test func resourcesParse() throws {
        #expect(try PolicySimulator.parseResource("acs:oss:*:*:b/dir/k") == ("b", "dir/k"))
        #expect(try PolicySimulator.parseResource("arn:aws:s3:::b") == ("b", nil))
        #expect(try PolicySimulator.parseResource("acs:oss:*:*:*") == (nil, nil))
    }

    @Test func contextRepeatedKeysAreMultiValuedAndTimeIsSet() throws {
        let c = try PolicySimulator.parseContext(["jwt:groups=a", "JWT:groups=b", "acs:SourceIp=10.0.0.1"], now: Date(timeIntervalSince1970: 42))
        #expect(c.values(for: "jwt:groups") == ["a", "b"])
        #expect(c.values(for: "aws:SourceIp") == ["10.0.0.1"])
        #expect(c.values(for: "acs:CurrentTime") == ["42"])
    }

    /// The headline answers for the action's own dialect (every S3 request `s3:ListBucket`
    /// authorises is allowed); the breakdown keeps every operation, OSS's own marked.
    @Test func differingOperationsAreListed() throws {
        let policy = EffectivePolicy(role: try shippedPolicy("bucket_read_policy.txt"))
        let result = try PolicySimulator.simulate(policy, action: "s3:ListBucket", resource: "arn:aws:s3:::photos", context: PolicyContext())
        #expect(result.entries.filter { !$0.inDialect }.map(\.operation) == [.getBucketInfo, .getBucketStat])
        #expect(result.lines.count == 6)
        #expect(result.lines[0].hasPrefix("Allow by policy/bucket_read_policy.txt:3"))
        #expect(result.lines.contains { $0.hasPrefix("  headBucket (oss:ListObjects, s3:ListBucket): Allow by policy/bucket_read_policy.txt:3") })
        #expect(result.lines.contains {
            $0.hasPrefix("  getBucketInfo (oss:GetBucketInfo, s3:ListBucket): Deny (implicit)") && $0.hasSuffix("(OSS requests only; not in the decision above)")
        })
        #expect(result.lines.contains { $0.hasPrefix("  listObjects (oss:ListObjects, s3:ListBucket): Allow by policy/bucket_read_policy.txt:3") })
        // A policy that refuses the S3 listing itself is still refused.
        let none = EffectivePolicy(role: try Policy.load(text: #"{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetBucketInfo","Resource":"*"}]}"#,
                                                           file: "p", variables: [:]))
        #expect(!(try PolicySimulator.simulate(none, action: "s3:ListBucket", resource: "arn:aws:s3:::photos", context: PolicyContext())).decision.isAllowed)
    }
}
