import ArgumentParser

@main
struct Tollgate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tollgate",
        abstract: "Short-lived credentials for mobile apps, and the object gateway that checks them.",
        subcommands: [ServeCommand.self, TokenCommand.self, PolicyCommand.self, BucketCommand.self, HealthcheckCommand.self]
    )
}
