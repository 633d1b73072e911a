//! `providerAccounts.*` (SPEC §5): a tenant's accounts at providers, with write-only
//! credentials: the resource, its methods' wire types and their endpoints. Invariant:
//! optional input fields are left out when unset and output fields are read back as the
//! server writes them, so a type here round-trips through the wire; what a method does is
//! bc-api's.

use bc_domain::model::{ProviderAccount, ProviderKind};
use bc_domain::ports::{Permission, ProviderCredentials};
use bc_domain::{ObjectName, ProviderAccountId, RequestId, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use Permission::{ProviderAccountsManage as Manage, ProviderAccountsRead as Read};
use ResourceType::{ComputeTenant, ProviderAccount as OnAccount};

object_ref!(
    /// Input of `providerAccounts.get` and `providerAccounts.delete`.
    ProviderAccountRef, provider_account_id: ProviderAccountId
);

/// The resource.
pub static PROVIDER_ACCOUNTS: Resource = Resource {
    name: "providerAccounts",
    page: "provider-accounts",
    module: "providers",
    description: "A provider account is a tenant's account at a cloud provider — DigitalOcean (`digitalocean`: credentials `{token}`) or Google Kubernetes Engine (`gke`: credentials `{serviceAccountKey, projectId?}`, the text of a service-account key file; `projectId` defaults to the key's `project_id` and is shown on the account) — on which its Kubernetes clusters, node pools and load balancers are made. Its credentials are write-only: they are checked against the provider before the account is created, stored encrypted (AEAD, with a key from the server's secret key), and never returned by any method, log line or error. A GKE key's own `token_uri` is never used: access tokens are minted at the server's `--gcp-token-url`, cached per account until shortly before they expire, and never stored. The providers' URLs are server configuration (`--digitalocean-api-url`, `--gke-api-url`, `--gcp-token-url`), never tenant input. What each provider offers differs (GKE: standard and autopilot clusters, no load balancers yet; DigitalOcean: standard clusters, regional and global load balancers); a call a provider cannot serve is FAILED_PRECONDITION naming the provider. On GKE, names hold at most 40 characters, and a node pool's count is its total as everywhere, while GKE counts per zone: a node pool added to a regional cluster is placed in one of its zones, a zonal cluster's pools are in its zone, and a regional cluster's first node pools (made with it) spread over GKE's three default zones, so a fixed count there must be a multiple of three; autoscaled pools use GKE's pool-wide bounds.",
};

/// Input of `providerAccounts.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderAccountsCreateInput {
    /// The tenant that will own the account.
    pub tenant_id: TenantId,
    /// The provider.
    pub provider: ProviderKind,
    /// Unique among the tenant's live accounts.
    pub name: ObjectName,
    /// `{token}` (digitalocean) or `{serviceAccountKey, projectId?}` (gke): checked
    /// against the provider, stored encrypted, never returned.
    pub credentials: ProviderCredentials,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

list_input!(
    /// Input of `providerAccounts.list`.
    ProviderAccountsListInput {}
);

/// A provider account as the API shows it: never its credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    /// The Google Cloud project a `gke` account manages (its `credentials.projectId`, else
    /// the key's `project_id`); absent on other providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
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
            project_id: a.project_id.clone(),
            created_at: a.created_at,
        }
    }
}

list_output!(
    /// Output of `providerAccounts.list`.
    ProviderAccountsListOutput, provider_accounts, ProviderAccountView
);

create_input!(ProviderAccountsCreateInput);

endpoint!(
    /// `providerAccounts.create`.
    Create = PROVIDER_ACCOUNTS.method(
        "create",
        Kind::Write,
        Manage,
        ComputeTenant,
        "Checks the credentials against the provider — digitalocean: credentials.token; gke: credentials.serviceAccountKey (the key file's text: type service_account, client_email, private_key_id, an RSA private_key in PKCS#8 PEM) and an optional credentials.projectId, by minting an access token and listing the project's clusters — then records the account and returns it: providerAccountId, tenantId, provider (digitalocean or gke), name, projectId (gke) and createdAt, never the credentials. A malformed document is INVALID_ARGUMENT naming the field without quoting it; credentials the provider refuses are FAILED_PRECONDITION with its reason, and nothing is stored. The name must be unique among the tenant's live accounts. A repeat with the same requestId and the same body within 24 hours returns the first account and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:provider-accounts:manage on the tenant.",
    );
    ProviderAccountsCreateInput => ProviderAccountView
);

endpoint!(
    /// `providerAccounts.get`.
    Get = PROVIDER_ACCOUNTS.method(
        "get",
        Kind::Read,
        Read,
        OnAccount,
        "Returns the account: providerAccountId, tenantId, provider, name, projectId (gke) and createdAt; never its credentials. A deleted account, or one of another tenant, is NOT_FOUND. Decided as compute:provider-accounts:read on the account.",
    );
    ProviderAccountRef => ProviderAccountView
);

endpoint!(
    /// `providerAccounts.list`.
    List = PROVIDER_ACCOUNTS.method(
        "list",
        Kind::Read,
        Read,
        OnAccount,
        "Lists the tenant's live accounts that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain. Decided as compute:provider-accounts:read on each account.",
    );
    ProviderAccountsListInput => ProviderAccountsListOutput
);

endpoint!(
    /// `providerAccounts.delete`.
    Delete = PROVIDER_ACCOUNTS.method(
        "delete",
        Kind::Write,
        Manage,
        OnAccount,
        "Deletes the account with its stored credentials and returns it. While Kubernetes clusters or load balancers remain on it, the call is FAILED_PRECONDITION: delete them first (a pool substrate's cluster goes when the pool is archived or its substrate removed). Decided as compute:provider-accounts:manage on the account.",
    );
    ProviderAccountRef => ProviderAccountView
);
