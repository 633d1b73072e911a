//! The shared provider-call budgets (`BudgetRepo`): one row per key holding the state of
//! `bc_domain::rules::budget`, replaced only by compare-and-swap on its version.
//!
//! Invariant: a write lands only if nobody wrote since the writer read (`version`
//! unchanged, or no row for a first write), in one statement; so two replicas that both
//! decided on the same state cannot both spend it — the loser reads again and decides
//! again with the one rule.

use async_trait::async_trait;
use bc_domain::ports::{BudgetRepo, StoreResult, StoredBudget};
use bc_domain::rules::budget::BudgetState;
use sea_orm::Value;

use crate::sql::{Row, ots, s, ts, u64v};
use crate::store::SqlStore;

#[async_trait]
impl BudgetRepo for SqlStore {
    async fn budget_get(&self, key: &str) -> StoreResult<Option<StoredBudget>> {
        let q = "SELECT version, minute_tat, hour_tat, paused_until FROM provider_budgets \
                 WHERE budget_key = ?";
        self.one(q, vec![s(key)], |r| {
            let r = Row(r);
            Ok(StoredBudget {
                state: BudgetState {
                    minute_tat: r.ts("minute_tat")?,
                    hour_tat: r.ts("hour_tat")?,
                    paused_until: r.opt_ts("paused_until")?,
                },
                version: r.u64("version")?,
            })
        })
        .await
    }

    async fn budget_put(
        &self,
        key: &str,
        expected: Option<u64>,
        state: &BudgetState,
    ) -> StoreResult<bool> {
        let fields = vec![ts(state.minute_tat), ts(state.hour_tat), ots(state.paused_until)];
        let st = match expected {
            None => {
                let mut v = vec![s(key), Value::from(1i64)];
                v.extend(fields);
                self.st(
                    "INSERT INTO provider_budgets \
                     (budget_key, version, minute_tat, hour_tat, paused_until) \
                     VALUES (?, ?, ?, ?, ?) ON CONFLICT (budget_key) DO NOTHING",
                    v,
                )
            }
            Some(version) => {
                let mut v = fields;
                v.extend([s(key), u64v(version)?]);
                self.st(
                    "UPDATE provider_budgets SET version = version + 1, minute_tat = ?, \
                     hour_tat = ?, paused_until = ? WHERE budget_key = ? AND version = ?",
                    v,
                )
            }
        };
        self.touch("budget_put", st).await
    }
}
