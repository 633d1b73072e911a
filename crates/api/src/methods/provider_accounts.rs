//! `providerAccounts.*` (SPEC §5): a tenant's accounts at providers, with write-only
//! credentials.

use bc_api_types::provider_accounts as api;
pub use bc_api_types::provider_accounts::*;

use bc_domain::ProviderAccountId;
use bc_domain::model::{ProviderAccount, SealedSecret};
use bc_domain::ports::{UnitOfWork, Write};
use serde_json::{Value, json};

use super::examples as ex;
use super::object_ref;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::AnswerPage;
use crate::page::AskedPage;
use crate::registry::{Call, Method, MethodInput};
use crate::write::Created;

impl MethodInput for ProviderAccountsCreateInput {
    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "provider": "digitalocean",
            "name": "main",
            "credentials": { "token": "dop_v1_0123456789abcdef" },
            "requestId": "main-account-1"
        })
    }
}

object_ref!(
    ProviderAccountRef, provider_account_id: ProviderAccountId, ProviderAccount, "providerAccountId" = ex::ACCOUNT
);

impl MethodInput for ProviderAccountsListInput {
    fn target(&self) -> Target {
        Target::list(&self.tenant_id, None)
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::Get, get),
        Method::declare(api::List, list),
        Method::declare(api::Delete, delete),
    ]
}

async fn create(
    ctx: Ctx,
    call: Call<ProviderAccountsCreateInput>,
) -> Result<Created<ProviderAccountView>, ApiError> {
    let input = &call.input;
    let credentials = input
        .credentials
        .check(input.provider)
        .map_err(|e| ApiError::invalid(e.field(), e.to_string()))?;
    // The credentials are checked before anything is stored: refused ones leave no account.
    let what = "checking the credentials";
    let provider = ctx
        .providers
        .provider_for_credentials(&credentials)
        .await
        .map_err(|e| ApiError::provider_refusal(what, &e))?;
    provider.check_credentials().await.map_err(|e| ApiError::provider_refusal(what, &e))?;
    let id: ProviderAccountId = ctx.new_id();
    // Sealed with the account id as associated data, exactly as
    // `ProviderCredentials::unseal` opens it: the ciphertext is useless on another row.
    let sealed = ctx
        .secrets
        .seal(&credentials.to_plaintext(), id.as_str().as_bytes())
        .map_err(|e| ApiError::internal(format!("sealing the credentials of {id}: {e}")))?;
    let account = ProviderAccount {
        provider_account_id: id,
        tenant_id: input.tenant_id.clone(),
        provider: input.provider,
        name: input.name.clone(),
        project_id: credentials.project_id().map(str::to_owned),
        credentials: SealedSecret(sealed),
        created_at: ctx.now(),
        deleted_at: None,
    };
    let view = ProviderAccountView::from(&account);
    ctx.commit_create(&call, UnitOfWork::new().write(Write::InsertAccount(account)), view).await
}

async fn get(_ctx: Ctx, call: Call<ProviderAccountRef>) -> Result<ProviderAccountView, ApiError> {
    Ok(ProviderAccountView::from(call.access.account()?))
}

async fn list(
    ctx: Ctx,
    call: Call<ProviderAccountsListInput>,
) -> Result<ProviderAccountsListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let mut accounts =
        ctx.store.account_list(&input.tenant_id, call.access.scope()?, &page).await?;
    let read = bc_domain::ports::Permission::ProviderAccountsRead;
    accounts.items = crate::access::readable_items(&ctx, &call.caller, read, accounts.items, |a| {
        Some(crate::access::Resolved::ProviderAccount(a.clone()).chain())
    });
    Ok(ProviderAccountsListOutput::of(call.method, accounts, |a| ProviderAccountView::from(&a)))
}

async fn delete(ctx: Ctx, call: Call<ProviderAccountRef>) -> Result<ProviderAccountView, ApiError> {
    let account = call.access.account()?;
    let write = Write::DeleteAccount {
        provider_account_id: account.provider_account_id.clone(),
        at: ctx.now(),
    };
    // The store refuses (FAILED_PRECONDITION, naming what remains) while clusters, load
    // balancers or substrates use the account, in the deleting statement itself.
    ctx.commit(UnitOfWork::new().write(write)).await?;
    Ok(ProviderAccountView::from(account))
}
