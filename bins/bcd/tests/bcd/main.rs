//! bcd's integration tests, in one binary: the `bcd` binary as a process: its configuration errors and a dev server.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/bcd/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod bcd;
mod dev_server;
