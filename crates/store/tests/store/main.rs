//! bc-store's integration tests, in one binary: the store: every repository method and write, the reads, grouped calls, and migrations from several processes at once.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/store/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod groups;
mod migrate;
mod reads;
mod store;
