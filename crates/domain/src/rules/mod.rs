//! The rules as pure functions: each takes what it decides on (and `now`) as arguments.

pub mod policy;
