//! JSON Schemas (2020-12, the dialect of OpenAPI 3.1) of the methods' inputs and outputs,
//! derived from their types with schemars.
//!
//! Invariants: inputs are described as they are *deserialized* (optional means may be
//! left out), outputs as they are *serialized*, where an optional field is omitted when
//! unset and never `null` (SPEC §2), so its schema admits no `null`. Every subschema is
//! inlined, so a field's constraints sit with the field in the docs and in the checks.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::Value;

/// The schema of an input type, as deserialized.
pub fn input_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().for_deserialize().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    settings.into_generator().into_root_schema_for::<T>().to_value()
}

/// The schema of an output type, as serialized, with `null` removed from optional
/// properties (they are omitted instead).
pub fn output_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().for_serialize().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    omit_not_null(&mut schema);
    schema
}

/// The wire names of a struct's fields in declaration order (JSON Schema objects lose
/// it), read from what serde's derive hands its deserializer.
pub fn field_order<T: DeserializeOwned>() -> Vec<&'static str> {
    let mut fields = None;
    let _ = T::deserialize(FieldsProbe(&mut fields));
    fields.map(<[_]>::to_vec).unwrap_or_default()
}

/// A deserializer that only records the field list of the struct asked of it.
struct FieldsProbe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldsProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("field probe"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("field probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Removes `null` from the schema of every property not listed as required, and the
/// "not null" a rule across fields says of a property (an output holds no `null`).
fn omit_not_null(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("not") == Some(&serde_json::json!({ "type": "null" })) {
                map.remove("not");
            }
            let required: Vec<String> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    if !required.contains(name) {
                        drop_null(prop);
                    }
                }
            }
            for value in map.values_mut() {
                omit_not_null(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(omit_not_null),
        _ => {}
    }
}

/// `{"type": ["string","null"]}` → `{"type": "string"}`; `{"anyOf": [X, {"type":"null"}]}` → X.
fn drop_null(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    let is_null = |v: &Value| v.get("type").is_some_and(|t| t == "null");
    if let Some(Value::Array(branches)) = map.get("anyOf")
        && branches.len() == 2
        && let Some(keep) = branches.iter().position(|b| !is_null(b))
        && branches.iter().any(is_null)
    {
        let Some(Value::Object(kept)) = branches.get(keep).cloned() else { return };
        map.remove("anyOf");
        for (k, v) in kept {
            map.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::Serialize;

    #[derive(Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Out {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        inner: Option<Inner>,
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct In {
        tenant_id: String,
        pool_id: String,
        request_id: Option<String>,
    }

    #[test]
    fn field_order_is_the_declaration_order() {
        assert_eq!(field_order::<In>(), ["tenantId", "poolId", "requestId"]);
    }

    #[test]
    fn optional_outputs_are_never_null() {
        let s = output_schema::<Out>();
        assert_eq!(s["required"], serde_json::json!(["id"]));
        assert_eq!(s["properties"]["note"]["type"], "string");
        assert_eq!(s["properties"]["inner"]["type"], "object");
        assert!(!s.to_string().contains("null"), "{s}");
        assert!(!s.to_string().contains("$ref"), "{s}");
    }
}
