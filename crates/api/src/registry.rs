//! The method framework: how a method is declared — its endpoint (bc-api-types: name,
//! kind, authorization, module, phase, status, description, input and output types) and
//! its handler — and the pipeline every call of it runs (parse, check, authorize, replay a
//! `requestId`, handle, serialize); a [`Registry`] of declared methods, from which
//! routing, OpenAPI and the reference docs are derived. The contract's own registry is
//! [`crate::methods::registry`], above this framework.
//!
//! Invariants: a method is one [`Method::declare`] call; its input and output JSON Schemas
//! are derived from its types, and the input schema is both what the docs print and what
//! a request is held to ([`crate::check`]); no handler runs before its input parsed, met
//! its constraints and was authorized for the caller (see [`Method::run`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use bc_api_types::endpoint::{Endpoint, Input};
pub use bc_api_types::meta::{
    AlsoAuthorization, Authorization, Kind, MethodId, MethodInfo, PHASE, Resource, ResourceType,
    STATUS,
};
use bc_domain::{Error as DomainError, FieldViolation};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::access::{self, Access, Resolved, Target};
use crate::auth::Caller;
use crate::check::Checker;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::idempotency::{Before, Idempotency, Recorded, at_commit, before_create, recorded};
use crate::schema;

/// A method's input as the server holds it: a bc-api-types [`Input`] (a serde type with
/// `deny_unknown_fields` whose JSON Schema states its field constraints, and a create's
/// `requestId`), plus what the schema cannot say.
pub trait MethodInput: Input {
    /// What the call acts on, for authorization (SPEC §3): the tenant, an object of it,
    /// or a list in it.
    fn target(&self) -> Target;

    /// Constraints across fields (exactly one of two, min ≤ max, unique names), each
    /// with its JSON path; called only once every field met its own constraints.
    fn validate(&self) -> Vec<FieldViolation> {
        Vec::new()
    }

    /// A valid input, naming the objects of the docs' example tenant (`crate::examples`):
    /// shown in OpenAPI and sent by the registry-wide tests.
    fn example() -> Value;

    /// The further authorizations calls of this input may need, declared once for the
    /// docs and the pipeline (SPEC §3: ids named in a body besides the target); empty for
    /// most methods.
    const ALSO: &'static [AlsoAuthorization] = &[];

    /// The objects this call also acts on, each with the rule of [`MethodInput::ALSO`]
    /// that applies to it (a pool's policy with a substrate names its account; a load
    /// balancer's pool and target load balancers): authorized in order after the method's
    /// own authorization, before the handler ([`Call::also`]).
    fn also(&self) -> Vec<(AlsoAuthorization, Target)> {
        Vec::new()
    }

    /// For a create with a `requestId`: whether a repeat is recognised when its unit of
    /// work commits (the record of its answer is the unit's first write, and a live one
    /// answers as the first call did, or refuses another body) instead of by a read
    /// before the handler runs — one read fewer per create. Only for a handler that does
    /// nothing outside its unit of work before it commits (no provider call, no write of
    /// its own: running it for a repeat makes and calls nothing). When such a handler
    /// fails, the record is read then, so a repeat still gets the first answer where the
    /// handler would now refuse (SPEC §2); another body is still `ALREADY_EXISTS`.
    const REPLAY_AT_COMMIT: bool = false;
}

/// What a handler of a method with output `O` answers: `O` itself, or for a create
/// [`Created`](crate::write::Created) of it (the object made now, or the first answer to
/// the same request; that implementation is beside the type, so the framework does not
/// import the write path).
pub trait Answer<O>: Serialize + Send + 'static {}
impl<O: Serialize + Send + 'static> Answer<O> for O {}
impl<O: Serialize + Send + 'static> Answer<O> for crate::list_cache::PageJson<O> {}

