//! `providerAccounts.*` (SPEC §5): a tenant's accounts at providers, with write-only
//! credentials.

use std::borrow::Cow;
use std::fmt;

use bc_domain::model::{ProviderAccount, ProviderKind, SecretString};
use bc_domain::ports::Permission;
use bc_domain::{ObjectName, ProviderAccountId, RequestId, TenantId, Timestamp};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::{list_input, list_output, not_served, object_ref};
use crate::access::Target;
use crate::registry::{Kind, Method, MethodInput, Resource, ResourceType};

pub(crate) static PROVIDER_ACCOUNTS: Resource = Resource {
    name: "providerAccounts",
    page: "provider-accounts",
    module: "providers",
    description: "A provider account is a tenant's account at a cloud provider (DigitalOcean first), on which its Kubernetes clusters, node pools and load balancers are made. Its credentials are write-only: they are checked against the provider before the account is created, stored encrypted (AEAD, with a key from the server's secret key), and never returned by any method, log line or error. The provider's API URL is server configuration (`--digitalocean-api-url`), never tenant input.",
};

/// Most characters of a provider token.
const TOKEN_MAX: usize = 1024;

/// A secret given in a request: never printed, never serialized.
pub struct SecretInput(pub SecretString);

impl fmt::Debug for SecretInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<'de> Deserialize<'de> for SecretInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s.len() > TOKEN_MAX {
            // The value itself is never echoed.
            return Err(serde::de::Error::custom(format!("must be 1 to {TOKEN_MAX} characters")));
        }
        Ok(SecretInput(SecretString::new(s)))
    }
}

impl JsonSchema for SecretInput {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Secret")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "minLength": 1, "maxLength": TOKEN_MAX, "writeOnly": true })
    }
}

/// The credentials of an account (write-only).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Credentials {
    /// The provider's API token.
    pub token: SecretInput,
}

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
    /// Checked against the provider, stored encrypted, never returned.
    pub credentials: Credentials,
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
            "credentials": { "token": "dop_v1_0123456789abcdef" }
        })
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
        Method::declare::<ProviderAccountsCreateInput, ProviderAccountView>(
            PROVIDER_ACCOUNTS.method(
                "create",
                Kind::Write,
                Manage,
                ComputeTenant,
                "Checks credentials.token against the provider (a refused token is FAILED_PRECONDITION, and nothing is stored), then records the account and returns it: providerAccountId, tenantId, provider (digitalocean), name and createdAt, never the credentials. The name must be unique among the tenant's live accounts. A repeat with the same requestId and the same body within 24 hours returns the first account and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:provider-accounts:manage on the tenant.",
            ),
            not_served,
        ),
        Method::declare::<ProviderAccountRef, ProviderAccountView>(
            PROVIDER_ACCOUNTS.method(
                "get",
                Kind::Read,
                Read,
                OnAccount,
                "Returns the account: providerAccountId, tenantId, provider, name and createdAt; never its credentials. A deleted account, or one of another tenant, is NOT_FOUND. Decided as compute:provider-accounts:read on the account.",
            ),
            not_served,
        ),
        Method::declare::<ProviderAccountsListInput, ProviderAccountsListOutput>(
            PROVIDER_ACCOUNTS.method(
                "list",
                Kind::Read,
                Read,
                OnAccount,
                "Lists the tenant's live accounts that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain. Decided as compute:provider-accounts:read on each account.",
            ),
            not_served,
        ),
        Method::declare::<ProviderAccountRef, ProviderAccountView>(
            PROVIDER_ACCOUNTS.method(
                "delete",
                Kind::Write,
                Manage,
                OnAccount,
                "Deletes the account with its stored credentials and returns it. While Kubernetes clusters or load balancers remain on it, the call is FAILED_PRECONDITION: delete them first (a pool substrate's cluster goes when the pool is archived or its substrate removed). Decided as compute:provider-accounts:manage on the account.",
            ),
            not_served,
        ),
    ]
}
