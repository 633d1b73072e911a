//! bc-client: a typed async client of the Better Compute API (SPEC §2–§12) over reqwest.
//!
//! Every method of the server's registry is an [`Endpoint`] of [`api`] (bc-api-types, the
//! crate the server declares its methods in), so a method added there is callable here
//! with no client code, and with the server's own input and output types:
//!
//! ```no_run
//! use bc_client::api::pools::{self, PoolsListInput};
//! use bc_client::api::substrates::{self, KubernetesSubstratesGetInput};
//! use bc_client::{Client, Error};
//! use futures::TryStreamExt;
//!
//! # async fn run() -> Result<(), Error> {
//! let client = Client::new("http://127.0.0.1:8080", "bc_tok_…")?;
//! let tenant = "dev".parse().expect("a tenant id");
//!
//! // Every page of a list, as one stream.
//! let input = PoolsListInput {
//!     tenant_id: tenant,
//!     include_archived: false,
//!     page_size: None,
//!     page_token: None,
//! };
//! let pools: Vec<_> = client.list(pools::List, input).try_collect().await?;
//!
//! // One call: the input and output types are the server's.
//! for pool in &pools {
//!     let input = KubernetesSubstratesGetInput {
//!         tenant_id: pool.tenant_id.clone(),
//!         pool_id: pool.pool_id.clone(),
//!     };
//!     match client.call(substrates::Get, input).await {
//!         Ok(substrate) => println!("{}: {}", pool.name, substrate.state.as_str()),
//!         Err(e) if e.code() == Some(bc_client::ErrorCode::NotFound) => {}
//!         Err(e) => return Err(e),
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! What every call does: `POST /api/compute/<resource>/<method>` with the bearer token; an
//! error answer becomes [`Error::Api`] with the API's `{code, message, field}`; `429` and
//! `503` are retried after the `Retry-After` the server sent, a bounded number of times
//! ([`Retry`]); a create without a `requestId` gets one before its first attempt, so a
//! retried create never makes two objects. [`Client::list`] pages through a whole list;
//! [`Client::events`] follows the event stream and resumes with `Last-Event-ID` after a
//! dropped connection.
//!
//! Invariant: the token only ever travels in the `Authorization` header; no error, log
//! line or `Debug` output of this crate carries it.

mod error;
mod events;

use std::fmt;
use std::time::Duration;

use bc_api_types::endpoint::{Endpoint, Input};
use bc_api_types::meta::MethodInfo;
use bc_api_types::page::{ListInput, ListOutput};
use bc_domain::RequestId;
use futures::Stream;
use reqwest::StatusCode;
use serde::Serialize;
use serde_json::Value;

pub use bc_api_types as api;
pub use bc_domain::ErrorCode;
pub use error::{ApiError, Error};
pub use events::EventStream;

/// How calls answered `429 RESOURCE_EXHAUSTED` or `503 UNAVAILABLE` are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, the first one included (1: never retry).
    pub attempts: u32,
    /// The longest single wait; a longer `Retry-After` is not waited for (the error is
    /// returned instead).
    pub max_wait: Duration,
    /// The wait when the answer has no `Retry-After`.
    pub default_wait: Duration,
}

impl Default for Retry {
    /// 5 attempts, waits of at most 30 s, 1 s when the server names none.
    fn default() -> Self {
        Self {
            attempts: 5,
            max_wait: Duration::from_secs(30),
            default_wait: Duration::from_secs(1),
        }
    }
}

/// A client of one API server, as one caller (its token).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    retry: Retry,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .finish()
    }
}