/// What a handler gets besides the services: the parsed input, who called, and what the
/// authorization found (the object looked up, or a list's readable scope).
#[derive(Debug)]
pub struct Call<I> {
    /// The input, parsed and checked.
    pub input: I,
    /// The authenticated caller.
    pub caller: Caller,
    /// What the caller was allowed, with the records looked up to decide it.
    pub access: Access,
    /// The objects the call also acts on ([`MethodInput::also`]), looked up and
    /// authorized, in the order `also` named them.
    pub also: Vec<Resolved>,
    /// The method called.
    pub method: MethodId,
    /// For a create with a `requestId` not seen before: the key its answer is stored
    /// under ([`Ctx::commit_create`]).
    pub idempotency: Option<Idempotency>,
}

/// A method's handler: an async function of the services and the call.
pub trait Handler<I, O>: Send + Sync + 'static {
    /// Runs the method.
    fn call(&self, ctx: Ctx, call: Call<I>) -> BoxFuture<'static, Result<O, ApiError>>;
}

impl<I, O, F, Fut> Handler<I, O> for F
where
    F: Fn(Ctx, Call<I>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ApiError>> + Send + 'static,
{
    fn call(&self, ctx: Ctx, call: Call<I>) -> BoxFuture<'static, Result<O, ApiError>> {
        Box::pin(self(ctx, call))
    }
}

/// The type-erased pipeline of one method: parsed body in, serialized answer out.
type Run =
    Arc<dyn Fn(Ctx, Caller, Value) -> BoxFuture<'static, Result<Vec<u8>, ApiError>> + Send + Sync>;

/// The type-erased input check of one method: parsed body in, its target out.
type TargetOf = Arc<dyn Fn(&Value) -> Result<Target, ApiError> + Send + Sync>;

/// The type-erased field checks of one method (serde and the schema, no cross-field rule).
type FieldsOf = Arc<dyn Fn(&Value) -> Result<(), ApiError> + Send + Sync>;

/// Parses a body into a method's input and holds it to every input rule: serde (types,
/// unknown fields, the validated newtypes), the schema's documented constraints, then the
/// input's own cross-field rules. One function, for serving and for [`Method::check`].
fn parse_input<I: MethodInput>(checker: &Checker, body: &Value) -> Result<I, ApiError> {
    let input = parse_fields::<I>(checker, body)?;
    let violations = input.validate();
    if violations.is_empty() {
        Ok(input)
    } else {
        Err(DomainError::from_violations(&violations).into())
    }
}

/// The first two steps of [`parse_input`]: serde and the schema's constraints, each
/// field on its own.
fn parse_fields<I: MethodInput>(checker: &Checker, body: &Value) -> Result<I, ApiError> {
    let input: I = crate::body::deserialize(body)?;
    let violations = checker.violations(body);
    if violations.is_empty() {
        Ok(input)
    } else {
        Err(DomainError::from_violations(&violations).into())
    }
}

/// A create replayed at commit whose handler failed with `failed`: the first answer when
/// a live record of the same request exists, `ALREADY_EXISTS` for another body, else
/// `failed` (also when the record cannot be read: the handler's error is the one to tell).
async fn replay_after_failure(
    ctx: &Ctx,
    key: &Idempotency,
    failed: ApiError,
) -> Result<Vec<u8>, ApiError> {
    match recorded(ctx, key).await {
        Ok(Recorded::First(first)) => answer(key.method, &first),
        Ok(Recorded::OtherBody(reused)) => Err(reused),
        Ok(Recorded::Nothing) | Err(_) => Err(failed),
    }
}

/// A method's answer as the bytes of its JSON.
fn answer<T: Serialize>(method: MethodId, output: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(output)
        .map_err(|e| ApiError::internal(format!("{method}: serializing the answer: {e}")))
}

/// A declared method.
pub struct Method {
    /// Its facts.
    pub info: MethodInfo,
    input_name: String,
    input_fields: Vec<&'static str>,
    output_name: String,
    input: Arc<Checker>,
    output_schema: Value,
    example: Value,
    also: &'static [AlsoAuthorization],
    run: Run,
    target: TargetOf,
    fields: FieldsOf,
}

impl fmt::Debug for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Method").field("info", &self.info).finish_non_exhaustive()
    }
}

