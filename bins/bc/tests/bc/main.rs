//! bc-cli's integration tests, in one binary: the `bc` binary run as a user runs it: against a dev stack, where it takes its URL and token from, and the printed bc tour.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/bc/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod bc;
mod config_source;
mod help_text;
mod tour;
