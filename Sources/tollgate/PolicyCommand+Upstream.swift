import Foundation
import TollgateConfig
import TollgatePolicy
import TollgateUpstream

/// The upstream STSs each policy file of the config is sent to (roles with `Upstream`, or the
/// default role under `AssumeRoleArn`), by the file's absolute path. Empty without a config
/// (or with one that does not load: `placeholderVariables` already said why).
func upstreamsByPolicyFile(config flag: String?) -> [String: [(role: String, settings: UpstreamSettings)]] {
    let path = configPath(flag) ?? (FileManager.default.fileExists(atPath: "config.json") ? "config.json" : nil)
    guard let path, let config = try? TollgateConfig.load(path: path) else { return [:] }
    var out: [String: [(role: String, settings: UpstreamSettings)]] = [:]
    for (role, route) in config.upstream.roles.sorted(by: { $0.key < $1.key }) {
        guard let file = config.roles[role], let settings = config.upstream.upstreams[route.upstream] else { continue }
        out[absolutePath(file), default: []].append((role, settings))
    }
    return out
}

/// `policy check`'s warnings for what the upstreams of `file` would refuse (see `UpstreamPolicyCheck`).
func upstreamWarnings(text: String, file: String, variables: [String: String],
                      upstreams: [String: [(role: String, settings: UpstreamSettings)]]) -> [PolicyDiagnostic] {
    guard let targets = upstreams[absolutePath(file)],
          let template = try? SessionPolicyTemplate.make(text: text, file: file, variables: variables) else { return [] }
    var seen = Set<String>()
    return targets.flatMap { target -> [PolicyDiagnostic] in
        guard seen.insert(target.settings.name).inserted else { return [] }
        return UpstreamPolicyCheck.warnings(template, file: file, upstream: target.settings.name, kind: target.settings.kind,
                                            maxPolicyBytes: target.settings.maxPolicyBytes)
    }
}

private func absolutePath(_ path: String) -> String {
    URL(fileURLWithPath: path).standardizedFileURL.path
}
