import Foundation
import TollgateIdentity
import TollgatePolicy

/// An app user's login token, verified and given its role: the one rule the token endpoint and
/// the mobile Storage API share.
package struct AppUser: Sendable {
    package let identity: VerifiedIdentity
    package let role: String
    /// The claims its provider carries into tokens (`CarriedClaims`).
    package let claims: [String: String]
}

extension IdentityVerifier {
    /// Verifies `loginToken` and maps its claims to a role (`requested`, when the rules allow
    /// it); a role the login webhook names must be one of `roles`.
    package func appUser(_ loginToken: String, requested: String?, authentication: AuthenticationSettings, roles: [String: Policy],
                         now: Date) async throws(IdentityError) -> AppUser {
        let identity = try await verify(loginToken, now: now)
        if let named = identity.role, roles[named] == nil {
            throw .rejectedClaim("The login webhook named the unknown role \"\(named)\".")
        }
        let role = try authentication.role(for: identity.claims, named: identity.role, requested: requested)
        let provider = authentication.providers.first { $0.issuer == identity.issuer }
        return AppUser(identity: identity, role: role, claims: identity.carriedClaims(provider?.carriedClaims ?? []))
    }
}