/// Installs ring as rustls' crypto provider once (the workspace's reqwest brings none).
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Client {
    /// A client of the server at `api_url` (`http://127.0.0.1:8080`) calling with API
    /// token `token`.
    pub fn new(api_url: &str, token: &str) -> Result<Self, Error> {
        Self::builder(api_url).token(token).build()
    }

    /// A client to configure before use.
    pub fn builder(api_url: &str) -> ClientBuilder {
        ClientBuilder {
            api_url: api_url.to_owned(),
            token: None,
            retry: Retry::default(),
            timeout: Duration::from_secs(60),
        }
    }

    /// The server's base URL, without a trailing `/`.
    pub fn api_url(&self) -> &str {
        &self.base
    }

    /// Calls endpoint `E` with `input` and returns its answer. A create without a
    /// `requestId` gets a fresh one first (kept across retries).
    pub async fn call<E: Endpoint>(&self, _: E, mut input: E::Input) -> Result<E::Output, Error> {
        if let Some(slot) = input.request_id_mut()
            && slot.is_none()
        {
            *slot = Some(new_request_id());
        }
        let answer = self.post(&E::INFO, &input).await?;
        serde_json::from_value(answer)
            .map_err(|e| Error::Decode { method: E::INFO.id().to_string(), detail: e.to_string() })
    }

    /// Every item of a list method, page after page, as one stream (ends after the page
    /// without a `nextPageToken`; the first error ends it too).
    pub fn list<E>(
        &self,
        endpoint: E,
        input: E::Input,
    ) -> impl Stream<Item = Result<<E::Output as ListOutput>::Item, Error>> + Send + 'static
    where
        E: Endpoint,
        E::Input: ListInput + Clone,
        E::Output: ListOutput,
        <E::Output as ListOutput>::Item: Send,
    {
        use futures::StreamExt as _;
        let client = self.clone();
        let pages = futures::stream::try_unfold(Some(input), move |next| {
            let client = client.clone();
            async move {
                let Some(input) = next else { return Ok(None) };
                let (items, token) = client.call(endpoint, input.clone()).await?.into_page();
                let next = token.map(|t| {
                    let mut more = input;
                    more.set_page_token(Some(t));
                    more
                });
                Ok::<_, Error>(Some((items, next)))
            }
        });
        pages
            .map(|page| match page {
                Ok(items) => futures::stream::iter(items.into_iter().map(Ok)).left_stream(),
                Err(e) => futures::stream::once(async { Err(e) }).right_stream(),
            })
            .flatten()
    }

    /// Calls the method `info` with a JSON body and returns its JSON answer: what the CLI
    /// uses, generated from the catalogue. A create's `requestId` is filled as in
    /// [`Client::call`].
    pub async fn call_value(&self, info: &MethodInfo, mut body: Value) -> Result<Value, Error> {
        fill_request_id(info, &mut body);
        self.post(info, &body).await
    }

    /// [`Client::call_value`] of the method whose id is `method` (`pools.create`).
    pub async fn call_method(&self, method: &str, body: Value) -> Result<Value, Error> {
        let entry = bc_api_types::find(method)
            .ok_or_else(|| Error::Config(format!("{method} is no method of the API")))?;
        self.call_value(&entry.info, body).await
    }

    /// [`Client::call_method`]'s answer as the server wrote it, not parsed: for a caller
    /// that forwards or stores the answer, and for the API benchmark, whose clients share
    /// the server's two cores (parsing a page of 100 pools into a `Value` cost the client
    /// about as much as the server's whole page; docs/benchmarks.md "The pools.list page").
    pub async fn call_method_raw(&self, method: &str, mut body: Value) -> Result<Vec<u8>, Error> {
        let entry = bc_api_types::find(method)
            .ok_or_else(|| Error::Config(format!("{method} is no method of the API")))?;
        fill_request_id(&entry.info, &mut body);
        self.post_raw(&entry.info, &body).await
    }

    /// The tenant's events from after `after_seq` on, as they are committed, for ever:
    /// `GET /api/compute/events/stream`, reconnecting with `Last-Event-ID` when the
    /// connection drops (see [`EventStream`]).
    pub fn events(&self, query: api::events::StreamQuery, after_seq: Option<u64>) -> EventStream {
        EventStream::new(self.clone(), query, after_seq)
    }

    /// One `POST` of a method, retried on `429`/`503` as [`Retry`] says, its answer parsed.
    async fn post<B: Serialize + ?Sized>(
        &self,
        info: &MethodInfo,
        body: &B,
    ) -> Result<Value, Error> {
        let bytes = self.post_raw(info, body).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::Decode { method: info.id().to_string(), detail: e.to_string() })
    }

    /// [`Client::post`] without parsing the answer: a success's bytes as they came.
    async fn post_raw<B: Serialize + ?Sized>(
        &self,
        info: &MethodInfo,
        body: &B,
    ) -> Result<Vec<u8>, Error> {
        let url = format!("{}{}", self.base, info.path());
        let method = info.id().to_string();
        let mut attempt = 1;
        loop {
            let mut req = self.http.post(&url).json(body);
            if let Some(token) = &self.token {
                req = req.bearer_auth(token);
            }
            let resp = req.send().await.map_err(|e| Error::transport(&method, &e))?;
            let status = resp.status();
            let retry_after = retry_after(resp.headers());
            let bytes = resp.bytes().await.map_err(|e| Error::transport(&method, &e))?;
            if status.is_success() {
                return Ok(Vec::from(bytes));
            }
            let error = Error::answered(&method, status, &bytes, retry_after);
            match self.wait_before_retry(status, retry_after, attempt) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(error),
            }
            attempt += 1;
        }
    }

    /// How long to wait before attempt `attempt + 1` after an answer of `status`, or
    /// `None` when it is not retried.
    fn wait_before_retry(
        &self,
        status: StatusCode,
        retry_after: Option<Duration>,
        attempt: u32,
    ) -> Option<Duration> {
        let retried =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
        if !retried || attempt >= self.retry.attempts {
            return None;
        }
        let wait = retry_after.unwrap_or(self.retry.default_wait);
        (wait <= self.retry.max_wait).then_some(wait)
    }

    /// A `GET` request of `path` with the caller's token.
    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.get(format!("{}{}", self.base, path));
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }
}