impl Method {
    /// Declares a method: its endpoint (facts and types, bc-api-types') and its handler,
    /// which answers the endpoint's output (or, for a create,
    /// [`Created`](crate::write::Created) of it).
    pub fn declare<E, R>(_: E, handler: impl Handler<E::Input, R>) -> Self
    where
        E: Endpoint,
        E::Input: MethodInput,
        R: Answer<E::Output>,
    {
        Self::declare_custom::<E::Input, E::Output, R>(E::INFO, handler)
    }

    /// Declares a method that is no endpoint of the catalogue (a service's own registry,
    /// the tests' probes): its facts, input `I`, output `O`, and the handler's answer `R`.
    pub fn declare_custom<I: MethodInput, O: JsonSchema, R: Answer<O>>(
        info: MethodInfo,
        handler: impl Handler<I, R>,
    ) -> Self {
        let input = Arc::new(Checker::new(schema::input_schema::<I>()));
        let checker = input.clone();
        let handler = Arc::new(handler);
        let run: Run = Arc::new(move |ctx, caller, body| {
            let checker = checker.clone();
            let handler = handler.clone();
            Box::pin(async move {
                let input: I = parse_input(&checker, &body)?;
                let target = input.target();
                let tenant = target.tenant().cloned();
                let access = access::authorize(&ctx, &info, &caller, target).await?;
                let mut also = Vec::new();
                for (rule, object) in input.also() {
                    if !I::ALSO.contains(&rule) {
                        return Err(ApiError::internal(format!(
                            "registry: {}: an undeclared second authorization",
                            info.id()
                        )));
                    }
                    also.push(access::authorize_also(&ctx, &info, &caller, rule, object).await?);
                }
                let mut idempotency = None;
                if let (Some(request_id), Some(tenant)) = (input.request_id().cloned(), tenant) {
                    if I::REPLAY_AT_COMMIT {
                        idempotency = Some(at_commit(tenant, info.id(), request_id, &body));
                    } else {
                        match before_create(&ctx, tenant, info.id(), request_id, &body).await? {
                            Before::Answered(first) => return answer(info.id(), &first),
                            Before::Run(key) => idempotency = Some(key),
                        }
                    }
                }
                let replayable = idempotency.clone().filter(|_| I::REPLAY_AT_COMMIT);
                let call = Call { input, caller, access, also, method: info.id(), idempotency };
                match handler.call(ctx.clone(), call).await {
                    Ok(output) => answer(info.id(), &output),
                    Err(e) => match replayable {
                        Some(key) => replay_after_failure(&ctx, &key, e).await,
                        None => Err(e),
                    },
                }
            })
        });
        let checker = input.clone();
        let target: TargetOf =
            Arc::new(move |body| parse_input::<I>(&checker, body).map(|i| i.target()));
        let checker = input.clone();
        let fields: FieldsOf = Arc::new(move |body| parse_fields::<I>(&checker, body).map(drop));
        Self {
            info,
            input_name: I::schema_name().into_owned(),
            input_fields: schema::field_order::<I>(),
            output_name: O::schema_name().into_owned(),
            input,
            output_schema: schema::output_schema::<O>(),
            example: I::example(),
            also: I::ALSO,
            run,
            target,
            fields,
        }
    }

