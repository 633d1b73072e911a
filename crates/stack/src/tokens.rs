//! Operator tokens: make one (printed once, stored as its hash), revoke one, list them
//! (ids and grants, never a hash).
//!
//! Invariant: the plaintext exists only in the return value of [`create`]; the store
//! keeps the SHA-256 hash.

use bc_domain::TokenId;
use bc_domain::model::{ApiToken, Grant};
use bc_domain::ports::{Clock, PageRequest, Store, UnitOfWork, Write};
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

/// One line per token, oldest id first: its id, `active` or `revoked`, when it was made and
/// its grants (`role@scope`). The hash is not shown: it is the token's only stored form.
pub async fn list(store: &dyn Store) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut page = PageRequest::first(500);
    loop {
        let got = store.api_token_sweep(&page).await?;
        for t in got.items {
            let state = if t.revoked_at.is_some() { "revoked" } else { "active" };
            let grants: Vec<String> = t
                .grants
                .iter()
                .map(|g| {
                    let role = serde_json::to_value(g.role).ok();
                    let role = role.as_ref().and_then(|r| r.as_str()).unwrap_or("?").to_owned();
                    format!("{role}@{}", g.scope.to_scope_string())
                })
                .collect();
            lines.push(format!(
                "{}  {state:<7}  {}  {}",
                t.token_id,
                t.created_at.to_rfc3339(),
                grants.join(",")
            ));
        }
        match got.next {
            Some(next) => page = PageRequest { after: Some(next), limit: 500 },
            None => return Ok(lines),
        }
    }
}
