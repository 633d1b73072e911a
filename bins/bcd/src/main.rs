//! `bcd`: the node agent. The binary is thin by design (flags, wiring, run); what it wires
//! together lands in a later issue, so for now it says so and exits non-zero rather than
//! pretending to run.

fn main() -> std::process::ExitCode {
    eprintln!(
        "bcd: not implemented yet; it runs the node agent once a later issue lands (see README.md)"
    );
    std::process::ExitCode::from(2)
}
