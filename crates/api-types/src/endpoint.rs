//! What a method is to its callers: an [`Endpoint`] names the method's facts and its input
//! and output types, so the server binds a handler to exactly those types and a client
//! calls it with exactly those types.
//!
//! Invariant: a method's wire types are declared once, here; the server's registry is
//! made of these endpoints (a method cannot be served without one), and a client or the
//! CLI reaches every method through the same list ([`crate::catalogue`]).

use bc_domain::RequestId;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::meta::MethodInfo;

/// A method's input: serialized by callers, deserialized (unknown fields refused) and held
/// to its JSON Schema by the server.
pub trait Input: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// A create's `requestId`, if it carries one (SPEC §2).
    fn request_id(&self) -> Option<&RequestId> {
        None
    }

    /// A create's `requestId` field, for a caller to fill before the first attempt so a
    /// retried create never makes two objects; `None` for every other method.
    fn request_id_mut(&mut self) -> Option<&mut Option<RequestId>> {
        None
    }
}

/// A method's output: serialized by the server, deserialized by callers.
pub trait Output: Serialize + DeserializeOwned + JsonSchema + Send + 'static {}
impl<T: Serialize + DeserializeOwned + JsonSchema + Send + 'static> Output for T {}

/// One method of the API: its facts and its types.
pub trait Endpoint: Copy + Default + Send + Sync + 'static {
    /// What it takes.
    type Input: Input;
    /// What it answers (a create answers the object itself).
    type Output: Output;
    /// Its declared facts.
    const INFO: MethodInfo;
}

/// A method of the catalogue, its types erased: what a generic caller (the CLI) needs.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Its facts.
    pub info: MethodInfo,
    input_schema: fn() -> Value,
    input_fields: fn() -> Vec<&'static str>,
    reserialize: fn(&Value) -> Result<Value, String>,
}

/// `body` read as `I` and written back: what a client sends for that input.
fn reserialize<I: Input>(body: &Value) -> Result<Value, String> {
    let input: I = serde_json::from_value(body.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&input).map_err(|e| e.to_string())
}

impl Entry {
    /// The entry of endpoint `E`.
    pub fn of<E: Endpoint>() -> Self {
        Self {
            info: E::INFO,
            input_schema: crate::schema::input_schema::<E::Input>,
            input_fields: crate::schema::field_order::<E::Input>,
            reserialize: reserialize::<E::Input>,
        }
    }

    /// The input's JSON Schema, every subschema inlined.
    pub fn input_schema(&self) -> Value {
        (self.input_schema)()
    }

    /// The input's top-level fields in declaration order.
    pub fn input_fields(&self) -> Vec<&'static str> {
        (self.input_fields)()
    }

    /// `body` read as the input type and serialized again, as a client sends it.
    pub fn reserialize(&self, body: &Value) -> Result<Value, String> {
        (self.reserialize)(body)
    }
}

/// Declares an endpoint: a unit type naming a method's facts and its types.
macro_rules! endpoint {
    ($(#[$doc:meta])* $name:ident = $info:expr; $input:ty => $output:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl $crate::endpoint::Endpoint for $name {
            type Input = $input;
            type Output = $output;
            const INFO: $crate::meta::MethodInfo = $info;
        }
    };
}
pub(crate) use endpoint;

/// `impl Input` for a create's input: its `requestId` field is the idempotency key.
macro_rules! create_input {
    ($name:ty) => {
        impl $crate::endpoint::Input for $name {
            fn request_id(&self) -> Option<&bc_domain::RequestId> {
                self.request_id.as_ref()
            }
            fn request_id_mut(&mut self) -> Option<&mut Option<bc_domain::RequestId>> {
                Some(&mut self.request_id)
            }
        }
    };
}
pub(crate) use create_input;

/// A list answer: `{"<key>": [...], "nextPageToken"?}` (SPEC §2), the key being the
/// resource's path segment.
macro_rules! list_output {
    ($(#[$doc:meta])* $name:ident, $field:ident, $item:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// One page of items, by id.
            pub $field: Vec<$item>,
            /// Pass as `pageToken` for the next page; present while more remain.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub next_page_token: Option<$crate::page::PageToken>,
        }

        impl $crate::page::ListOutput for $name {
            type Item = $item;
            fn from_page(items: Vec<$item>, next: Option<$crate::page::PageToken>) -> Self {
                Self { $field: items, next_page_token: next }
            }
            fn into_page(self) -> (Vec<$item>, Option<$crate::page::PageToken>) {
                (self.$field, self.next_page_token)
            }
        }
    };
}
pub(crate) use list_output;

/// An input naming one object of a tenant, `{tenantId, <id>}`.
macro_rules! object_ref {
    ($(#[$doc:meta])* $name:ident, $field:ident: $id:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// The object's tenant.
            pub tenant_id: bc_domain::TenantId,
            /// The object.
            pub $field: $id,
        }

        impl $crate::endpoint::Input for $name {}
    };
}
pub(crate) use object_ref;

/// A list input (SPEC §2): `tenantId`, the list's own filters, `pageSize`, `pageToken`.
macro_rules! list_input {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// The tenant.
            pub tenant_id: bc_domain::TenantId,
            $($(#[$fdoc])* pub $field: $ty,)*
            /// Items per page.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub page_size: Option<$crate::page::PageSize>,
            /// `nextPageToken` of the previous page.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub page_token: Option<$crate::page::PageToken>,
        }

        impl $crate::endpoint::Input for $name {}

        impl $crate::page::ListInput for $name {
            fn page_token(&self) -> Option<&$crate::page::PageToken> {
                self.page_token.as_ref()
            }
            fn set_page_token(&mut self, token: Option<$crate::page::PageToken>) {
                self.page_token = token;
            }
            fn page_size(&self) -> Option<$crate::page::PageSize> {
                self.page_size
            }
        }
    };
}
pub(crate) use list_input;
