//! bc-store: the sea-orm adapter of the bc-domain store ports, on SQLite and PostgreSQL,
//! plus the ChaCha20-Poly1305 `SecretBox`; with the `testing` feature, `testing` gives
//! every crate's tests a store per backend and the record builders.
//!
//! Invariant: the module contract of `bc_domain::ports::store` — a unit of work commits
//! entirely or not at all, every condition (fences included) is checked inside its own
//! transaction, events get a global `seq` in commit order, and no lookup reads more than
//! an index range.
//!
//! Why raw SQL through `Statement` rather than entities: every write here is a conditional
//! statement whose row count is the answer (CAS, quota booking, leases), and the queue
//! needs `FOR UPDATE SKIP LOCKED` / `UPDATE … RETURNING`; written once with `?` and
//! rendered per backend (`sql::stmt`), each statement stays visible and portable. The schema
//! itself is sea-orm-migration (`migration`).

mod budget;
mod error;
mod group;
pub mod migration;
mod queue;
mod repos;
mod rows;
mod secret;
mod sql;
mod stats;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod uow;

use async_trait::async_trait;
use bc_domain::ports::{Committed, Store, StoreResult, UnitOfWork};

pub use secret::AeadSecretBox;
pub use stats::{StoreStats, WriteStats, shape};
pub use store::{POSTGRES_ACQUIRE_TIMEOUT, SQLITE_ACQUIRE_TIMEOUT, SqlStore, StoreOptions};

#[async_trait]
impl Store for SqlStore {
    async fn commit(&self, uow: UnitOfWork) -> StoreResult<Committed> {
        if uow.is_empty() {
            return Ok(Committed::default());
        }
        self.commit_grouped(uow).await
    }

    async fn ready(&self) -> StoreResult<()> {
        self.check_ready().await
    }
}
