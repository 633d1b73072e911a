//! `bc-api`: the HTTP API and dev mode (serve | dev | migrate | token). The binary is thin by design (flags, wiring, run); what it wires
//! together lands in a later issue, so for now it says so and exits non-zero rather than
//! pretending to run.

fn main() -> std::process::ExitCode {
    eprintln!(
        "bc-api: not implemented yet; it runs the HTTP API and dev mode (serve | dev | migrate | token) once a later issue lands (see README.md)"
    );
    std::process::ExitCode::from(2)
}
