//! bc-reconciler's integration tests, in one binary: `bc-reconciler` as processes: chaos, random kills, lost answers and replicas on one PostgreSQL.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/reconciler/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod chaos;
mod common;
mod kills;
mod lost_answers;
mod replicas;
