//! Bounded waits on the provider: look, and look again after a pause that starts short
//! (a simulator answers in seconds) and doubles up to a ceiling (DigitalOcean takes
//! minutes, and its rate limits ask for spaced polls).
//!
//! Invariant: every wait ends — after its deadline in time or after [`MAX_POLLS`] looks,
//! whichever comes first — with the last thing it saw in the error.

use std::future::Future;
use std::time::{Duration, Instant};

use bc_domain::ProviderError;

use crate::{ConformanceError, Result};

/// The most looks any one wait takes.
pub const MAX_POLLS: u32 = 400;

/// The first pause between looks.
pub const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// How long each kind of wait may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlines {
    /// A new cluster until it runs with its nodes (DigitalOcean: 5–10 minutes).
    pub cluster: Duration,
    /// A node pool's nodes until they run (minutes).
    pub node_pool: Duration,
    /// A new load balancer until it is active (1–3 minutes, up to 10).
    pub load_balancer: Duration,
    /// A deleted object until the provider answers 404 (a pool drains first).
    pub gone: Duration,
    /// A load balancer that answers "busy" (403) until it takes the change.
    pub busy: Duration,
    /// A kubeconfig until it is served, and an object in the cluster until it is
    /// deleted (a Namespace terminates).
    pub cluster_api: Duration,
    /// The longest pause between looks.
    pub pause_max: Duration,
}

impl Deadlines {
    /// Generous bounds for real DigitalOcean (research/digitalocean.md §7: Terraform
    /// waits 30 minutes for a cluster and 10 for a load balancer, polling every 10–15 s).
    pub fn digitalocean() -> Self {
        let min = |m: u64| Duration::from_secs(m * 60);
        Self {
            cluster: min(30),
            node_pool: min(20),
            load_balancer: min(10),
            gone: min(15),
            busy: min(5),
            cluster_api: min(5),
            pause_max: Duration::from_secs(15),
        }
    }

    /// Bounds for real GKE (research/gke.md §8: a cluster takes 5–10 minutes, Terraform
    /// allows 90 for a cluster operation and 2 hours for a pool's; an operation holds its
    /// cluster for minutes, so a busy cluster is waited for as long as a node pool).
    pub fn gke() -> Self {
        let min = |m: u64| Duration::from_secs(m * 60);
        Self {
            cluster: min(40),
            node_pool: min(30),
            load_balancer: min(10),
            gone: min(30),
            busy: min(30),
            cluster_api: min(5),
            pause_max: Duration::from_secs(15),
        }
    }
}

/// Looks with `probe` until it answers `Some`, pausing [`FIRST_PAUSE`] doubling up to
/// `pause_max` between looks; `step` names the wait in the error, which carries what
/// `probe` last described (`Err` from `probe` ends the wait at once).
pub async fn until<T, F, Fut>(
    step: &str,
    deadline: Duration,
    pause_max: Duration,
    mut probe: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Seen<T>>>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE.min(pause_max);
    for polls in 1..=MAX_POLLS {
        let last = match probe().await? {
            Seen::Done(v) => return Ok(v),
            Seen::NotYet(what) => what,
        };
        let waited = started.elapsed();
        if waited + pause > deadline || polls == MAX_POLLS {
            return Err(ConformanceError::Timeout { step: step.to_owned(), waited, polls, last });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(pause_max);
    }
    unreachable!("the loop returns on its last poll")
}

/// Looks with `get` until the provider answers 404, or until `still` says the object
/// read counts as gone (`None`; `Some` describes what is left), within `deadlines.gone`.
pub async fn until_gone<T, F, Fut>(
    step: &str,
    deadlines: &Deadlines,
    mut get: F,
    still: impl Fn(&T) -> Option<String>,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, ProviderError>>,
{
    let still = &still;
    until(step, deadlines.gone, deadlines.pause_max, || {
        let read = get();
        async move {
            match read.await {
                Err(ProviderError::NotFound) => Ok(Seen::Done(())),
                Ok(object) => Ok(still(&object).map_or(Seen::Done(()), Seen::NotYet)),
                Err(e) => not_yet(step, e),
            }
        }
    })
    .await
}

/// What one look saw.
#[derive(Debug)]
pub enum Seen<T> {
    /// What was awaited.
    Done(T),
    /// Not yet: what there is instead.
    NotYet(String),
}

/// A provider error from a call that changes something, while the target is busy: only
/// an answer that says the change was not taken (busy with an earlier operation, rate
/// limited, over budget) is "not yet" — a lost answer may have been taken, and is the
/// step's failure.
pub fn busy<T>(step: &str, error: ProviderError) -> Result<Seen<T>> {
    match error {
        ProviderError::Busy { .. }
        | ProviderError::RateLimited { .. }
        | ProviderError::OverBudget { .. } => Ok(Seen::NotYet(format!("{error}"))),
        error => Err(ConformanceError::Provider { step: step.to_owned(), error }),
    }
}

/// A provider error during a wait: a retryable one (5xx, 429, busy, not served yet) is
/// "not yet", anything else fails `step`.
pub fn not_yet<T>(step: &str, error: ProviderError) -> Result<Seen<T>> {
    if error.is_retryable() {
        Ok(Seen::NotYet(format!("{error}")))
    } else {
        Err(ConformanceError::Provider { step: step.to_owned(), error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_by_its_deadline_with_what_it_saw_last() {
        let mut n = 0;
        let deadline = Duration::from_millis(300);
        let e = until::<(), _, _>("x", deadline, Duration::from_millis(100), || {
            n += 1;
            let seen = format!("look {n}");
            async move { Ok(Seen::NotYet(seen)) }
        })
        .await
        .unwrap_err();
        let ConformanceError::Timeout { polls, last, .. } = &e else { panic!("{e}") };
        assert!(*polls >= 1, "{e}");
        assert_eq!(*last, format!("look {polls}"), "the last look is reported");
        assert_eq!(*polls, n);
    }

    #[tokio::test]
    async fn a_wait_returns_what_it_awaited_and_stops_on_an_error() {
        let mut n = 0;
        let got = until("x", Duration::from_secs(60), Duration::from_millis(10), || {
            n += 1;
            let k = n;
            async move { Ok(if k == 3 { Seen::Done(k) } else { Seen::NotYet(String::new()) }) }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
        let e =
            until::<(), _, _>("y", Duration::from_secs(60), Duration::from_secs(15), || async {
                not_yet("y", ProviderError::NotFound)
            })
            .await
            .unwrap_err();
        assert!(matches!(e, ConformanceError::Provider { .. }), "{e}");
        let retry: Result<Seen<()>> =
            not_yet("z", ProviderError::Transient { message: "500".into() });
        assert!(matches!(retry, Ok(Seen::NotYet(_))));
    }
}
