import Foundation
import Synchronization

/// How long upstream credentials are handed out again: the same caller, role, session policy
/// and duration get the same credentials for `share` of their lifetime (counted from when they
/// were fetched), and never past `Expiration − margin`, so an app-launch burst costs the
/// upstream one `AssumeRole` and the phone always gets at least `margin` seconds of validity
/// (the SDKs refresh 5 minutes before `Expiration`). `share` 0 turns reuse off.
public struct CacheRule: Sendable, Equatable {
    public var share: Double
    public var marginSeconds: Int
    public var maxEntries: Int

    public init(share: Double = 0.5, marginSeconds: Int = 300, maxEntries: Int = 10_000) {
        self.share = share
        self.marginSeconds = marginSeconds
        self.maxEntries = maxEntries
    }

    public var isEnabled: Bool { share > 0 && maxEntries > 0 }

    /// The last moment credentials fetched at `fetchedAt` may be handed out.
    public func reuseUntil(fetchedAt: Date, expiration: Date) -> Date {
        let lifetime = expiration.timeIntervalSince(fetchedAt)
        let byShare = fetchedAt.addingTimeInterval(max(0, lifetime) * min(1, share))
        let byMargin = expiration.addingTimeInterval(-Double(marginSeconds))
        return min(byShare, byMargin)
    }
}

/// Upstream credentials kept for reuse, bounded: at `maxEntries`, entries past their reuse
/// time go first, then the ones nearest to it. Pure but for its lock: every time is passed in.
public final class CredentialCache: Sendable {
    public struct Key: Hashable, Sendable {
        public var upstream: String
        public var role: String
        public var subject: String?
        /// The session policy as sent (its SHA-256 would do; the text is at most a few KiB and
        /// keeps the key exact).
        public var policy: String?
        public var durationSeconds: Int

        public init(upstream: String, role: String, subject: String?, policy: String?, durationSeconds: Int) {
            self.upstream = upstream
            self.role = role
            self.subject = subject
            self.policy = policy
            self.durationSeconds = durationSeconds
        }
    }

    public struct Entry: Sendable, Equatable {
        public var credentials: UpstreamCredentials
        public var fetchedAt: Date
        public var reuseUntil: Date
    }

    public let rule: CacheRule
    private let entries = Mutex<[Key: Entry]>([:])

    public init(rule: CacheRule) {
        self.rule = rule
    }

    /// The entry for `key` that may still be handed out at `now`.
    public func lookup(_ key: Key, now: Date) -> Entry? {
        guard rule.isEnabled else { return nil }
        return entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard now < entry.reuseUntil else {
                entries[key] = nil
                return nil
            }
            return entry
        }
    }

    /// Keeps `credentials`, fetched at `now`, unless they would not be reused at all.
    public func store(_ credentials: UpstreamCredentials, for key: Key, now: Date) {
        guard rule.isEnabled else { return }
        let until = rule.reuseUntil(fetchedAt: now, expiration: credentials.expiration)
        guard until > now else { return }
        entries.withLock { entries in
            if entries[key] == nil, entries.count >= rule.maxEntries { Self.evict(&entries, now: now, keep: rule.maxEntries - 1) }
            entries[key] = Entry(credentials: credentials, fetchedAt: now, reuseUntil: until)
        }
    }

    /// Forgets every entry `matching` says (a revoked subject, role or access key).
    public func remove(where matching: (Key, Entry) -> Bool) {
        entries.withLock { entries in
            entries = entries.filter { !matching($0.key, $0.value) }
        }
    }

    public var count: Int { entries.withLock { $0.count } }

    /// Drops entries past their reuse time, then those nearest to it, down to `keep` (and at
    /// least a tenth of the table, so a full table is not scanned for every insertion).
    static func evict(_ entries: inout [Key: Entry], now: Date, keep: Int) {
        entries = entries.filter { now < $0.value.reuseUntil }
        let target = min(keep, entries.count - max(1, entries.count / 10))
        guard entries.count > target else { return }
        let victims = entries.sorted { $0.value.reuseUntil < $1.value.reuseUntil }.prefix(entries.count - max(0, target))
        for victim in victims { entries[victim.key] = nil }
    }
}
