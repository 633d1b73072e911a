//! bc-api: the HTTP API of SPEC §2–§12 on the store, provider and authorization ports.
//!
//! Every method is declared once in the contract's registry ([`methods::registry`], with
//! the method framework of [`registry`] and the facts of bc-api-types); routing,
//! authentication ([`auth`]), input checks ([`check`]), authorization ([`access`],
//! [`authz`]), the OpenAPI document and the reference docs ([`docs`]) all come from that
//! declaration. Handlers work with the services of [`ctx`].
//! [`Api`] builds the axum router from the [`Ports`], with no globals, so a service can
//! serve it alone or mount it in its own app. Every write is one unit of work
//! ([`write`]); the event stream is [`stream`]; the web console's embedded assets are
//! [`console`].
//!
//! Invariant: no adapter type appears in this crate's public surface; everything it
//! touches outside itself is a bc-domain port.

pub mod access;
pub mod auth;
pub mod authz;
mod body;
pub mod check;
pub mod client_addr;
pub mod console;
pub mod ctx;
pub mod docs;
pub mod error;
mod idempotency;
mod ids;
pub mod list_cache;
pub mod methods;
pub mod metrics;
pub mod page;
pub mod ratelimit;
pub mod registry;
pub mod service;
pub mod stream;
pub mod write;

use bc_api_types::schema;

pub use access::{Access, Resolved, Target};
pub use auth::Caller;
pub use authz::CedarAuthorizer;
pub use ctx::{Ctx, DEFAULT_PUBLIC_URL, Services, Settings};
pub use error::ApiError;
pub use methods::registry;
pub use registry::{Call, Method, MethodInfo, MethodInput};
pub use service::{Api, Ports};
pub use write::Created;

/// The version the reference docs name ("served by bc-api <version>").
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
