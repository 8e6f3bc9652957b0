// chaos: the echo sample's server (EchoServerKit, on a group, with its drain) and C clients on a
// simulated network, under faults drawn from a seed: latency and jitter, resets, partitions,
// short reads. Each client must get back exactly what it sent, or a reported error. Prints the
// seed, the faults injected (as Swift code for `Simulation(seed:faultPlan:)`), the trace's hash
// and the verdict; one seed, one output, on any machine.
//
//   swift run chaos --seed 7
//   swift run chaos --seed 7 --clients 50 --virtual-seconds 30

import ReactiveUV
import ReactiveUVTesting
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: chaos --seed N [--clients C] [--virtual-seconds S]
      --seed N             the run to make: faults, client payloads and the order of callbacks (0...\(UInt64.max))
      --clients C          clients of the echo server (default 8, at most 1000)
      --virtual-seconds S  virtual time before the server drains (default 10, at most 86400)
    Prints `seed N`, the faults injected, `trace HEX` and `verdict ok` (exit 0) or `verdict failed: ...` (exit 1).
    """

/// The command line.
struct ChaosOptions {
    var seed: UInt64?
    var clients = 8
    var virtualTime: Duration = .seconds(10)
}

func parse(_ arguments: [String]) throws -> ChaosOptions {
    var options = ChaosOptions()
    var reader = ArgumentReader(arguments)
    while let argument = try reader.next() {
        switch argument {
        case "--seed":
            let text = try reader.value(for: argument)
            guard let seed = UInt64(text) else {
                throw UsageError("--seed needs a whole number from 0 to \(UInt64.max), got '\(text)'")
            }
            options.seed = seed
        case "--clients": options.clients = try reader.count(for: argument, in: 1...1_000)
        case "--virtual-seconds": options.virtualTime = try reader.seconds(for: argument)
        default: throw UsageError("unknown argument '\(argument)'")
        }
    }
    guard options.seed != nil else { throw UsageError("--seed is required") }
    return options
}

let options = parseCommandLine(program: "chaos", usage: usage, parse)
let outcome = ChaosRun(seed: options.seed!, clients: options.clients, virtualTime: options.virtualTime).run()
printLine("seed \(outcome.seed)")
printLine("clients \(options.clients): \(outcome.echoed) echoed, \(outcome.reportedErrors) ended with a reported error")
printLine("faults " + SimulationFault.swiftCode(outcome.faults))
printLine("trace \(outcome.trace)")
if outcome.failures.isEmpty {
    printLine("verdict ok")
    exit(0)
}
printLine("verdict failed: " + outcome.failures.joined(separator: "; "))
exit(1)
