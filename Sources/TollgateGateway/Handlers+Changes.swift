import TollgateMobile
import TollgateStore

extension Gateway {
    /// Who a change feed names as the writer: the token's user, else its access key id.
    func writer(_ call: Call) -> String {
        call.identity.claims?.subject ?? call.identity.accessKeyId
    }

    /// A write to `key`: through the change feed of the mobile collection that holds it (so that
    /// clients syncing from the feed see writes made through S3 and OSS too), else as it is.
    func journaled(_ call: Call, bucket: String, key: String, _ write: () async throws -> ObjectInfo) async throws -> ObjectInfo {
        guard let changes, let (collection, id, space) = live.current.collections.locate(bucket: bucket, key: key) else {
            return try await write()
        }
        return try await changes.recording(collection, id: id, space: space, by: writer(call), write)
    }

    /// Deletes of `keys` (`delete` returns a result per key, in order), each key inside a mobile
    /// collection through its change feed.
    func journaledDelete(_ call: Call, bucket: String, keys: [String], _ delete: ([String]) async throws -> [DeleteResult]) async throws
        -> [DeleteResult] {
        let collections = live.current.collections
        guard let changes, !collections.isEmpty else { return try await delete(keys) }
        // One pending record per collection touched, with every key of it.
        var groups: [String: (collection: MobileCollection, indices: [Int], objects: [(id: String, space: String?)])] = [:]
        for (index, key) in keys.enumerated() {
            guard let (collection, id, space) = collections.locate(bucket: bucket, key: key) else { continue }
            groups[collection.name, default: (collection, [], [])].indices.append(index)
            groups[collection.name]!.objects.append((id, space))
        }
        guard !groups.isEmpty else { return try await delete(keys) }
        var tickets: [(ticket: ChangeFeed.Ticket, indices: [Int])] = []
        for group in groups.values.sorted(by: { $0.collection.name < $1.collection.name }) {
            tickets.append((try await changes.begin(group.collection, group.objects, op: .delete, by: writer(call)), group.indices))
        }
        let results: [DeleteResult]
        do { results = try await delete(keys) } catch {
            for (ticket, indices) in tickets { await changes.commit(ticket, indices.map { _ in nil }) }
            throw error
        }
        for (ticket, indices) in tickets {
            await changes.commit(ticket, indices.map { results[$0].error == nil ? ChangeFeed.Outcome() : nil })
        }
        return results
    }
}