    /// Runs the method on a parsed body for an authenticated caller: parse, check,
    /// authorize, handle, serialize.
    pub fn run(
        &self,
        ctx: Ctx,
        caller: Caller,
        body: Value,
    ) -> BoxFuture<'static, Result<Vec<u8>, ApiError>> {
        (self.run)(ctx, caller, body)
    }

    /// Holds a parsed body to every input rule, as serving does, and returns what the
    /// call would act on (no authorization, no handler).
    pub fn check(&self, body: &Value) -> Result<Target, ApiError> {
        (self.target)(body)
    }

    /// Holds a parsed body to each field's own rules only (its type and its documented
    /// constraints), not the rules across fields: what a field's documented pattern
    /// promises is exactly what this accepts.
    pub fn check_fields(&self, body: &Value) -> Result<(), ApiError> {
        (self.fields)(body)
    }

    /// The input's JSON Schema (every subschema inlined).
    pub fn input_schema(&self) -> &Value {
        self.input.schema()
    }

    /// The documented constraints `body` violates (what [`Method::run`] refuses).
    pub fn input_violations(&self, body: &Value) -> Vec<FieldViolation> {
        self.input.violations(body)
    }

    /// The input's top-level fields in declaration order.
    pub fn input_fields(&self) -> &[&'static str] {
        &self.input_fields
    }

    /// The output's JSON Schema.
    pub fn output_schema(&self) -> &Value {
        &self.output_schema
    }

    /// The input type's schema name (an OpenAPI component).
    pub fn input_name(&self) -> &str {
        &self.input_name
    }

    /// The output type's schema name (an OpenAPI component).
    pub fn output_name(&self) -> &str {
        &self.output_name
    }

    /// A valid example input.
    pub fn example(&self) -> &Value {
        &self.example
    }

    /// The further authorizations its calls may need ([`MethodInput::ALSO`]).
    pub fn also_authorization(&self) -> &'static [AlsoAuthorization] {
        self.also
    }
}

/// Every declared method, in the docs' order.
pub struct Registry {
    methods: Vec<Method>,
    index: HashMap<(&'static str, &'static str), usize>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.methods.iter().map(|m| m.info.id())).finish()
    }
}

impl Registry {
    /// A registry of `methods`.
    ///
    /// # Panics
    ///
    /// When two methods share a path: a declaration bug, caught by every test.
    pub fn new(methods: Vec<Method>) -> Self {
        let mut index = HashMap::new();
        for (i, m) in methods.iter().enumerate() {
            let previous = index.insert((m.info.resource.name, m.info.name), i);
            assert!(previous.is_none(), "{} is declared twice", m.info.id());
        }
        Self { methods, index }
    }

    /// Every method.
    pub fn methods(&self) -> &[Method] {
        &self.methods
    }

    /// The method at `/api/compute/<resource>/<name>`.
    pub fn find(&self, resource: &str, name: &str) -> Option<&Method> {
        self.index.get(&(resource, name)).map(|&i| &self.methods[i])
    }

    /// The resources, each once, in declaration order.
    pub fn resources(&self) -> Vec<&'static Resource> {
        let mut out: Vec<&'static Resource> = Vec::new();
        for m in &self.methods {
            if !out.iter().any(|r| r.name == m.info.resource.name) {
                out.push(m.info.resource);
            }
        }
        out
    }

    /// The methods of one resource.
    pub fn of(&self, resource: &Resource) -> impl Iterator<Item = &Method> {
        self.methods.iter().filter(move |m| m.info.resource.name == resource.name)
    }
}

#[cfg(test)]
mod tests {
    use crate::methods::registry;

    /// Every endpoint bc-api-types declares is served, in the same order, and nothing
    /// else is: a method added to the catalogue without a handler (or the reverse) fails
    /// here, so the client and the CLI, which call the catalogue, reach exactly the server.
    #[test]
    fn the_registry_serves_exactly_the_catalogue() {
        let served: Vec<String> =
            registry().methods().iter().map(|m| m.info.id().to_string()).collect();
        let declared: Vec<String> =
            bc_api_types::catalogue().iter().map(|e| e.info.id().to_string()).collect();
        assert_eq!(served, declared);
    }

    /// What a client sends is what the server accepts: each method's example, read into
    /// its input type and serialized again (unset options left out, not `null`), passes
    /// every input rule of the method.
    #[test]
    fn every_input_serialized_by_a_client_is_accepted() {
        for method in registry().methods() {
            let id = method.info.id().to_string();
            let entry = bc_api_types::find(&id).expect("in the catalogue");
            let sent = entry.reserialize(method.example()).expect("the example reads");
            assert!(!sent.to_string().contains("null"), "{id}: {sent}");
            if let Err(e) = method.check(&sent) {
                panic!("{id}: {sent} is refused: {e:?}");
            }
        }
    }
}
