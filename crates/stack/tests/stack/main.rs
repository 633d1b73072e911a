//! bc-stack's integration tests, in one binary: a dev stack end to end through its HTTP API: the printed tour, adopt mode, load, restarts, PostgreSQL stopped under load, the console in a real browser, and the security checks (provider URLs, no plaintext secret at rest or in logs, timeouts, an unwritable SQLite).
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/stack/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod adopt;
mod api_budget;
mod console;
mod console_load;
mod dev_files;
mod e2e;
mod gke;
mod linger;
mod load;
mod postgres_restart;
mod provider_neutral;
mod provider_urls;
mod restart;
mod secret_scan;
mod sqlite_not_writable;
mod timeouts;
