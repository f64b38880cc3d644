import ArgumentParser
import Foundation
import TollgateGateway
import TollgateJSON
import TollgateStore

/// `tollgate bucket list | create NAME | delete NAME`: bucket administration through the
/// running gateway (see `GatewayClient` for why not through the store directly).
struct BucketCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucket",
        abstract: "List, create and delete buckets on the running gateway.",
        discussion: """
        Talks to the gateway of a running `tollgate serve` (GatewayAddress:GatewayPort from the config, \
        loopback for a wildcard address), signed with the root credentials. Exit status: 0 done, 1 refused \
        by the gateway or no gateway answers, 2 bad input (an invalid bucket name, a bad config).
        """,
        subcommands: [List.self, Create.self, Delete.self]
    )

    struct Connection: ParsableArguments {
        @Option(name: .long, help: "Path of config.json (default: $TOLLGATE_CONFIG, else ./config.json).") var config: String?
        @Option(name: .long, help: "The gateway's URL (default: from the config, e.g. http://127.0.0.1:9000).") var endpoint: String?
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every bucket with its creation date.")
        @OptionGroup var connection: Connection
        @Flag(help: "Print a JSON array of {\"Name\", \"CreationDate\"}.") var json = false

        func run() async throws {
            let buckets = try await gatewayCall(connection) { try await $0.listBuckets() }
            if json {
                print("[" + buckets.map { bucket in
                    var object = JSONObjectWriter()
                    object.add("Name", bucket.name)
                    object.add("CreationDate", bucket.creationDate)
                    return object.finish()
                }.joined(separator: ",") + "]")
            } else {
                let width = buckets.map(\.name.count).max() ?? 0
                for bucket in buckets {
                    print(bucket.name.padding(toLength: max(width, 4), withPad: " ", startingAt: 0) + "  " + bucket.creationDate)
                }
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a bucket.")
        @OptionGroup var connection: Connection
        @Argument(help: "The bucket name (3-63 of a-z 0-9 . -).") var name: String

        func run() async throws {
            try checkBucketName(name)
            // The gateway answers a repeated CreateBucket with 200, as S3 does in us-east-1; an
            // operator is told instead.
            try await gatewayCall(connection, bucket: name) { client in
                if try await client.listBuckets().contains(where: { $0.name == name }) {
                    throw GatewayClient.Failure(code: "BucketAlreadyOwnedByYou", message: "")
                }
                try await client.createBucket(name)
            }
            print("created bucket \(name)")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an empty bucket.")
        @OptionGroup var connection: Connection
        @Argument(help: "The bucket name.") var name: String

        func run() async throws {
            try checkBucketName(name)
            try await gatewayCall(connection, bucket: name) { try await $0.deleteBucket(name) }
            print("deleted bucket \(name)")
        }
    }
}

private func checkBucketName(_ name: String) throws {
    guard StoreNames.isValidBucketName(name) else {
        printError("tollgate: invalid bucket name \"\(name)\": 3-63 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit")
        throw ExitCode(2)
    }
}

/// Connects with the config's root credentials, runs `call`, and turns a refusal into one line
/// and exit code 1 (2 for a name the gateway finds invalid).
private func gatewayCall<T>(_ connection: BucketCommand.Connection, bucket: String? = nil,
                            _ call: (GatewayClient) async throws -> T) async throws -> T {
    let config = try loadConfigOrExit(connection.config)
    let root = try resolveRootOrExit(config)
    let client = GatewayClient(endpoint: connection.endpoint ?? GatewayClient.endpoint(for: config), root: root)
    do {
        return try await call(client)
    } catch let error as GatewayClient.Failure {
        let name = bucket.map { "\"\($0)\"" } ?? ""
        switch error.code {
        case "BucketNotEmpty"?: printError("tollgate: bucket \(name) is not empty: delete its objects first")
        case "NoSuchBucket"?: printError("tollgate: bucket \(name) does not exist")
        case "BucketAlreadyOwnedByYou"?, "BucketAlreadyExists"?: printError("tollgate: bucket \(name) already exists")
        default: printError("tollgate: \(error)")
        }
        throw ExitCode(error.code == "InvalidBucketName" ? 2 : 1)
    }
}
