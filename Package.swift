// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Tollgate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tollgate", targets: ["tollgate"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // OpenSSL libcrypto from the system (libssl-dev): all hashing, HMAC and randomness.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Carry-less multiplication (x86-64 PCLMULQDQ) for the CRCs, which libcrypto does not offer.
        .target(name: "CTollgateCRC"),
        // Multi-buffer MD5 (AVX2, AVX-512VL) over libcrypto's MD5 state, which libcrypto does not offer.
        .target(name: "CTollgateMD5", linkerSettings: [.linkedLibrary("crypto")]),
        .target(name: "TollgateCrypto", dependencies: ["CLibCrypto", "CTollgateCRC", "CTollgateMD5"], swiftSettings: swiftSettings),
        // Linux system calls that glibc does not wrap (cachestat), as inline C.
        .systemLibrary(name: "CLinux"),
        // Pure cores: no sockets, no files, no clocks.
        // Every date form on the wire (signature, HTTP, token, policy, log), parsed and formatted once.
        .target(name: "TollgateDates", swiftSettings: swiftSettings),
        .target(name: "TollgateJSON", swiftSettings: swiftSettings),
        .target(name: "TollgatePolicy", dependencies: ["TollgateDates"], swiftSettings: swiftSettings),
        .target(name: "TollgateToken", dependencies: ["TollgateCrypto", "TollgateDates", "TollgateJSON"], swiftSettings: swiftSettings),
        // The one cache type (bounded, CLOCK eviction): signing keys, login tokens, webhook answers, session policies.
        .target(name: "TollgateCache", swiftSettings: swiftSettings),
        .target(name: "TollgateSignature", dependencies: ["TollgateCrypto", "TollgateDates", "TollgateCache"], swiftSettings: swiftSettings),
        // Who an app user is: OIDC/JWT verification (jwt-kit), JWKS caching, role rules.
        .target(name: "TollgateIdentity", dependencies: ["TollgateCache", .product(name: "JWTKit", package: "jwt-kit")], swiftSettings: swiftSettings),
        // CORS rules (S3's shape) and their matching: one type for config.json, the XML reader, the store and the gateway.
        .target(name: "TollgateCORS", swiftSettings: swiftSettings),
        // Bounded reader for the XML request bodies (Delete, CompleteMultipartUpload, Tagging, CORSConfiguration),
        // and the writer of the gateway's and STS API's fixed XML answers.
        .target(name: "TollgateXML", dependencies: ["TollgateCORS", .product(name: "NIOCore", package: "swift-nio")], swiftSettings: swiftSettings),
        // Upstream STSs (Alibaba Cloud STS, AWS STS and S3-compatible ones): requests built and
        // signed, answers parsed, session names, retry and reuse rules; the server only sends.
        .target(
            name: "TollgateUpstream",
            dependencies: ["TollgateCrypto", "TollgateDates", "TollgatePolicy", "TollgateSignature", "TollgateXML"],
            swiftSettings: swiftSettings
        ),
        // The store as a product boundary: only the protocol-free `ObjectStore` protocol, its values,
        // errors and capabilities (and what every implementation shares: names, ranges, listing walks,
        // multipart rules). Each store is a module of its own; the server sees them through the factory.
        .target(
            name: "TollgateStore",
            dependencies: ["TollgateCrypto", "TollgateCORS", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // The embedded store: object files + SQLite metadata in the data directory.
        .target(
            name: "TollgateLocalStore",
            dependencies: [
                "TollgateStore", "TollgateCrypto", "TollgateCORS", "CLinux",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The in-memory twin the gateway tests run on.
        .target(
            name: "TollgateMemoryStore",
            dependencies: ["TollgateStore", "TollgateCrypto", "TollgateCORS", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // The store over an S3-compatible cluster (Ceph RGW, MinIO, AWS S3, …): async-http-client and
        // the project's own SigV4 signer.
        .target(
            name: "TollgateS3Store",
            dependencies: [
                "TollgateStore", "TollgateCrypto", "TollgateCORS", "TollgateSignature", "TollgateDates", "TollgateXML",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The one place that constructs a concrete store: from the config's `Storage` section.
        .target(
            name: "TollgateStorage",
            dependencies: [
                "TollgateStore", "TollgateLocalStore", "TollgateS3Store", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The mobile Storage API's pure core: collections, their permissions as policy statements,
        // object records, listing order, and the change feed's journal documents.
        .target(name: "TollgateMobile", swiftSettings: swiftSettings),
        // The HTTP layer under both listeners: the HTTP/1 codec with sendfile, the event-loop-pinned
        // channel and task executor, Expect: 100-continue, TLS certificates and their reload,
        // trusted proxies, the log writer and the local base URL. Knows nothing of tokens or buckets.
        .target(
            name: "TollgateHTTP",
            dependencies: [
                "TollgateStore", "TollgateDates",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Configuration: config.json and the policy files of its roles, read and validated
        // together (every error names its file, and its line where it has one), the root
        // credentials' first-start resolution. Values only; the server compiles them into a snapshot.
        .target(
            name: "TollgateConfig",
            dependencies: [
                "TollgateHTTP", "TollgateCORS", "TollgateCrypto", "TollgateIdentity", "TollgateMobile", "TollgatePolicy", "TollgateStorage",
                "TollgateS3Store", "TollgateStore", "TollgateToken", "TollgateUpstream",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // The token service: who a caller is and what a token lets them do. The token endpoint,
        // the STS API and admin routes, rate limits, the audit file, revocations, upstream STSs,
        // request authentication (signatures and tokens), and the compiled configuration in force
        // (`ConfigSnapshot`, reload).
        .target(
            name: "TollgateTokenService",
            dependencies: [
                "TollgateHTTP", "TollgateConfig", "TollgateCORS", "TollgateCache", "TollgateCrypto", "TollgateDates", "TollgateIdentity", "TollgateJSON",
                "TollgateMobile", "TollgatePolicy", "TollgateSignature", "TollgateStore", "TollgateToken", "TollgateUpstream", "TollgateXML",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The object gateway (S3 and OSS dialects over any store, the fast path, upload expiry,
        // the client `tollgate bucket` uses) and the mobile Storage API with its change feed.
        .target(
            name: "TollgateGateway",
            dependencies: [
                "TollgateTokenService", "TollgateHTTP", "TollgateConfig", "TollgateCORS", "TollgateCache", "TollgateCrypto", "TollgateDates",
                "TollgateIdentity", "TollgateMobile", "TollgatePolicy", "TollgateSignature", "TollgateStore", "TollgateToken", "TollgateXML",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The application: both listeners built from the token service and the gateway, and
        // metrics; `tollgate serve` runs them with the services in one group.
        .target(
            name: "TollgateServer",
            dependencies: [
                "TollgateTokenService", "TollgateGateway", "TollgateHTTP", "TollgateConfig", "TollgateIdentity", "TollgateJSON", "TollgateStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tollgate",
            dependencies: [
                "TollgateServer", "TollgateGateway", "TollgateTokenService", "TollgateHTTP", "TollgateConfig", "TollgateStore", "TollgateStorage", "TollgateDates", "TollgateJSON", "TollgatePolicy", "TollgateUpstream", "TollgateMobile",
                "TollgateCrypto", "CLinux",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "SigBench", dependencies: ["TollgateSignature", "TollgateCrypto"], path: "bench/SigBench", swiftSettings: swiftSettings),
        .executableTarget(name: "PolicyBench", dependencies: ["TollgatePolicy"], path: "bench/PolicyBench", swiftSettings: swiftSettings),
        .executableTarget(
            name: "NIOFloor",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "bench/NIOFloor", swiftSettings: swiftSettings
        ),
        .testTarget(name: "TollgateDatesTests", dependencies: ["TollgateDates"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateCacheTests", dependencies: ["TollgateCache"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateMobileTests", dependencies: ["TollgateMobile", "TollgatePolicy"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateCryptoTests", dependencies: ["TollgateCrypto"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgatePolicyTests", dependencies: ["TollgatePolicy"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateJSONTests", dependencies: ["TollgateJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateTokenTests", dependencies: ["TollgateToken", "TollgateCrypto"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateSignatureTests", dependencies: ["TollgateSignature", "TollgateCrypto", "TollgateDates"], exclude: ["Fixtures/generate.py"], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateIdentityTests", dependencies: ["TollgateIdentity", .product(name: "JWTKit", package: "jwt-kit")], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateXMLTests", dependencies: ["TollgateXML", .product(name: "NIOCore", package: "swift-nio")], swiftSettings: swiftSettings),
        .testTarget(name: "TollgateUpstreamTests", dependencies: ["TollgateUpstream", "TollgatePolicy", "TollgateSignature", "TollgateCrypto", "TollgateDates"],
                    swiftSettings: swiftSettings),
        .testTarget(
            name: "TollgateHTTPTests",
            dependencies: [
                "TollgateHTTP", .product(name: "Logging", package: "swift-log"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TollgateConfigTests",
            dependencies: ["TollgateConfig", "TollgateHTTP", "TollgateStorage", "TollgateUpstream"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TollgateStoreTests",
            dependencies: ["TollgateStore", "TollgateLocalStore", "TollgateMemoryStore", "TollgateS3Store", "TollgateStorage", "TollgateSignature", "TollgateHTTP"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TollgateTokenServiceTests",
            dependencies: [
                "TollgateTokenService", "TollgateConfig", "TollgateUpstream", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TollgateGatewayTests",
            dependencies: [
                "TollgateGateway", "TollgateTokenService", "TollgateConfig", "TollgateCORS", "TollgateIdentity", "TollgatePolicy", "TollgateSignature",
                "TollgateStore", .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The application end to end: both listeners over the memory and local stores.
        .testTarget(
            name: "TollgateServerTests",
            dependencies: [
                "TollgateServer", "TollgateGateway", "TollgateTokenService", "TollgateHTTP", "TollgateConfig", "TollgateDates", "TollgateStore", "TollgateLocalStore", "TollgateMemoryStore", "TollgateMobile",
                "TollgateCrypto", "TollgatePolicy",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// libFuzzer targets for the pure parsers (README, "Fuzzing"). Declared only when TOLLGATE_FUZZ is
// set, since they have no main of their own (libFuzzer's is linked in by --sanitize fuzzer), so
// a plain `swift build` never sees them. fuzz/run.sh builds them:
//   TOLLGATE_FUZZ=1 swift build -c release --sanitize fuzzer --product FuzzPolicy --scratch-path .build-fuzz
if Context.environment["TOLLGATE_FUZZ"] != nil {
    let fuzzers: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzPolicy", ["TollgatePolicy"]),
        ("FuzzSigV4", ["FuzzSupport", "TollgateSignature"]),
        ("FuzzOSS", ["FuzzSupport", "TollgateSignature"]),
        ("FuzzChunked", ["FuzzSupport", "TollgateSignature"]),
        ("FuzzToken", ["TollgateToken", "TollgateCrypto"]),
        ("FuzzXML", ["TollgateXML"]),
        ("FuzzUpstream", ["TollgateUpstream", "TollgatePolicy"]),
        // The gateway's connection: NIO's decoder, HTTP1Codec, GatewayFastPath (internal types,
        // so TollgateServer is built for testing in fuzz builds only).
        ("FuzzHTTP1", ["TollgateServer", "TollgateGateway", "TollgateTokenService", "TollgateHTTP", "TollgateConfig", "TollgateStore", "TollgateMemoryStore", .product(name: "NIOEmbedded", package: "swift-nio")]),
    ]
    for name in ["TollgateServer", "TollgateGateway", "TollgateTokenService", "TollgateHTTP", "TollgateConfig"] {
        package.targets.first { $0.name == name }?.swiftSettings?.append(.unsafeFlags(["-enable-testing"]))
    }
    package.targets.append(.target(name: "FuzzSupport", dependencies: ["TollgateSignature"], path: "fuzz/FuzzSupport",
                                   swiftSettings: swiftSettings))
    for fuzzer in fuzzers {
        package.targets.append(.executableTarget(
            name: fuzzer.name, dependencies: fuzzer.dependencies, path: "fuzz/\(fuzzer.name)",
            swiftSettings: swiftSettings + [.unsafeFlags(["-parse-as-library"])]
        ))
        package.products.append(.executable(name: fuzzer.name, targets: [fuzzer.name]))
    }
}
