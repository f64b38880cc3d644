import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TollgateConfig
import TollgateDates
import TollgateIdentity
import TollgateMobile
import TollgatePolicy
import TollgateSignature
import TollgateStore
import TollgateTokenService

/// The mobile Storage API of Oracle Mobile Cloud (`/mobile/platform/storage/collections`), on
/// the token listener: a plain REST dialect over the same store, identities and policies as
/// S3 and OSS, with bearer login tokens instead of signatures. On the token port, so that its
/// paths never meet a path-style bucket (a bucket may be called `mobile`), and so that an app's
/// one base URL serves its tokens and its storage.
package struct MobileStorageAPI: Sendable {
    static let root = "/mobile/platform/storage/collections"

    let live: LiveConfig
    let store: any ObjectStore
    let changes: ChangeFeed?
    /// Revoked credentials are refused on SigV4-signed requests; nil: none are.
    let revocations: RevocationStore?
    let clock: @Sendable () -> Date

    package init(live: LiveConfig, store: any ObjectStore, changes: ChangeFeed?, revocations: RevocationStore?, clock: @escaping @Sendable () -> Date) {
        self.live = live
        self.store = store
        self.changes = changes
        self.revocations = revocations
        self.clock = clock
    }

    package func addRoutes(to router: Router<TollgateRequestContext>) {
        router.get(RouterPath(Self.root)) { request, context in await self.answer(request, context) { try await self.listCollections($0) } }
        router.get(RouterPath(Self.root + "/:collection")) { request, context in
            await self.answer(request, context) { try await self.getCollection($0) }
        }
        let objects = Self.root + "/:collection/objects"
        router.get(RouterPath(objects)) { request, context in await self.answer(request, context) { try await self.listObjects($0) } }
        router.post(RouterPath(objects)) { request, context in await self.answer(request, context) { try await self.putObject($0, id: nil) } }
        let object = objects + "/:object"
        router.get(RouterPath(object)) { request, context in await self.answer(request, context) { try await self.getObject($0, headOnly: false) } }
        router.head(RouterPath(object)) { request, context in await self.answer(request, context) { try await self.getObject($0, headOnly: true) } }
        router.put(RouterPath(object)) { request, context in
            await self.answer(request, context) { call in try await self.putObject(call, id: try call.objectID()) }
        }
        router.delete(RouterPath(object)) { request, context in await self.answer(request, context) { try await self.deleteObject($0) } }
        router.get(RouterPath(Self.root + "/:collection/changes")) { request, context in
            await self.answer(request, context) { try await self.listChanges($0) }
        }
    }

    /// One request: who calls, under which configuration; errors in the API's JSON.
    struct Call {
        let request: Request
        let context: TollgateRequestContext
        let snapshot: ConfigSnapshot
        let caller: Caller
        let now: Date

        func parameter(_ name: String) -> String? {
            context.parameters.get(name).flatMap { $0.removingPercentEncoding }
        }

        func query(_ name: String) -> String? {
            request.uri.queryParameters[Substring(name)].map(String.init)
        }

        func header(_ name: String) -> String? {
            HTTPField.Name(name).flatMap { request.headers[$0] }
        }

        func objectID() throws(MobileError) -> String {
            guard let id = parameter("object") else { throw MobileError(.badRequest, "The object id is not valid percent-encoded UTF-8.") }
            if let problem = ObjectID.problem(id) { throw MobileError(.badRequest, problem + ".") }
            return id
        }
    }

    /// Who calls: a verified login token's (or vended credential's) user and role, the root
    /// credentials, or nobody.
    struct Caller {
        var subject: String?
        var role: String?
        var claims: [String: String] = [:]
        var isRoot = false
        var user: String { subject ?? (isRoot ? "root" : "anonymous") }
        var isAnonymous: Bool { subject == nil && role == nil && !isRoot }
    }

    func answer(_ request: Request, _ context: TollgateRequestContext, _ handle: (Call) async throws -> Response) async -> Response {
        let now = clock()
        let snapshot = live.current
        do {
            let caller = try await identify(request, context: context, snapshot: snapshot, now: now)
            return try await handle(Call(request: request, context: context, snapshot: snapshot, caller: caller, now: now))
        } catch let error as MobileError {
            return error.response
        } catch let error as StoreError {
            return MobileError(error).response
        } catch {
            context.logger.error("mobile storage request failed", metadata: ["error": "\(error)"])
            return MobileError(.internalServerError, "The request failed.").response
        }
    }

    /// `Authorization: Bearer <login token>`, verified as the token endpoint does; a request
    /// signed with SigV4 (header or presigned) with credentials Tollgate vended; none: anonymous.
    func identify(_ request: Request, context: TollgateRequestContext, snapshot: ConfigSnapshot, now: Date) async throws -> Caller {
        let authorization = request.headers[.authorization]
        if authorization?.hasPrefix("AWS4-HMAC-SHA256 ") == true || request.uri.queryParameters["X-Amz-Signature"] != nil {
            return try signedCaller(request, context: context, snapshot: snapshot, now: now)
        }
        guard let authorization else { return Caller() }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw MobileError(.unauthorized, "The Storage API takes login tokens (Authorization: Bearer <token>) or SigV4 with vended credentials.")
        }
        guard let authentication = snapshot.config.authentication, let identities = snapshot.identities else {
            throw MobileError(.unauthorized, "This server has no Authentication section: there are no login tokens to present.")
        }
        let token = String(parts[1].drop { $0 == " " || $0 == "\t" })
        let user: AppUser
        do throws(IdentityError) {
            user = try await identities.appUser(token, requested: nil, authentication: authentication, roles: snapshot.policies, now: now)
        } catch {
            throw MobileError(HTTPResponse.Status(code: error.httpStatus), error.message, code: "MOBILE-" + error.code)
        }
        return Caller(subject: user.identity.subject, role: user.role, claims: user.claims)
    }

    /// A SigV4 request (service `s3`) signed with vended credentials: their user and role (the
    /// root credentials: every permission). Bodies are not hashed here: a request with one must
    /// sign `UNSIGNED-PAYLOAD`.
    func signedCaller(_ request: Request, context: TollgateRequestContext, snapshot: ConfigSnapshot, now: Date) throws -> Caller {
        let authenticator = Authenticator(root: snapshot.root, tokens: snapshot.tokens, revocations: revocations)
        let identity: GatewayIdentity
        do {
            identity = try authenticator.authenticateS3(SignatureRequest(request.head, now: now))
            try authenticator.refuseIfRevoked(identity, dialect: .s3, context: context)
        } catch let error as S3AuthError {
            throw MobileError(error.httpStatus == 400 ? .badRequest : .forbidden, error.message, code: "MOBILE-" + error.code)
        }
        if request.method == .put || request.method == .post,
           let payload = request.headers[HTTPField.Name("x-amz-content-sha256")!], payload != "UNSIGNED-PAYLOAD" {
            throw MobileError(.badRequest, "Sign requests with a body to the Storage API with x-amz-content-sha256: UNSIGNED-PAYLOAD.")
        }
        guard let claims = identity.claims else { return Caller(isRoot: true) }
        return Caller(subject: claims.subject, role: claims.role, claims: claims.claims ?? [:])
    }

    // MARK: Authorisation

    func collection(_ call: Call) throws(MobileError) -> MobileCollection {
        guard let name = call.parameter("collection"), let collection = call.snapshot.collections[name] else {
            throw MobileError(.notFound, "There is no collection \(call.parameter("collection").map { "\"\($0)\"" } ?? "by that name").")
        }
        return collection
    }

    /// The user space a request on an isolated collection addresses: `user=NAME`, else the
    /// caller's own. nil for a shared collection (and, with `all`, for `user=*`).
    func space(_ call: Call, _ collection: MobileCollection, allowAll: Bool = false) throws(MobileError) -> String? {
        guard collection.isolated else { return nil }
        if let user = call.query("user") {
            if user == "*" {
                guard allowAll else { throw MobileError(.badRequest, "user=* lists every user's objects; name one user here.") }
                return nil
            }
            if let problem = Subject.problem(user) { throw MobileError(.badRequest, "user: \(problem).") }
            return user
        }
        guard let subject = call.caller.subject else {
            throw MobileError(.unauthorized, "The collection \(collection.name) is user isolated: present a login token.")
        }
        return subject
    }

    /// The policy engine's decision over the collection statements of the caller's role.
    func authorize(_ call: Call, _ collection: MobileCollection, _ operation: GatewayOperation, key: String?, listing prefix: String? = nil)
        throws(MobileError) {
        if call.caller.isRoot { return }
        var context = PolicyContext(now: call.now, sourceIp: call.context.clientIP, secureTransport: call.context.secureTransport,
                                    username: call.caller.subject, userAgent: call.request.headers[.userAgent], jwtClaims: call.caller.claims)
        if let prefix { context.setListing(prefix: prefix, delimiter: nil, maxKeys: nil) }
        // The collection's statements for the role; for an anonymous caller also the
        // AnonymousPolicyFile, which decides unsigned requests in every dialect (an explicit Deny
        // in either wins). Isolated collections never admit anonymous callers.
        var policies = [call.snapshot.collections.policy(role: call.caller.role)]
        if call.caller.isAnonymous { policies.append(call.snapshot.policies[TollgateConfig.anonymousRole]) }
        let decisions = policies.compactMap { $0?.evaluate(operation, bucket: collection.bucket, key: key, context: context).outcome }
        let allowed = decisions.contains(.allow) && !decisions.contains(.explicitDeny) && !(call.caller.isAnonymous && collection.isolated)
        guard allowed else {
            if call.caller.isAnonymous {
                throw MobileError(.unauthorized, "The collection \(collection.name) needs a login token for this.", authenticate: true)
            }
            throw MobileError(.forbidden, "Your role has no permission for this in the collection \(collection.name).")
        }
    }

    // MARK: Collections

    func listCollections(_ call: Call) async throws -> Response {
        let visible = call.snapshot.collections.all.filter { mayUse(call, $0) }
        let items = visible.map(collectionJSON)
        return Self.json(.ok, [
            "items": items, "count": items.count, "hasMore": false, "offset": 0, "limit": items.count,
            "links": [["rel": "canonical", "href": Self.root], ["rel": "self", "href": Self.root]],
        ])
    }

    func getCollection(_ call: Call) async throws -> Response {
        let collection = try collection(call)
        guard mayUse(call, collection) else {
            if call.caller.isAnonymous { throw MobileError(.unauthorized, "The collection \(collection.name) needs a login token.", authenticate: true) }
            throw MobileError(.forbidden, "Your role has no permission in the collection \(collection.name).")
        }
        return Self.json(.ok, collectionJSON(collection))
    }

    /// Whether the caller holds any permission in the collection: one of its role, or (an
    /// anonymous caller, in a shared collection) what the AnonymousPolicyFile grants there.
    func mayUse(_ call: Call, _ collection: MobileCollection) -> Bool {
        if call.caller.isRoot || !collection.permissions(of: call.caller.role).isEmpty { return true }
        guard call.caller.isAnonymous, !collection.isolated, let policy = call.snapshot.policies[TollgateConfig.anonymousRole] else { return false }
        var listing = PolicyContext(now: call.now)
        listing.setListing(prefix: collection.prefix, delimiter: nil, maxKeys: nil)
        return policy.evaluate(.listObjectsV2, bucket: collection.bucket, key: nil, context: listing).isAllowed
            || policy.mayAllowSomeObject(.getObject, bucket: collection.bucket, context: PolicyContext(now: call.now))
    }

    func collectionJSON(_ collection: MobileCollection) -> [String: Any] {
        let href = Self.root + "/" + Self.escape(collection.name)
        return ["id": collection.name, "description": collection.description, "userIsolated": collection.isolated,
                "links": [["rel": "canonical", "href": href], ["rel": "self", "href": href]]]
    }

    // MARK: Objects

    func putObject(_ call: Call, id given: String?) async throws -> Response {
        let collection = try collection(call)
        let space = try space(call, collection)
        let id = given ?? UUID().uuidString.lowercased()
        let key = collection.key(id: id, space: space)
        try authorize(call, collection, .putObject, key: key)
        if let length = call.request.headers[.contentLength].flatMap(Int64.init), length > Self.maxObjectSize {
            throw MobileError(.contentTooLarge, "An object is at most \(Self.maxObjectSize) bytes.")
        }
        let current = try await head(collection, key)
        var preconditions = WritePreconditions()
        if given == nil {
            preconditions.ifNoneMatch = "*"
        } else {
            if let ifMatch = call.request.headers[.ifMatch] {
                guard let current, ETag.matches(ifMatch, current.etag) else { throw MobileError.preconditionFailed }
                preconditions.ifMatch = ifMatch
            }
            if let ifNoneMatch = call.request.headers[.ifNoneMatch] {
                if let current, ETag.matches(ifNoneMatch, current.etag) { throw MobileError.preconditionFailed }
                preconditions.ifNoneMatch = ifNoneMatch
            }
            if let since = call.request.headers[.ifUnmodifiedSince].flatMap(WireDate.parseHTTPDate), let current {
                guard current.lastModifiedSeconds <= since else { throw MobileError.preconditionFailed }
                // Checked against this version: the commit must replace this one.
                if preconditions.ifMatch == nil { preconditions.ifMatch = current.etag }
            }
        }
        let record: ObjectRecord? = current.map { info in self.record(collection, id: id, space: space, info) }
        let name = call.header(Self.nameHeader).map(Self.decodeHeader) ?? record?.name ?? id
        let metadata = ObjectMetadata(
            contentType: call.request.headers[.contentType] ?? "application/octet-stream",
            userMetadata: ObjectRecord.userMetadata(name: name, createdBy: record?.createdBy ?? call.caller.user,
                                                    createdOn: record?.createdOn ?? call.now, modifiedBy: call.caller.user)
        )
        let options = WriteOptions(preconditions: preconditions, contentLength: call.request.headers[.contentLength].flatMap(Int64.init))
        let body = call.request.body
        let store = self.store
        @Sendable func write() async throws -> ObjectInfo {
            try await store.putObject(bucket: collection.bucket, key: key, body: body, metadata: metadata, options: options)
        }
        let info: ObjectInfo
        do {
            if let changes {
                info = try await changes.recording(collection, id: id, space: space, by: call.caller.user) { try await write() }
            } else {
                info = try await write()
            }
        } catch StoreError.preconditionFailed {
            throw MobileError.preconditionFailed
        }
        let written = self.record(collection, id: id, space: space, info)
        var headers = HTTPFields()
        headers[.eTag] = Self.quoted(info.etag)
        headers[.location] = canonical(collection, written, caller: call.caller)
        return Self.json(current == nil ? .created : .ok, objectJSON(collection, written, caller: call.caller), headers: headers)
    }

    func getObject(_ call: Call, headOnly: Bool) async throws -> Response {
        let collection = try collection(call)
        let space = try space(call, collection)
        let id = try call.objectID()
        let key = collection.key(id: id, space: space)
        try authorize(call, collection, .getObject, key: key)
        let ranges = headOnly ? [] : try Self.ranges(call.request.headers[.range])
        let read: ObjectRead
        do {
            read = try await store.getObject(bucket: collection.bucket, key: key, range: ranges.count == 1 ? ranges[0] : nil)
        } catch StoreError.invalidRange(let size) {
            var headers = HTTPFields()
            headers[.contentRange] = "bytes */\(size)"
            throw MobileError(.rangeNotSatisfiable, "The object has \(size) bytes: no range asked for is in it.", headers: headers)
        }
        let info = read.info
        let record = record(collection, id: id, space: space, info)
        var headers = objectHeaders(call, collection, record, info)
        if let notModified = try Self.conditions(call.request, info) {
            return Response(status: notModified, headers: headers)
        }
        if let accept = call.request.headers[.accept], !Self.accepts(accept, record.contentType) {
            throw MobileError(.notAcceptable, "The object is \(record.contentType), which the Accept header does not take.")
        }
        if headOnly {
            headers[.contentLength] = String(info.size)
            return Response(status: .ok, headers: headers)
        }
        if ranges.count > 1 {
            return try await multipartRanges(collection, key, info, ranges, headers: headers)
        }
        headers[.contentLength] = String(read.contentLength)
        if read.isPartial { headers[.contentRange] = read.contentRange }
        return Response(status: read.isPartial ? .partialContent : .ok, headers: headers, body: ResponseBody(asyncSequence: read.body))
    }

    /// Several ranges: `206 multipart/byteranges`, each part read from the version the first was.
    func multipartRanges(_ collection: MobileCollection, _ key: String, _ info: ObjectInfo, _ ranges: [ByteRange],
                         headers given: HTTPFields) async throws -> Response {
        let resolved = ranges.compactMap { try? $0.resolve(size: info.size) }
        guard !resolved.isEmpty else {
            var headers = HTTPFields()
            headers[.contentRange] = "bytes */\(info.size)"
            throw MobileError(.rangeNotSatisfiable, "The object has \(info.size) bytes: no range asked for is in it.", headers: headers)
        }
        let boundary = "tollgate-" + UUID().uuidString.lowercased()
        let contentType = info.metadata.contentType ?? "application/octet-stream"
        let heads = resolved.map { range in
            "\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\nContent-Range: \(ObjectRead.contentRange(range, size: info.size))\r\n\r\n"
        }
        var length: Int64 = 0
        for (head, range) in zip(heads, resolved) { length += Int64(head.utf8.count) + Int64(range.count) }
        let tail = "\r\n--\(boundary)--\r\n"
        length += Int64(tail.utf8.count)
        var headers = given
        headers[.contentType] = "multipart/byteranges; boundary=\(boundary)"
        headers[.contentLength] = String(length)
        let store = self.store
        return Response(status: .partialContent, headers: headers, body: ResponseBody { writer in
            for (head, range) in zip(heads, resolved) {
                try await writer.write(ByteBuffer(string: head))
                let part = try await store.getObject(bucket: collection.bucket, key: key, range: .closed(range.lowerBound, range.upperBound - 1))
                // Another version meanwhile: stop short (the length announced cannot be met).
                guard part.info.etag == info.etag else { throw StoreError.preconditionFailed }
                for try await buffer in part.body { try await writer.write(buffer) }
            }
            try await writer.write(ByteBuffer(string: tail))
            try await writer.finish(nil)
        })
    }

    func deleteObject(_ call: Call) async throws -> Response {
        let collection = try collection(call)
        let space = try space(call, collection)
        let id = try call.objectID()
        let key = collection.key(id: id, space: space)
        try authorize(call, collection, .deleteObject, key: key)
        guard let current = try await head(collection, key) else {
            throw MobileError(.notFound, "There is no object \"\(id)\" in the collection \(collection.name).")
        }
        if let ifMatch = call.request.headers[.ifMatch], !ETag.matches(ifMatch, current.etag) { throw MobileError.preconditionFailed }
        if let ifNoneMatch = call.request.headers[.ifNoneMatch], ETag.matches(ifNoneMatch, current.etag) { throw MobileError.preconditionFailed }
        if let since = call.request.headers[.ifUnmodifiedSince].flatMap(WireDate.parseHTTPDate), current.lastModifiedSeconds > since {
            throw MobileError.preconditionFailed
        }
        if let changes {
            try await changes.recordingDelete(collection, id: id, space: space, by: call.caller.user) {
                try await store.deleteObject(bucket: collection.bucket, key: key)
            }
        } else {
            try await store.deleteObject(bucket: collection.bucket, key: key)
        }
        return Response(status: .noContent)
    }

    // MARK: Listing

    static let defaultLimit = 100
    static let maxLimit = 1000
    /// Orders other than by id, and `q`, read every object's record: up to this many.
    static let maxSortedObjects = 10_000

    func listObjects(_ call: Call) async throws -> Response {
        let collection = try collection(call)
        let space = try space(call, collection, allowAll: true)
        let all = collection.isolated && space == nil
        let prefix = collection.spacePrefix(space)
        try authorize(call, collection, .listObjectsV2, key: nil, listing: prefix)
        let limit = try Self.number(call.query("limit"), name: "limit", default: Self.defaultLimit, in: 1...Self.maxLimit)
        let offset = try Self.number(call.query("offset"), name: "offset", default: 0, in: 0...Int(Int32.max))
        let order = try call.query("orderBy").map { text throws(MobileError) in
            guard let order = ListOrder(text) else {
                throw MobileError(.badRequest, "orderBy must be one of name, modifiedBy, modifiedOn, createdBy, createdOn, contentLength, with :asc or :desc.")
            }
            return order
        } ?? ListOrder()
        let query = call.query("q") ?? ""
        let wantsTotal = call.query("totalResults") == "true"
        var page: [ObjectRecord]
        var hasMore: Bool
        var total: Int?
        var nextCursor: String?
        if order.field == .id, !order.descending, query.isEmpty {
            // By key, as the store lists: a page costs the same at any depth when the next link's cursor is followed.
            var after: String?
            if let cursor = call.query("cursor") {
                guard let key = Self.decodeCursor(cursor), key.hasPrefix(prefix) else { throw MobileError(.badRequest, "The cursor is not one this server gave.") }
                after = key
            } else if offset > 0 {
                after = try await skip(collection, prefix: prefix, all: all, count: offset)
            }
            let (keys, more) = try await keys(collection, prefix: prefix, all: all, after: after, count: limit)
            page = try await records(collection, keys)
            hasMore = more
            if more, let last = keys.last { nextCursor = Self.encodeCursor(last.key) }
            if wantsTotal { total = try await count(collection, prefix: prefix, all: all) }
        } else {
            var records = try await records(collection, try await everyKey(collection, prefix: prefix, all: all))
            records = records.filter { objectMatches($0, query: query) }.sorted(by: order.precedes)
            total = records.count
            page = Array(records.dropFirst(offset).prefix(limit))
            hasMore = offset + page.count < records.count
        }
        var links = [["rel": "canonical", "href": Self.root + "/" + Self.escape(collection.name) + "/objects"],
                     ["rel": "self", "href": call.request.uri.description]]
        if hasMore {
            var next = ["offset": String(offset + page.count)]
            if let nextCursor { next["cursor"] = nextCursor }
            links.append(["rel": "next", "href": relink(call, next)])
        }
        if offset > 0 { links.append(["rel": "prev", "href": relink(call, ["offset": String(max(0, offset - limit))])]) }
        var body: [String: Any] = [
            "items": page.map { objectJSON(collection, $0, caller: call.caller) }, "count": page.count, "limit": limit, "offset": offset,
            "hasMore": hasMore, "links": links,
        ]
        if wantsTotal, let total { body["totalResults"] = total }
        var headers = HTTPFields()
        syncHeaders(call, collection, into: &headers)
        return Self.json(.ok, body, headers: headers)
    }

    /// The listing's URL with `changes` replacing (or adding) query parameters, `cursor` dropped unless given.
    func relink(_ call: Call, _ changes: [String: String]) -> String {
        var items = call.request.uri.queryParameters.map { (String($0.key), String($0.value)) }.filter { $0.0 != "cursor" && changes[$0.0] == nil }
        items += changes.sorted(by: { $0.key < $1.key }).map { ($0.key, $0.value) }
        let query = items.map { Self.escape($0.0) + "=" + Self.escape($0.1) }.joined(separator: "&")
        return call.request.uri.path + (query.isEmpty ? "" : "?" + query)
    }

    struct Located {
        var key: String
        var id: String
        var space: String?
    }

    /// Keys under `prefix` after `after`, in key order, that name objects of the collection: at
    /// most `count`, and whether there are more.
    func keys(_ collection: MobileCollection, prefix: String, all: Bool, after: String?, count: Int) async throws -> ([Located], Bool) {
        var found: [Located] = []
        var query = ListQuery(prefix: prefix, delimiter: all ? nil : "/", startAfter: after, maxKeys: min(1000, count + 1))
        while true {
            let result = try await store.listObjects(bucket: collection.bucket, query: query)
            for object in result.objects {
                guard let (id, space) = collection.locate(bucket: collection.bucket, key: object.key) else { continue }
                if found.count == count { return (found, true) }
                found.append(Located(key: object.key, id: id, space: space))
            }
            guard result.isTruncated, let token = result.nextContinuationToken else { return (found, false) }
            query.continuationToken = token
            query.startAfter = nil
        }
    }

    /// The key after which the page at `offset` starts (a walk: the next links' cursors avoid it).
    func skip(_ collection: MobileCollection, prefix: String, all: Bool, count: Int) async throws -> String? {
        var after: String?
        var remaining = count
        while remaining > 0 {
            let (keys, more) = try await keys(collection, prefix: prefix, all: all, after: after, count: min(remaining, 1000))
            guard let last = keys.last else { return after }
            after = last.key
            remaining -= keys.count
            if !more { break }
        }
        return after
    }

    func count(_ collection: MobileCollection, prefix: String, all: Bool) async throws -> Int {
        var total = 0
        var after: String?
        while true {
            let (keys, more) = try await keys(collection, prefix: prefix, all: all, after: after, count: 1000)
            total += keys.count
            guard more, let last = keys.last else { return total }
            after = last.key
        }
    }

    func everyKey(_ collection: MobileCollection, prefix: String, all: Bool) async throws -> [Located] {
        let (keys, more) = try await keys(collection, prefix: prefix, all: all, after: nil, count: Self.maxSortedObjects)
        guard !more else {
            throw MobileError(.badRequest, "orderBy and q read every object's metadata, up to \(Self.maxSortedObjects) objects; this space has more: page in id order instead.")
        }
        return keys
    }

    /// Each key's record (its metadata, by HEAD), in the order given; keys deleted meanwhile are left out.
    func records(_ collection: MobileCollection, _ keys: [Located]) async throws -> [ObjectRecord] {
        var records: [ObjectRecord] = []
        records.reserveCapacity(keys.count)
        for located in keys {
            guard let info = try await head(collection, located.key) else { continue }
            records.append(record(collection, id: located.id, space: located.space, info))
        }
        return records
    }

    // MARK: Changes

    func listChanges(_ call: Call) async throws -> Response {
        let collection = try collection(call)
        guard let changes else { throw MobileError(.notImplemented, "This server keeps no change feed.") }
        let space = try space(call, collection, allowAll: true)
        try authorize(call, collection, .listObjectsV2, key: nil, listing: collection.spacePrefix(space))
        let limit = try Self.number(call.query("limit"), name: "limit", default: Self.defaultLimit, in: 1...Self.maxLimit)
        let wait = try Self.number(call.query("wait"), name: "wait", default: 0, in: 0...60)
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        guard let since = call.query("since") else {
            let cursor = try await changes.cursor(collection)
            return Self.json(.ok, ["items": [Any](), "cursor": cursor.description, "hasMore": false], headers: headers)
        }
        guard let cursor = ChangeCursor(since) else { throw MobileError(.badRequest, "since is not a cursor this server gave.") }
        let visible = { (entry: ChangeEntry) -> Bool in !collection.isolated || space == nil || entry.space == space }
        let deadline = ContinuousClock.now + .seconds(wait)
        var after = cursor
        while true {
            guard case .changes(let entries, let next, let hasMore) = try await changes.changes(collection, after: after, limit: limit, visible: visible) else {
                throw MobileError(.gone, "The cursor is older than the changes this feed keeps (\(collection.changeRetentionSeconds) s): list the collection again, then follow the feed from a new cursor.",
                                  code: "MOBILE-CURSOR-EXPIRED")
            }
            if !entries.isEmpty || hasMore || ContinuousClock.now >= deadline {
                return changesJSON(collection, entries, next, hasMore, caller: call.caller, headers: headers)
            }
            // Nothing the caller may see up to `next`: wait there for the next change.
            after = next
            try await changes.wait(collection, after: next.seq, until: deadline)
        }
    }

    func changesJSON(_ collection: MobileCollection, _ entries: [ChangeEntry], _ cursor: ChangeCursor, _ hasMore: Bool, caller: Caller,
                     headers: HTTPFields) -> Response {
        let items: [[String: Any]] = entries.map { entry in
            var item: [String: Any] = ["id": entry.id, "op": entry.op.rawValue, "modifiedBy": entry.by,
                                       "modifiedOn": WireDate.iso8601(Date(timeIntervalSince1970: Double(entry.time) / 1000))]
            if let etag = entry.etag { item["eTag"] = Self.quoted(etag) }
            if let size = entry.size { item["contentLength"] = size }
            if let space = entry.space { item["user"] = space }
            return item
        }
        return Self.json(.ok, ["items": items, "cursor": cursor.description, "hasMore": hasMore], headers: headers)
    }

    // MARK: Records and headers

    func head(_ collection: MobileCollection, _ key: String) async throws -> ObjectInfo? {
        do { return try await store.headObject(bucket: collection.bucket, key: key) } catch StoreError.noSuchKey {
            return nil
        }
    }

    func record(_ collection: MobileCollection, id: String, space: String?, _ info: ObjectInfo) -> ObjectRecord {
        ObjectRecord(id: id, space: collection.isolated ? space : nil, size: info.size, etag: info.etag, lastModified: info.lastModified,
                     contentType: info.metadata.contentType, userMetadata: info.metadata.userMetadata)
    }

    static let nameHeader = "Oracle-Mobile-Name"

    func objectHeaders(_ call: Call, _ collection: MobileCollection, _ record: ObjectRecord, _ info: ObjectInfo) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = record.contentType
        headers[.eTag] = Self.quoted(record.etag)
        headers[.lastModified] = WireDate.httpDate(info.lastModified)
        headers[.acceptRanges] = "bytes"
        func add(_ name: String, _ value: String) {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        add(Self.nameHeader, Self.encodeHeader(record.name))
        add("Oracle-Mobile-Created-By", Self.encodeHeader(record.createdBy))
        add("Oracle-Mobile-Created-On", WireDate.iso8601(record.createdOn))
        add("Oracle-Mobile-Modified-By", Self.encodeHeader(record.modifiedBy))
        add("Oracle-Mobile-Modified-On", WireDate.iso8601(record.modifiedOn))
        add("Oracle-Mobile-Canonical-Link", canonical(collection, record, caller: call.caller))
        syncHeaders(call, collection, into: &headers)
        return headers
    }

    /// `Oracle-Mobile-Sync-Agent: true` asks how long the answer may be cached offline.
    func syncHeaders(_ call: Call, _ collection: MobileCollection, into headers: inout HTTPFields) {
        guard call.header("Oracle-Mobile-Sync-Agent")?.lowercased() == "true" else { return }
        if collection.noStore {
            if let name = HTTPField.Name("Oracle-Mobile-Sync-No-Store") { headers[name] = "true" }
        } else if let name = HTTPField.Name("Oracle-Mobile-Sync-Expires") {
            headers[name] = WireDate.httpDate(call.now.addingTimeInterval(TimeInterval(collection.timeToLiveSeconds)))
        }
    }

    func canonical(_ collection: MobileCollection, _ record: ObjectRecord, caller: Caller) -> String {
        var link = Self.root + "/" + Self.escape(collection.name) + "/objects/" + Self.escape(record.id)
        if let space = record.space, space != caller.subject { link += "?user=" + Self.escape(space) }
        return link
    }

    func objectJSON(_ collection: MobileCollection, _ record: ObjectRecord, caller: Caller) -> [String: Any] {
        let link = canonical(collection, record, caller: caller)
        var item: [String: Any] = [
            "id": record.id, "name": record.name, "contentLength": record.contentLength, "contentType": record.contentType,
            "eTag": Self.quoted(record.etag), "createdBy": record.createdBy, "createdOn": WireDate.iso8601(record.createdOn),
            "modifiedBy": record.modifiedBy, "modifiedOn": WireDate.iso8601(record.modifiedOn),
            "links": [["rel": "canonical", "href": link], ["rel": "self", "href": link]],
        ]
        if let space = record.space { item["user"] = space }
        return item
    }

    // MARK: Helpers

    static let maxObjectSize: Int64 = 5 * 1024 * 1024 * 1024

    /// GET and HEAD conditions: 304 (If-None-Match, else If-Modified-Since), 412 (If-Match,
    /// else If-Unmodified-Since), nil to answer.
    static func conditions(_ request: Request, _ info: ObjectInfo) throws(MobileError) -> HTTPResponse.Status? {
        let modified = info.lastModifiedSeconds
        if let ifMatch = request.headers[.ifMatch] {
            guard ETag.matches(ifMatch, info.etag) else { throw MobileError.preconditionFailed }
        } else if let since = request.headers[.ifUnmodifiedSince].flatMap(WireDate.parseHTTPDate), modified > since {
            throw MobileError.preconditionFailed
        }
        if let ifNoneMatch = request.headers[.ifNoneMatch] {
            if ETag.matches(ifNoneMatch, info.etag) { return .notModified }
        } else if let since = request.headers[.ifModifiedSince].flatMap(WireDate.parseHTTPDate), modified <= since {
            return .notModified
        }
        return nil
    }

    /// `Range: bytes=a-b[, c-d …]`; a header that does not parse is ignored (the whole object).
    static func ranges(_ header: String?) throws(MobileError) -> [ByteRange] {
        guard let header, header.lowercased().hasPrefix("bytes=") else { return [] }
        let specs = header.dropFirst("bytes=".count).split(separator: ",")
        guard specs.count <= 16 else { throw MobileError(.rangeNotSatisfiable, "At most 16 ranges in one request.") }
        var ranges: [ByteRange] = []
        for spec in specs {
            guard let range = ByteRange.parse("bytes=" + spec.trimmingCharacters(in: .whitespaces)) else { return [] }
            ranges.append(range)
        }
        return ranges
    }

    /// Whether an `Accept` header takes `contentType` (`type/subtype`, `type/*`, `*/*`; `q=0` refuses).
    static func accepts(_ accept: String, _ contentType: String) -> Bool {
        let stored = contentType.split(separator: ";")[0].trimmingCharacters(in: .whitespaces).lowercased()
        let storedType = stored.split(separator: "/").first.map(String.init) ?? stored
        var best: (specificity: Int, accepted: Bool)?
        for item in accept.split(separator: ",").prefix(64) {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let range = parts.first, !range.isEmpty else { continue }
            let refused = parts.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "").range(of: #"^q=0(\.0{0,3})?$"#, options: .regularExpression) != nil }
            let specificity: Int
            if range == stored { specificity = 3 }
            else if range == storedType + "/*" { specificity = 2 }
            else if range == "*/*" || range == "*" { specificity = 1 }
            else { continue }
            if best == nil || specificity > best!.specificity { best = (specificity, !refused) }
        }
        return best?.accepted ?? false
    }

    static func number(_ text: String?, name: String, default fallback: Int, in range: ClosedRange<Int>) throws(MobileError) -> Int {
        guard let text else { return fallback }
        guard text.utf8.count <= 10, let value = Int(text), range.contains(value) else {
            throw MobileError(.badRequest, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    static func quoted(_ etag: String) -> String { "\"" + ETag.normalize(etag) + "\"" }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .init(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? text
    }

    /// Header values are ASCII: other characters percent-encoded (UTF-8), as are `%` and controls.
    static func encodeHeader(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value >= 0x7F || $0.value < 0x20 || $0 == "%" }) else { return text }
        return text.addingPercentEncoding(withAllowedCharacters: .init(charactersIn: Unicode.Scalar(0x20)...Unicode.Scalar(0x7E)).subtracting(.init(charactersIn: "%"))) ?? text
    }

    /// A header value as sent: percent-decoded when it decodes.
    static func decodeHeader(_ text: String) -> String {
        text.contains("%") ? (text.removingPercentEncoding ?? text) : text
    }

    static func encodeCursor(_ key: String) -> String {
        Data(key.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decodeCursor(_ text: String) -> String? {
        guard text.utf8.count <= 2048 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).flatMap { String(data: $0, encoding: .utf8) }
    }

    static func json(_ status: HTTPResponse.Status, _ object: Any, headers given: HTTPFields = [:]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        var headers = given
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentLength] = String(data.count)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// An error of the Storage API, in its JSON shape.
struct MobileError: Error {
    var status: HTTPResponse.Status
    var detail: String
    var code: String?
    var headers = HTTPFields()
    var authenticate = false

    init(_ status: HTTPResponse.Status, _ detail: String, code: String? = nil, headers: HTTPFields = [:], authenticate: Bool = false) {
        self.status = status
        self.detail = detail
        self.code = code
        self.headers = headers
        self.authenticate = authenticate || status == .unauthorized
    }

    static let preconditionFailed = MobileError(.preconditionFailed, "The object is not in the state the request's conditions name: it was changed (or created) since.")

    init(_ error: StoreError) {
        switch error {
        case .noSuchKey: self.init(.notFound, "There is no such object.")
        case .noSuchBucket(let bucket): self.init(.serviceUnavailable, "The collection's bucket \(bucket) does not exist.")
        case .preconditionFailed: self = .preconditionFailed
        case .badDigest: self.init(.badRequest, "The body does not match its Content-MD5.")
        case .invalidRange(let size): self.init(.rangeNotSatisfiable, "The object has \(size) bytes: no range asked for is in it.")
        case .backendUnavailable, .backendTimeout:
            self.init(.serviceUnavailable, "The storage backend does not answer; try again.", headers: [.retryAfter: "1"])
        case .backendThrottled(let seconds):
            self.init(.serviceUnavailable, "The storage backend asks to slow down; try again.", headers: [.retryAfter: String(seconds ?? 1)])
        case .storageFull: self.init(HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), "The store is full.")
        case .keyTooLong: self.init(.badRequest, "The object's id (with its collection's prefix and user) is too long.")
        default: self.init(.internalServerError, "The store failed.")
        }
    }

    /// Statuses with their reason phrases, for one given by number (an identity error's).
    static let standard: [HTTPResponse.Status] = [
        .badRequest, .unauthorized, .forbidden, .notFound, .notAcceptable, .gone, .preconditionFailed, .contentTooLarge,
        .rangeNotSatisfiable, .tooManyRequests, .internalServerError, .notImplemented, .badGateway, .serviceUnavailable, .gatewayTimeout,
    ]

    var response: Response {
        let title = status.reasonPhrase.isEmpty
            ? Self.standard.first { $0.code == status.code }?.reasonPhrase ?? "Error \(status.code)" : status.reasonPhrase
        let body: [String: Any] = [
            "type": "https://www.rfc-editor.org/rfc/rfc9110#status.\(status.code)", "status": status.code, "title": title,
            "detail": detail, "o:errorCode": code ?? "MOBILE-\(status.code)",
        ]
        var headers = self.headers
        if authenticate { headers[.wwwAuthenticate] = #"Bearer realm="tollgate""# }
        return MobileStorageAPI.json(status, body, headers: headers)
    }
}
