import Foundation
import TollgateCache

/// The app's own login, for apps whose users sign in with session cookies, passwords or SMS
/// codes rather than OIDC: the token the app presents is POSTed to the webhook, whose answer
/// names the user. Answers are cached briefly per token; a timeout or an unreachable webhook is
/// `IDPCommunicationError`, a refusal `InvalidIdentityToken`.
public final class Webhook: Sendable {
    /// POSTs a JSON body with a timeout; returns the status and at most 64 KiB of body.
    public typealias Post = @Sendable (_ url: String, _ body: [UInt8], _ timeoutMilliseconds: Int) async throws -> (status: Int, body: [UInt8])

    let settings: WebhookSettings
    let post: Post
    struct Answer: Sendable {
        let identity: VerifiedIdentity
        let until: Date
    }
    static let cacheCapacity = 4096
    let answers = BoundedCache<String, Answer>(capacity: cacheCapacity)
    /// The longest validity of any credentials (TokenExpireTime's maximum).
    static let longestValiditySeconds = 43200

    public init(settings: WebhookSettings, post: @escaping Post) {
        self.settings = settings
        self.post = post
    }

    public func verify(_ token: String, now: Date) async throws(IdentityError) -> VerifiedIdentity {
        if let cached = answers.value(for: token), now < cached.until { return cached.identity }
        let body = try? JSONSerialization.data(withJSONObject: ["token": token])
        let answer: (status: Int, body: [UInt8])
        do {
            answer = try await post(settings.url, Array(body ?? Data()), settings.timeoutMilliseconds)
        } catch {
            throw .communication("the login webhook did not answer in time (\(settings.timeoutMilliseconds) ms)")
        }
        guard answer.status == 200 else {
            let reason = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["reason"] as? String
            throw .invalidToken("the app's login refused it" + (reason.map { ": \($0)" } ?? ""))
        }
        let identity = try Self.identity(from: answer.body, now: now, subjectPrefix: settings.subjectPrefix)
        if token.utf8.count <= VerifiedTokens.maxTokenLength {
            let until = min(identity.expiresAt, now.addingTimeInterval(TimeInterval(settings.cacheSeconds)))
            answers.insert(Answer(identity: identity, until: until), for: token)
        }
        return identity
    }

    /// `{"user": …, "role"?: …, "claims"?: {…}, "maxValiditySeconds"?: …}`.
    static func identity(from body: [UInt8], now: Date, subjectPrefix: String = "") throws(IdentityError) -> VerifiedIdentity {
        guard let answer = try? JSONDecoder().decode([String: JSONValue].self, from: Data(body)),
              case .string(let named)? = answer["user"]
        else { throw .communication("the login webhook's answer has no \"user\"") }
        let user = subjectPrefix + named
        if let problem = Subject.problem(named) ?? Subject.problem(user) { throw .rejectedClaim("The subject is not allowed: \(problem).") }
        var claims: [String: JSONValue] = [:]
        if case .object(let given)? = answer["claims"] { claims = given }
        claims["sub"] = .string(user)
        var role: String?
        if case .string(let named)? = answer["role"] { role = named }
        // Below 1 or a fraction: no bound. Beyond the longest validity any token has: that.
        var validity: Int?
        if case .number(let seconds)? = answer["maxValiditySeconds"], seconds >= 1 {
            validity = answer["maxValiditySeconds"]?.integer(clampedTo: 1...Self.longestValiditySeconds)
        }
        return VerifiedIdentity(provider: "webhook", issuer: "webhook", subject: user, claims: claims,
                                expiresAt: now.addingTimeInterval(TimeInterval(validity ?? Self.longestValiditySeconds)), audience: nil,
                                role: role, maxValiditySeconds: validity)
    }
}
