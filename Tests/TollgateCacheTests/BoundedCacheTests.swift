import Testing
import TollgateCache

@Suite struct BoundedCacheTests {
    @Test("never more than the capacity, whatever the churn")
    func bounded() {
        let cache = BoundedCache<Int, String>(capacity: 8)
        for key in 0..<1000 {
            cache.insert("\(key)", for: key)
            #expect(cache.count <= 8)
        }
        #expect(cache.count == 8)
        // The most recent inserts are there.
        #expect(cache.value(for: 999) == "999")
    }

    @Test("a hot set smaller than the capacity survives any number of cold keys")
    func hotSetSurvivesChurn() {
        let cache = BoundedCache<Int, Int>(capacity: 16)
        let hot = Array(0..<8)
        for key in hot { cache.insert(key, for: key) }
        var misses = 0
        for cold in 1000..<11_000 {
            for key in hot where cache.value(for: key) == nil {
                misses += 1
                cache.insert(key, for: key)
            }
            cache.insert(cold, for: cold)
        }
        #expect(misses == 0, "a clear-when-full cache would have missed the hot set after every 8 cold keys")
    }

    @Test("values are replaced in place, removed by key and by predicate, and made once when cached")
    func replaceRemoveAndMake() throws {
        let cache = BoundedCache<String, Int>(capacity: 4)
        cache.insert(1, for: "a")
        cache.insert(2, for: "a")
        #expect(cache.value(for: "a") == 2)
        #expect(cache.count == 1)
        for (index, key) in ["b", "c", "d"].enumerated() { cache.insert(index, for: key) }
        cache.remove("b")
        #expect(cache.value(for: "b") == nil)
        #expect(cache.count == 3)
        #expect(cache.value(for: "c") == 1 && cache.value(for: "d") == 2 && cache.value(for: "a") == 2)
        cache.removeAll { key, value in key == "c" || value == 2 }
        #expect(cache.count == 0)
        var made = 0
        for _ in 0..<3 {
            let value = cache.value(for: "e") { made += 1; return 5 }
            #expect(value == 5)
        }
        #expect(made == 1)
        struct Refused: Error {}
        #expect(throws: Refused.self) { try cache.value(for: "f") { () throws(Refused) -> Int in throw Refused() } }
        #expect(cache.value(for: "f") == nil)
        // Removal keeps the remaining entries findable, also after the cache filled and turned over.
        for key in 0..<10 { cache.insert(key, for: "k\(key)") }
        cache.remove("k9")
        cache.insert(42, for: "new")
        #expect(cache.value(for: "new") == 42)
        #expect(cache.count <= 4)
    }
}
