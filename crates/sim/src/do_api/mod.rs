//! The DigitalOcean v2 HTTP face (placeholder).

use std::sync::Arc;

use crate::SimState;

/// The `/v2` routes.
pub fn router(_state: Arc<SimState>) -> axum::Router {
    axum::Router::new()
}
