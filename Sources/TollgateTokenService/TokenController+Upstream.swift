import Foundation
import Hummingbird
import Logging
import TollgateConfig
import TollgateDates
import TollgateIdentity
import TollgateJSON
import TollgatePolicy
import TollgateToken
import TollgateUpstream

/// The token endpoint for a role vended by an upstream STS: the caller is decided exactly as
/// for any role (identity, role rules, duration, rate limits); then the role's policy is
/// rendered for that caller and sent as `AssumeRole`'s session policy, and the upstream's
/// credentials are answered in the same JSON, field for field.
package extension TokenController {
    /// What an upstream vend came to.
    enum UpstreamOutcome {
        case vended(UpstreamCredentials, upstream: String)
        /// A refusal in the token endpoint's terms, before the upstream was asked or from its answer.
        case refused(status: Int, code: String, message: String, retryAfter: Bool)
    }

    /// The token endpoint's answer for a role an upstream vends: the upstream's credentials in
    /// the endpoint's JSON, or its refusal in the same shape.
    package func vendUpstream(_ route: (role: UpstreamRole, vendor: UpstreamVendor), _ decision: Decision, inline: Bool,
                      context: TollgateRequestContext, now: Date) async -> Response {
        switch await upstreamCredentials(route, decision, context: context, now: now, via: "json") {
        case .vended(let credentials, _):
            var json = JSONObjectWriter(capacity: 1024)
            json.add("StatusCode", 200)
            json.add("AccessKeyId", credentials.accessKeyId)
            json.add("AccessKeySecret", credentials.accessKeySecret)
            json.add("SecurityToken", credentials.securityToken)
            json.add("Expiration", WireDate.iso8601(credentials.expiration))
            return TokenJSON.response(.ok, json.finish())
        case .refused(let status, let code, let message, let retryAfter):
            metrics.refusals[code].increment()
            RefusalLog.shared.log(context.logger, .info, "token refused", kind: code, key: context.clientAddress, now: now, metadata: [
                "token.refusal": .string(code), "token.reason": .string(message), "token.subject": .string(decision.subject ?? "-"),
                "token.role": .string(decision.role), "token.upstream": .string(route.vendor.settings.name),
                "client.address": .string(context.clientAddress),
            ])
            var response = TokenJSON.response(inline ? .ok : HTTPResponse.Status(code: status),
                                              TokenJSON.error(status: status, code: code, message: message))
            if retryAfter { response.headers[.retryAfter] = "1" }
            return response
        }
    }

    /// Credentials of the upstream for this decision (the token endpoint and the STS API's
    /// `AssumeRoleWithWebIdentity` both come here): revocation, the session policy rendered for
    /// the caller, reuse or a call; on success the audit record, the log line and the counters.
    /// A refusal is counted by upstream here, and answered (logged, counted) by the caller.
    package func upstreamCredentials(_ route: (role: UpstreamRole, vendor: UpstreamVendor), _ decision: Decision,
                             context: TollgateRequestContext, now: Date, via: String) async -> UpstreamOutcome {
        let vendor = route.vendor
        let settings = vendor.settings
        func refuse(_ status: Int, _ code: String, _ message: String, reason: String) -> UpstreamOutcome {
            vendor.metrics.refusals(reason).increment()
            return .refused(status: status, code: code, message: message, retryAfter: false)
        }

        // Tollgate cannot revoke what the upstream minted; it can stop minting for a subject.
        if let revocation = upstreamRevocation(subject: decision.subject, now: now) {
            let until = WireDate.iso8601(revocation.prunableAt(maxTokenLifetime: Int64(TollgateConfig.maximumTokenLifetime)))
            return refuse(403, "AccessDenied", "Credentials for this user are revoked; none are issued before \(until).", reason: "revoked")
        }

        // The session policy, rendered for this caller.
        let sessionName = SessionName.derive(subject: decision.subject, maxLength: settings.kind.maxSessionNameLength)
        guard let template = upstreams?.sessionPolicies[decision.role] else {
            return refuse(503, "PolicyUnavailable", "The role policy is not loaded", reason: "policy_unavailable")
        }
        var values: [String: String] = ["aws:userid": sessionName]
        if let subject = decision.subject { values["aws:username"] = subject }
        for (claim, value) in decision.claims ?? [:] {
            values[ConditionKeys.canonical(claim.contains(":") ? claim : "jwt:" + claim)] = value
        }
        for key in template.variables {
            // Every value sent is held to the subject rules: none may widen the policy.
            if let value = values[key], let problem = Subject.problem(value) {
                return refuse(403, "IDPRejectedClaim", "${\(key)} cannot fill the role's policy: \(problem).", reason: "policy_variable")
            }
        }
        let policy: String
        do { policy = try template.render(values) } catch {
            return refuse(403, "AccessDenied", "The role's policy cannot be rendered for this caller: \(error).", reason: "policy_variable")
        }
        guard policy.utf8.count <= settings.maxPolicyBytes else {
            return refuse(500, "SessionPolicyTooLarge",
                          "The role's session policy is \(policy.utf8.count) bytes for this user; the upstream STS \(settings.name) takes at most \(settings.maxPolicyBytes).",
                          reason: "policy_too_large")
        }

        let parameters = AssumeRoleParameters(roleArn: route.role.roleArn, sessionName: sessionName, policy: policy,
                                              durationSeconds: decision.duration)
        let key = CredentialCache.Key(upstream: settings.name, role: decision.role, subject: decision.subject, policy: policy,
                                      durationSeconds: decision.duration)
        var vended: UpstreamVendor.Vended
        do {
            vended = try await vendor.vend(parameters, key: key, now: clock)
            // Reused credentials of a role revoked after they were fetched, or a revoked key,
            // are not handed out again: fetch fresh ones.
            if vended.reused, reuseRevoked(vended, role: decision.role) {
                vendor.cache.remove { candidate, _ in candidate == key }
                vended = try await vendor.vend(parameters, key: key, now: clock)
            }
        } catch {
            vendor.metrics.refusals("upstream_error").increment()
            // One line per upstream and code a window: an outage refuses every request alike.
            RefusalLog.shared.log(context.logger, .warning, "upstream refused", kind: "upstream " + error.code, key: settings.name,
                                  now: now, metadata: [
                "upstream.name": .string(settings.name), "upstream.code": .string(error.code),
                "upstream.status": .string(error.upstreamStatus.map(String.init) ?? "-"), "upstream.reason": .string(error.message),
                "token.subject": .string(decision.subject ?? "-"), "token.role": .string(decision.role),
                "client.address": .string(context.clientAddress),
            ])
            return .refused(status: error.httpStatus, code: error.code, message: error.message, retryAfter: error.kind == .throttled)
        }

        let credentials = vended.credentials
        let expiration = WireDate.iso8601(credentials.expiration)
        (vended.reused ? vendor.metrics.reused : vendor.metrics.fetched).increment()
        metrics.issued[decision.role].increment()
        context.logger.log(level: issuedLogLevel, "token issued", metadata: [
            "token.subject": .string(decision.subject ?? "-"), "token.issuer": .string(decision.issuer ?? "-"),
            "token.role": .string(decision.role), "token.access_key_id": .string(credentials.accessKeyId),
            "token.expiration": .string(expiration), "token.via": .string(via), "token.upstream": .string(settings.name),
            "token.reused": .string(vended.reused ? "true" : "false"), "client.address": .string(context.clientAddress),
        ])
        audit?.record(TokenAuditEntry(
            time: WireDate.iso8601(now), subject: decision.subject, issuer: decision.issuer, role: decision.role,
            accessKeyId: credentials.accessKeyId, expiration: expiration, via: via, clientAddress: context.clientAddress,
            upstream: settings.name))
        return .vended(credentials, upstream: settings.name)
    }


    /// A `Subject` revocation of `subject` still kept (until its `KeptUntil`).
    func upstreamRevocation(subject: String?, now: Date) -> Revocation? {
        guard let subject, let list = revocations?.list, !list.isEmpty else { return nil }
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        return list.entries.first { entry in
            entry.kind == .subject && entry.value == subject
                && seconds < entry.prunableAt(maxTokenLifetime: Int64(TollgateConfig.maximumTokenLifetime))
        }
    }

    /// Whether reused credentials were revoked: their role at or after they were fetched, or
    /// their access key id.
    package func reuseRevoked(_ vended: UpstreamVendor.Vended, role: String) -> Bool {
        guard let list = revocations?.list, !list.isEmpty else { return false }
        let fetched = Int64(vended.fetchedAt.timeIntervalSince1970.rounded(.down))
        return list.entries.contains { entry in
            switch entry.kind {
            case .role: entry.value == role && fetched <= entry.revokedAt
            case .accessKeyId: entry.value == vended.credentials.accessKeyId
            case .subject: false
            }
        }
    }
}
