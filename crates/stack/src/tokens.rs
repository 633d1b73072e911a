//! Operator tokens: make one (printed once, stored as its hash), revoke one.
//!
//! Invariant: the plaintext exists only in the return value of [`create`]; the store
//! keeps the SHA-256 hash.

use bc_domain::TokenId;
use bc_domain::model::{ApiToken, Grant};
use bc_domain::ports::{Clock, Store, UnitOfWork, Write};
use bc_domain::token::ApiTokenSecret;

/// Stores a new token holding `grants`; returns its id and plaintext.
pub async fn create(
    store: &dyn Store,
    clock: &dyn Clock,
    grants: Vec<Grant>,
) -> anyhow::Result<(TokenId, String)> {
    let secret = ApiTokenSecret::generate(rand::random());
    let now = clock.now();
    let token_id = TokenId::generate(u64::try_from(now.unix_ms()).unwrap_or(0), rand::random());
    let token = ApiToken {
        token_id: token_id.clone(),
        token_hash: secret.hash(),
        grants,
        created_at: now,
        revoked_at: None,
    };
    store.commit(UnitOfWork::new().write(Write::InsertApiToken(token))).await?;
    Ok((token_id, secret.expose().to_owned()))
}

/// Revokes token `id`; `false` when there is no such token.
pub async fn revoke(store: &dyn Store, clock: &dyn Clock, id: &TokenId) -> anyhow::Result<bool> {
    let Some(token) = store.api_token_get(id).await? else { return Ok(false) };
    if token.revoked_at.is_none() {
        let at = clock.now();
        store
            .commit(UnitOfWork::new().write(Write::RevokeApiToken { token_id: id.clone(), at }))
            .await?;
    }
    Ok(true)
}

/// Whether `plaintext` is a live (stored, unrevoked) token.
pub async fn is_live(store: &dyn Store, plaintext: &str) -> anyhow::Result<bool> {
    let Ok(secret) = ApiTokenSecret::parse(plaintext.trim()) else { return Ok(false) };
    Ok(store.api_token_find(&secret.hash()).await?.is_some_and(|t| t.revoked_at.is_none()))
}
