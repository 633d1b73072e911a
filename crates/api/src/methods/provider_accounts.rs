//! `providerAccounts.*` (SPEC §5): a tenant's accounts at providers, with write-only
//! credentials.

use bc_domain::model::{ProviderAccount, ProviderKind, SealedSecret};
use bc_domain::ports::{Permission, ProviderCredentials, UnitOfWork, Write};
use bc_domain::{ObjectName, ProviderAccountId, RequestId, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::{list_input, list_output, object_ref};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};
use crate::write::Created;

pub(crate) static PROVIDER_ACCOUNTS: Resource = Resource {
    name: "providerAccounts",
    page: "provider-accounts",
    module: "providers",
    description: "A provider account is a tenant's account at a cloud provider (DigitalOcean first), on which its Kubernetes clusters, node pools and load balancers are made. Its credentials are write-only: they are checked against the provider before the account is created, stored encrypted (AEAD, with a key from the server's secret key), and never returned by any method, log line or error. The provider's API URL is server configuration (`--digitalocean-api-url`), never tenant input.",
};

/// Input of `providerAccounts.create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderAccountsCreateInput {
    /// The tenant that will own the account.
    pub tenant_id: TenantId,
    /// The provider.
    pub provider: ProviderKind,
    /// Unique among the tenant's live accounts.
    pub name: ObjectName,
    /// `{token}`: checked against the provider, stored encrypted, never returned.
    pub credentials: ProviderCredentials,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default)]
    pub request_id: Option<RequestId>,
}

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
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }
}

object_ref!(
    /// Input of `providerAccounts.get` and `providerAccounts.delete`.
    ProviderAccountRef, provider_account_id: ProviderAccountId, ProviderAccount,
    "providerAccountId" = ex::ACCOUNT
);

list_input!(
    /// Input of `providerAccounts.list`.
    ProviderAccountsListInput {}
);

impl MethodInput for ProviderAccountsListInput {
    fn target(&self) -> Target {
        Target::list(&self.tenant_id, None)
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT })
    }
}

/// A provider account as the API shows it: never its credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ProviderAccount")]
pub struct ProviderAccountView {
    /// Id.
    pub provider_account_id: ProviderAccountId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Provider.
    pub provider: ProviderKind,
    /// Name.
    pub name: ObjectName,
    /// Created.
    pub created_at: Timestamp,
}

impl From<&ProviderAccount> for ProviderAccountView {
    fn from(a: &ProviderAccount) -> Self {
        Self {
            provider_account_id: a.provider_account_id.clone(),
            tenant_id: a.tenant_id.clone(),
            provider: a.provider,
            name: a.name.clone(),
            created_at: a.created_at,
        }
    }
}

list_output!(
    /// Output of `providerAccounts.list`.
    ProviderAccountsListOutput, provider_accounts, ProviderAccountView
);

pub(crate) fn methods() -> Vec<Method> {
    use Permission::{ProviderAccountsManage as Manage, ProviderAccountsRead as Read};
    use ResourceType::{ComputeTenant, ProviderAccount as OnAccount};
    vec![
        Method::declare::<ProviderAccountsCreateInput, Created<ProviderAccountView>>(
            PROVIDER_ACCOUNTS.method(
                "create",
                Kind::Write,
                Manage,
                ComputeTenant,
                "Checks credentials.token against the provider (a refused token is FAILED_PRECONDITION, and nothing is stored), then records the account and returns it: providerAccountId, tenantId, provider (digitalocean), name and createdAt, never the credentials. The name must be unique among the tenant's live accounts. A repeat with the same requestId and the same body within 24 hours returns the first account and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:provider-accounts:manage on the tenant.",
            ),
            create,
        ),
        Method::declare::<ProviderAccountRef, ProviderAccountView>(
            PROVIDER_ACCOUNTS.method(
                "get",
                Kind::Read,
                Read,
                OnAccount,
                "Returns the account: providerAccountId, tenantId, provider, name and createdAt; never its credentials. A deleted account, or one of another tenant, is NOT_FOUND. Decided as compute:provider-accounts:read on the account.",
            ),
            get,
        ),
        Method::declare::<ProviderAccountsListInput, ProviderAccountsListOutput>(
            PROVIDER_ACCOUNTS.method(
                "list",
                Kind::Read,
                Read,
                OnAccount,
                "Lists the tenant's live accounts that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain. Decided as compute:provider-accounts:read on each account.",
            ),
            list,
        ),
        Method::declare::<ProviderAccountRef, ProviderAccountView>(
            PROVIDER_ACCOUNTS.method(
                "delete",
                Kind::Write,
                Manage,
                OnAccount,
                "Deletes the account with its stored credentials and returns it. While Kubernetes clusters or load balancers remain on it, the call is FAILED_PRECONDITION: delete them first (a pool substrate's cluster goes when the pool is archived or its substrate removed). Decided as compute:provider-accounts:manage on the account.",
            ),
            delete,
        ),
    ]
}

async fn create(
    ctx: Ctx,
    call: Call<ProviderAccountsCreateInput>,
) -> Result<Created<ProviderAccountView>, ApiError> {
    let input = &call.input;
    let credentials = ProviderCredentials::new(input.credentials.token.clone())
        .map_err(|e| ApiError::invalid("credentials.token", e.to_string()))?;
    // The token is checked before anything is stored: a refused one leaves no account.
    let what = "checking credentials.token";
    let provider = ctx
        .providers
        .provider_for_token(input.provider, &credentials.token)
        .await
        .map_err(|e| ApiError::provider(what, &e))?;
    provider.check_credentials().await.map_err(|e| ApiError::provider(what, &e))?;
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
    let accounts = ctx.store.account_list(&input.tenant_id, call.access.scope()?, &page).await?;
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
