//! The cloud model (placeholder until the model lands).

use crate::SimConfig;

/// The simulated cloud's state.
#[derive(Debug, Default)]
pub struct Model {}

impl Model {
    /// An empty cloud.
    pub fn new(_config: &SimConfig) -> Self {
        Self {}
    }
}