/// Gives a create's body (a method that takes a `requestId`) a fresh `requestId` unless
/// it has one, so a retried attempt replays the same create (SPEC §2).
fn fill_request_id(info: &MethodInfo, body: &mut Value) {
    if let (true, Value::Object(map)) = (takes_request_id(info), body) {
        map.entry("requestId").or_insert_with(|| Value::String(new_request_id().to_string()));
    }
}

/// Whether a method's input has a `requestId` (creates, SPEC §2); read once per method.
fn takes_request_id(info: &MethodInfo) -> bool {
    static CREATES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        bc_api_types::catalogue()
            .iter()
            .filter(|e| e.input_fields().contains(&"requestId"))
            .map(|e| e.info.id().to_string())
            .collect()
    });
    let id = info.id();
    CREATES.iter().any(|c| c.split_once('.') == Some((id.resource, id.name)))
}

/// The `Retry-After` of an answer, in seconds (the form the server sends).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A fresh `requestId`: `bc-` and a random ULID, lower case (26 characters).
pub fn new_request_id() -> RequestId {
    let id = ulid::Ulid(rand::random::<u128>()).to_string().to_ascii_lowercase();
    RequestId::parse(&format!("bc-{id}")).expect("a ULID is a valid request id")
}

/// Configures a [`Client`].
#[derive(Clone)]
pub struct ClientBuilder {
    api_url: String,
    token: Option<String>,
    retry: Retry,
    timeout: Duration,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Calls with API token `token` (`Authorization: Bearer …`).
    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.trim().to_owned());
        self
    }

    /// Retries `429`/`503` answers this way (default: [`Retry::default`]).
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Gives up on a call (not the event stream) after `timeout` (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, Error> {
        install_crypto_provider();
        let base = self.api_url.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base)
            .map_err(|e| Error::Config(format!("the API URL {base:?}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Config(format!("the API URL {base:?} is not http(s)")));
        }
        let http = reqwest::Client::builder()
            .read_timeout(self.timeout)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("bc-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(format!("the HTTP client: {e}")))?;
        Ok(Client { http, base, token: self.token, retry: self.retry })
    }
}

#[cfg(test)]
mod tests;
