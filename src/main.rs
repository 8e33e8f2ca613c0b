//! `trainplan`: the command line ([`trainplan::cli`]), on the process's arguments and stdout.

fn main() -> std::process::ExitCode {
    trainplan::cli::main()
}
