import Foundation

/// How many CPUs this process may keep busy at once: the CPUs of its affinity mask (`taskset`,
/// a container's cpuset), fewer when its cgroup's CPU quota allows less (`docker run --cpus`,
/// a Kubernetes CPU limit), rounded up. Threads meant to run one per core are sized by it: more
/// than the quota allows only take turns being throttled.
public enum ProcessCPUs {
    public static func count() -> Int {
        let allowed = affinityCount() ?? ProcessInfo.processInfo.activeProcessorCount
        let directory = cgroupDirectory(selfCgroup: read("/proc/self/cgroup"))
        let limit = quota(cgroupV2: read(directory + "/cpu.max"),
                          v1Quota: read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), v1Period: read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
        return Swift.max(1, Swift.min(allowed, limit ?? allowed))
    }

    /// The CPUs a cgroup quota allows, rounded up: from cgroup v2's `cpu.max` (`QUOTA PERIOD`,
    /// or `max` for none), else from cgroup v1's quota and period (a quota of -1: none). Nil
    /// without a quota, or for text that is not one.
    static func quota(cgroupV2: String?, v1Quota: String?, v1Period: String?) -> Int? {
        func cpus(_ quota: Substring, _ period: Substring) -> Int? {
            guard let quota = Int(quota), let period = Int(period), quota > 0, period > 0 else { return nil }
            return (quota + period - 1) / period
        }
        if let line = cgroupV2?.split(whereSeparator: \.isWhitespace), line.count == 2 {
            return line[0] == "max" ? nil : cpus(line[0], line[1])
        }
        guard let quota = v1Quota?.trimmingCharacters(in: .whitespacesAndNewlines),
              let period = v1Period?.trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        return cpus(Substring(quota), Substring(period))
    }

    /// The process's cgroup v2 directory, from `/proc/self/cgroup`'s `0::PATH` line; the
    /// mount's root (`/sys/fs/cgroup`, a container's own cgroup) when there is none.
    static func cgroupDirectory(selfCgroup: String?) -> String {
        let root = "/sys/fs/cgroup"
        for line in (selfCgroup ?? "").split(separator: "\n") where line.hasPrefix("0::") {
            let path = line.dropFirst(3)
            guard path.hasPrefix("/"), !path.contains("..") else { return root }
            return path == "/" ? root : root + path
        }
        return root
    }

    /// The CPUs of the process's affinity mask, from `/proc/self/status`; nil where it cannot
    /// say (sched_getaffinity needs _GNU_SOURCE, which Swift's Glibc module is built without).
    static func affinityCount() -> Int? {
        allowedCPUs(status: read("/proc/self/status"))
    }

    /// The CPUs its `Cpus_allowed_list:` line names (`0-3,8,10-11`); nil without one.
    static func allowedCPUs(status: String?) -> Int? {
        guard let line = status?.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }) else { return nil }
        var count = 0
        for item in line.dropFirst("Cpus_allowed_list:".count).split(separator: ",") {
            let bounds = item.split(separator: "-").map { Int($0.trimmingCharacters(in: .whitespaces)) }
            switch bounds.count {
            case 1: guard bounds[0] != nil else { return nil }; count += 1
            case 2:
                guard let low = bounds[0], let high = bounds[1], low <= high else { return nil }
                count += high - low + 1
            default: return nil
            }
        }
        return count > 0 ? count : nil
    }

    private static func read(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }
}
