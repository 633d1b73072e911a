//! JSON Schemas of the validated types (feature `schema`), for bc-api's OpenAPI document,
//! reference docs and input checks.
//!
//! Invariant: every schema here is built from the very constants its type's parser uses
//! (`TENANT_ID_PATTERN`, `ID_BODY_PATTERN`, …), so the constraint the docs print and the
//! constraint a request is held to are one fact. Each schema is inlined where used: the
//! docs print a field's constraints beside the field, not behind a reference.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::id::{Id, IdKind};
use crate::model::SecretString;
use crate::name::{
    FLAVOR_NAME_MAX, FlavorName, LABEL_KEY_NAME_MAX, LABEL_KEY_PREFIX_MAX, LABEL_VALUE_MAX,
    LABEL_VALUE_PATTERN, LabelKey, LabelValue, NAME_PATTERN, OBJECT_NAME_MAX, ObjectName,
    ProviderSlug, REQUEST_ID_MAX, REQUEST_ID_PATTERN, RequestId, SLUG_MAX, SLUG_PATTERN,
    TENANT_ID_MAX, TENANT_ID_PATTERN, TenantId, label_key_pattern,
};
use crate::time::{TIMESTAMP_MAX, Timestamp};

/// A string schema with a length cap and a pattern.
fn capped(max: usize, pattern: &str) -> Schema {
    json_schema!({ "type": "string", "maxLength": max, "pattern": pattern })
}

/// `pool id` → `PoolId`: a schema name from a kind's noun.
fn camel_name(noun: &str) -> String {
    noun.split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

impl<K: IdKind> JsonSchema for Id<K> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(camel_name(K::NOUN))
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        capped(Self::max_len(), &Self::pattern())
    }
}

macro_rules! string_schema {
    ($($ty:ident => $body:expr;)*) => {$(
        impl JsonSchema for $ty {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                $body
            }
        }
    )*};
}

string_schema! {
    TenantId => capped(TENANT_ID_MAX, TENANT_ID_PATTERN);
    ObjectName => capped(OBJECT_NAME_MAX, NAME_PATTERN);
    FlavorName => capped(FLAVOR_NAME_MAX, NAME_PATTERN);
    RequestId => capped(REQUEST_ID_MAX, REQUEST_ID_PATTERN);
    ProviderSlug => capped(SLUG_MAX, SLUG_PATTERN);
    LabelValue => capped(LABEL_VALUE_MAX, LABEL_VALUE_PATTERN);
    LabelKey => {
        let mut s = capped(LABEL_KEY_PREFIX_MAX + 1 + LABEL_KEY_NAME_MAX, &label_key_pattern());
        s.insert(
            "description".into(),
            format!(
                "a Kubernetes label key: an optional DNS-subdomain prefix of at most \
                 {LABEL_KEY_PREFIX_MAX} characters and `/`, then a name of at most \
                 {LABEL_KEY_NAME_MAX} characters"
            )
            .into(),
        );
        s
    };
    Timestamp => json_schema!({ "type": "string", "format": "date-time", "maxLength": TIMESTAMP_MAX });
    SecretString => json_schema!({ "type": "string" });
}

impl JsonSchema for crate::rules::billing::UsageLine {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("UsageLine")
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        crate::rules::billing::UsageLineWire::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::PoolId;

    #[test]
    fn schemas_carry_the_parsers_constants() {
        let pool = schemars::schema_for!(PoolId);
        assert_eq!(pool.get("pattern").unwrap(), "^pool_[0-9a-hjkmnp-tv-z]{26,52}$");
        assert_eq!(pool.get("maxLength").unwrap(), 57);
        let tenant = schemars::schema_for!(TenantId);
        assert_eq!(tenant.get("pattern").unwrap(), "^[A-Za-z0-9._:-]{1,128}$");
        assert_eq!(tenant.get("maxLength").unwrap(), 128);
        let cluster = schemars::schema_for!(crate::id::ClusterId);
        assert_eq!(cluster.get("maxLength").unwrap(), "cluster_".len() + 52);
        assert_eq!(camel_name("provider account id"), "ProviderAccountId");
    }

    #[test]
    fn secrets_carry_their_documented_bounds() {
        use crate::agent::{JoinRequest, NODE_NAME_PATTERN};
        use crate::ports::{PROVIDER_TOKEN_PATTERN, ProviderCredentials};
        let join = schemars::schema_for!(JoinRequest);
        let props = join.get("properties").unwrap();
        assert_eq!(props["nodeName"]["pattern"], NODE_NAME_PATTERN);
        assert_eq!(props["joinToken"]["minLength"], 1);
        assert_eq!(props["joinToken"]["maxLength"], 256);
        let creds = schemars::schema_for!(ProviderCredentials);
        let token = &creds.get("properties").unwrap()["token"];
        assert_eq!(token["pattern"], PROVIDER_TOKEN_PATTERN);
        assert_eq!(token["writeOnly"], true);
    }
}
