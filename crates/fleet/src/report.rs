//! `fleet report` and `fleet diff`: the sums of [`crate::query`] through the statistics of
//! `proftrust_metrics::fleet` into `proftrust_report::fleet`'s reports.

use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::query::{self, FunctionSums, Level, Scope, Selector, Totals};
use proftrust_metrics::fleet as stats;
use proftrust_report::fleet::{
    DiffRow, DiffSide, FleetDiffReport, FleetFunction, FleetHost, FleetReport, HostDeviation,
    HostShare, PrecisionRow, FLEET_REPORT_VERSION,
};
use proftrust_report::{Warning, WarningKind};
use std::collections::BTreeMap;
use std::path::Path;

/// How `fleet diff` tests each function ([`stats::share_difference_df`]).
pub const DIFF_T_METHOD: &str =
    "delta = share_B − share_A; z = delta / √(se_A² + se_B²) on the two \
sides' cluster-robust standard errors (independent hosts on each side), interval and two-sided \
p-value from t with Welch-Satterthwaite degrees of freedom on each side's C_eff − 1 (Welch 1947, \
Biometrika 34, eq. 9); q-values by the Benjamini-Hochberg step-up procedure over all functions \
(Benjamini & Hochberg 1995, JRSS B 57(1), §3)";

/// What `fleet report` computes.
#[derive(Debug, Clone)]
pub struct ReportSpec {
    /// Query engine.
    pub engine: Engine,
    /// Aggregation level.
    pub level: Level,
    /// Event (`None`: the one with most samples).
    pub event: Option<String>,
    /// Functions whose per-host deviations and precision rows are computed.
    pub top: usize,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Target relative half-width of the precision rows.
    pub precision_target: f64,
    /// False-discovery rate of the host deviations.
    pub fdr: f64,
}

impl Default for ReportSpec {
    fn default() -> ReportSpec {
        ReportSpec {
            engine: Engine::Embedded,
            level: Level::Function,
            event: None,
            top: 10,
            confidence: 0.95,
            precision_target: 0.1,
            fdr: 0.05,
        }
    }
}

/// What `fleet diff` computes.
#[derive(Debug, Clone)]
pub struct DiffSpec {
    /// Query engine.
    pub engine: Engine,
    /// Aggregation level.
    pub level: Level,
    /// Event (`None`: the one with most samples).
    pub event: Option<String>,
    /// Side A.
    pub a: Selector,
    /// Side B.
    pub b: Selector,
    /// Confidence level of the intervals of the differences.
    pub confidence: f64,
    /// False-discovery rate over the tested functions.
    pub fdr: f64,
    /// Rows whose share is below this on both sides are shown but not tested (they spend
    /// none of the false-discovery budget). Default 0.001 (0.1%).
    pub min_share: f64,
}

/// [`DiffSpec::min_share`]'s default: 0.1%. Reading chosen: a function under a thousandth of
/// the samples on both sides is below what a fleet diff is for, and each one tested raises the
/// bar for all (Benjamini-Hochberg's first step is `p <= fdr/m`).
pub const DEFAULT_MIN_SHARE: f64 = 0.001;

/// The unit of an event's weight (its samples' periods): `ns`, `cycles`, `instructions` or
/// `events`, by the one rule of [`proftrust_model::PeriodUnit::of`].
pub fn event_unit(event: &str) -> &'static str {
    proftrust_model::PeriodUnit::of(event).name()
}

fn units(f: &FunctionSums) -> stats::UnitSums {
    stats::UnitSums {
        y: f.y as f64,
        y_sq: f.y_sq,
        y_n: f.y_n,
    }
}

fn fleet_totals(t: &Totals) -> stats::FleetTotals {
    stats::FleetTotals {
        clusters: t.clusters,
        total: t.total as f64,
        total_sq: t.total_sq,
        effective_samples: stats::effective_samples(t.total as f64, t.sq_per_sample),
    }
}

/// The warning naming the hosts of the store that are not in `event`'s shares (they
/// recorded other events only); a property of the store and the event, so asked once per
/// report or diff.
async fn other_event_warning(
    ctx: &datafusion::prelude::SessionContext,
    event: &str,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    let others = query::hosts_without(ctx, event).await?;
    if !others.is_empty() {
        let list = others
            .iter()
            .take(5)
            .map(|(h, e)| format!("{h} ({e})"))
            .collect::<Vec<_>>()
            .join(", ");
        warnings.push(Warning::new(
            WarningKind::Scope,
            format!(
            "{} host(s) recorded other events only and are not in these shares of {}: {list}{}; \
             a share mixes no events (choose with --event)",
            others.len(),
            event,
            if others.len() > 5 { ", ..." } else { "" }
        ),
        ));
    }
    Ok(())
}

/// Warnings about what the weights of `scope` stand on: recordings of programs that did not
/// end normally (the `ending` column), and recordings without periods (each sample weighing
/// 1) beside recordings with periods.
async fn weight_warnings(
    ctx: &datafusion::prelude::SessionContext,
    scope: &Scope,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    let ended = query::recordings_ended_early(ctx, scope).await?;
    if !ended.is_empty() {
        let list = ended
            .iter()
            .take(5)
            .map(|(h, r, e)| format!("{h}/{r} ({e})"))
            .collect::<Vec<_>>()
            .join(", ");
        warnings.push(Warning::new(
            WarningKind::EndedEarly,
            format!(
            "{} recording(s) of a program that did not end normally: {list}{}; an interrupted, \
             killed or timed-out recording covers part of its run, so its host weighs less than \
             a whole run would (select complete recordings with labels, or re-record)",
            ended.len(),
            if ended.len() > 5 { ", ..." } else { "" }
        ),
        ));
    }
    let recs = query::recording_weights(ctx, scope).await?;
    let unweighted: Vec<&str> = recs
        .iter()
        .filter(|(_, n, w)| *n > 0 && n == w)
        .map(|(h, _, _)| h.as_str())
        .collect();
    if !unweighted.is_empty() && unweighted.len() < recs.len() {
        let mut hosts = unweighted.clone();
        hosts.dedup();
        warnings.push(Warning::new(
            WarningKind::Input,
            format!(
                "{} of {} recordings (hosts {}) carry no sample periods, so each of their samples \
             weighs 1 while the others weigh their periods ({}): their hosts' shares count \
             samples, not {}; ingest the perf.data, or perf script with the period field",
                unweighted.len(),
                recs.len(),
                hosts.join(", "),
                event_unit(&scope.event),
                if event_unit(&scope.event) == "ns" {
                    "time"
                } else {
                    "events"
                }
            ),
        ));
    }
    Ok(())
}

/// Picks the event: the one asked for (which must exist), else the one with most
/// samples; a warning when the store holds several.
async fn pick_event(
    ctx: &datafusion::prelude::SessionContext,
    asked: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Result<String> {
    let events = query::events(ctx).await?;
    let names = events
        .iter()
        .map(|(e, _)| e.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    match asked {
        Some(e) => {
            if events.iter().any(|(n, _)| n == e) {
                Ok(e.to_string())
            } else {
                Err(Error::Invalid(format!(
                    "--event {e}: the store holds no samples of it (its events: {names})"
                )))
            }
        }
        None => {
            let first = events.first().ok_or_else(|| {
                Error::Invalid("the store's recordings name no event".to_string())
            })?;
            if events.len() > 1 {
                warnings.push(Warning::new(WarningKind::Scope, format!(
                    "the store holds several events ({names}); shares are of {} (choose with --event)",
                    first.0
                )));
            }
            Ok(first.0.clone())
        }
    }
}

/// Runs `fleet report` on `store`: the report, and every host's share of each of the top
/// functions (the HTML page's per-host spread).
pub async fn report(store: &Path, spec: &ReportSpec) -> Result<(FleetReport, Vec<HostShare>)> {
    let (ctx, verified) = engine::session(&spec.engine, store).await?;
    let mut warnings: Vec<Warning> = verified
        .into_iter()
        .map(|m| Warning::new(WarningKind::Input, m))
        .collect();
    let event = pick_event(&ctx, spec.event.as_deref(), &mut warnings).await?;
    let scope = Scope {
        event: event.clone(),
        level: spec.level,
        selector: None,
    };
    let totals = query::totals(&ctx, &scope).await?;
    let sums = query::functions(&ctx, &scope).await?;
    let host_rows = query::hosts(&ctx, &scope).await?;
    let labels = query::host_labels(&ctx).await?;
    let fleet = fleet_totals(&totals);
    warnings.extend(
        stats::fleet_warnings(&fleet)
            .into_iter()
            .map(|m| Warning::new(WarningKind::FewSamples, m)),
    );
    other_event_warning(&ctx, &scope.event, &mut warnings).await?;
    weight_warnings(&ctx, &scope, &mut warnings).await?;

    let (functions, shares) = function_rows(&sums, &fleet, spec.confidence);
    let host_table = host_table(&host_rows, &labels);
    let top = spec.top.min(sums.len());
    let (host_deviations, host_shares) =
        host_deviations(&ctx, &scope, &sums[..top], &host_rows, &totals, spec.fdr).await?;
    let precision = precision_rows(&sums[..top], &shares, &totals, spec);

    let unit = event_unit(&event).to_string();
    let report = FleetReport {
        version: FLEET_REPORT_VERSION,
        store: store.display().to_string(),
        engine: spec.engine.name(),
        level: spec.level.name().to_string(),
        event,
        hosts: totals.clusters,
        recordings: totals.recordings,
        samples: totals.samples,
        weight: totals.total,
        unit,
        confidence: spec.confidence,
        method: format!(
            "{}; host deviations: {}",
            stats::RATIO_METHOD,
            stats::HOST_METHOD
        ),
        seed: None,
        functions,
        host_table,
        host_deviations,
        precision,
        precision_target: spec.precision_target,
        warnings,
    };
    Ok((report, host_shares))
}

/// Each function's row of the report and its share estimate (ratio estimator over hosts).
fn function_rows(
    sums: &[FunctionSums],
    fleet: &stats::FleetTotals,
    confidence: f64,
) -> (Vec<FleetFunction>, Vec<stats::Share>) {
    sums.iter()
        .map(|f| {
            let s = stats::ratio_share(&units(f), fleet, confidence);
            let row = FleetFunction {
                name: f.name.clone(),
                module: f.module.clone(),
                samples: f.samples,
                weight: f.y,
                share: s.share,
                ci_low: s.ci_low,
                ci_high: s.ci_high,
                se: s.se,
                design_effect: s.design_effect,
                hosts: f.hosts,
            };
            (row, s)
        })
        .unzip()
}

/// The hosts' table: recordings, samples, weight and labels of each.
fn host_table(host_rows: &[query::HostTotal], labels: &[(String, String)]) -> Vec<FleetHost> {
    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (h, l) in labels {
        by_host.entry(h.as_str()).or_default().push(l.clone());
    }
    host_rows
        .iter()
        .map(|h| FleetHost {
            host: h.host.clone(),
            recordings: h.recordings,
            samples: h.samples,
            weight: h.weight,
            labels: by_host.get(h.host.as_str()).cloned().unwrap_or_default(),
        })
        .collect()
}

/// Per-host deviations of the `top` functions, those with a Benjamini-Hochberg q at most
/// `fdr`, largest |z| first; and every host's share of each (the HTML page's spread). Every
/// host is tested, including those without a sample in the function (y_h = 0).
async fn host_deviations(
    ctx: &datafusion::prelude::SessionContext,
    scope: &Scope,
    top: &[FunctionSums],
    host_rows: &[query::HostTotal],
    totals: &Totals,
    fdr: f64,
) -> Result<(Vec<HostDeviation>, Vec<HostShare>)> {
    let names: Vec<String> = top.iter().map(|f| f.name.clone()).collect();
    let per_host = query::host_functions(ctx, scope, &names).await?;
    let mut y_of: BTreeMap<(&str, &str, &str), (u64, u64)> = BTreeMap::new();
    for r in &per_host {
        y_of.insert(
            (r.host.as_str(), r.name.as_str(), r.module.as_str()),
            (r.y, r.samples),
        );
    }
    let mut tests = Vec::new();
    let mut host_shares = Vec::new();
    for f in top {
        for h in host_rows {
            let (y, y_samples) = y_of
                .get(&(h.host.as_str(), f.name.as_str(), f.module.as_str()))
                .copied()
                .unwrap_or((0, 0));
            // Weights for the shares, effective samples for the binomial variance.
            let rest_y = f.y.saturating_sub(y) as f64;
            let rest_n = totals.total.saturating_sub(h.weight) as f64;
            let host_eff = stats::effective_samples(h.weight as f64, h.sq_per_sample);
            let rest_eff = stats::effective_samples(rest_n, totals.sq_per_sample - h.sq_per_sample);
            let t = stats::host_deviation_weighted(
                y as f64,
                h.weight as f64,
                host_eff,
                rest_y,
                rest_n,
                rest_eff,
            );
            let host_share = if h.weight > 0 {
                y as f64 / h.weight as f64
            } else {
                0.0
            };
            host_shares.push(HostShare {
                host: h.host.clone(),
                function: f.name.clone(),
                share: host_share,
            });
            tests.push(HostDeviation {
                host: h.host.clone(),
                function: f.name.clone(),
                module: f.module.clone(),
                samples: y_samples,
                host_share,
                fleet_share: if rest_n > 0.0 { rest_y / rest_n } else { 0.0 },
                z: t.z,
                p: t.p,
                q: 1.0,
            });
        }
    }
    let q = stats::benjamini_hochberg(&tests.iter().map(|t| t.p).collect::<Vec<_>>());
    for (t, q) in tests.iter_mut().zip(q) {
        t.q = q;
    }
    let mut deviations: Vec<HostDeviation> = tests.into_iter().filter(|t| t.q <= fdr).collect();
    deviations.sort_by(|a, b| {
        b.z.abs()
            .total_cmp(&a.z.abs())
            .then_with(|| a.host.cmp(&b.host))
            .then_with(|| a.function.cmp(&b.function))
    });
    Ok((deviations, host_shares))
}

/// For each of the `top` functions: the samples and hosts needed for the precision target.
fn precision_rows(
    top: &[FunctionSums],
    shares: &[stats::Share],
    totals: &Totals,
    spec: &ReportSpec,
) -> Vec<PrecisionRow> {
    top.iter()
        .zip(shares)
        .map(|(f, s)| {
            let (binomial, needed, hosts) = stats::precision_needed(
                s,
                totals.samples,
                totals.clusters,
                spec.precision_target,
                spec.confidence,
            );
            PrecisionRow {
                function: f.name.clone(),
                share: s.share,
                relative_half_width: if s.share > 0.0 {
                    (s.ci_high - s.ci_low) / 2.0 / s.share
                } else {
                    0.0
                },
                samples_needed_binomial: binomial,
                samples_needed: needed,
                hosts_needed: hosts,
            }
        })
        .collect()
}

/// Refuses a selector whose key or value the store does not hold, naming what it holds.
async fn check_selector(ctx: &datafusion::prelude::SessionContext, sel: &Selector) -> Result<()> {
    let keys = query::label_keys(ctx).await?;
    if !keys.contains(&sel.key) {
        return Err(Error::Invalid(format!(
            "label `{}`: no recording in the store has the key `{}` (its label keys: {}); \
             labels are given at ingest with --labels k=v,...",
            sel.text(),
            sel.key,
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        )));
    }
    let values = query::label_values(ctx, &sel.key).await?;
    if !values.contains(&sel.value) {
        return Err(Error::Invalid(format!(
            "label `{}`: no recording has {}={} (values of {}: {})",
            sel.text(),
            sel.key,
            sel.value,
            sel.key,
            values.join(", ")
        )));
    }
    Ok(())
}

/// Runs `fleet diff` on `store`.
pub async fn diff(store: &Path, spec: &DiffSpec) -> Result<FleetDiffReport> {
    let (ctx, verified) = engine::session(&spec.engine, store).await?;
    let mut warnings: Vec<Warning> = verified
        .into_iter()
        .map(|m| Warning::new(WarningKind::Input, m))
        .collect();
    check_selector(&ctx, &spec.a).await?;
    check_selector(&ctx, &spec.b).await?;
    let event = pick_event(&ctx, spec.event.as_deref(), &mut warnings).await?;
    let side = |sel: &Selector| Scope {
        event: event.clone(),
        level: spec.level,
        selector: Some(sel.clone()),
    };
    let (sa, sb) = (side(&spec.a), side(&spec.b));
    let (ta, tb) = (
        query::totals(&ctx, &sa).await?,
        query::totals(&ctx, &sb).await?,
    );
    for (t, sel) in [(&ta, &spec.a), (&tb, &spec.b)] {
        if t.total == 0 {
            return Err(Error::Invalid(format!(
                "label `{}` selects no samples of {event}",
                sel.text()
            )));
        }
    }
    let fa = query::functions(&ctx, &sa).await?;
    let fb = query::functions(&ctx, &sb).await?;

    let zero = FunctionSums {
        name: String::new(),
        module: String::new(),
        samples: 0,
        y: 0,
        y_sq: 0.0,
        y_n: 0.0,
        hosts: 0,
    };
    type Sides<'a> = (Option<&'a FunctionSums>, Option<&'a FunctionSums>);
    let mut keys: BTreeMap<(String, String), Sides<'_>> = BTreeMap::new();
    for f in &fa {
        keys.entry((f.name.clone(), f.module.clone()))
            .or_default()
            .0 = Some(f);
    }
    for f in &fb {
        keys.entry((f.name.clone(), f.module.clone()))
            .or_default()
            .1 = Some(f);
    }
    let (fleet_a, fleet_b) = (fleet_totals(&ta), fleet_totals(&tb));
    for (f, sel) in [(&fleet_a, &spec.a), (&fleet_b, &spec.b)] {
        for w in stats::fleet_warnings(f) {
            warnings.push(Warning::new(
                WarningKind::FewSamples,
                format!("side {}: {w}", sel.text()),
            ));
        }
    }
    other_event_warning(&ctx, &event, &mut warnings).await?;
    weight_warnings(&ctx, &sa, &mut warnings).await?;
    weight_warnings(&ctx, &sb, &mut warnings).await?;
    // Two sides holding the same recordings give the same weight warnings: said once.
    let mut said = std::collections::HashSet::new();
    warnings.retain(|w| said.insert(w.clone()));
    let (df_a, df_b) = (stats::share_df(&fleet_a), stats::share_df(&fleet_b));
    let mut rows = Vec::with_capacity(keys.len());
    for ((name, module), (a, b)) in keys {
        let share_a = stats::ratio_share(&units(a.unwrap_or(&zero)), &fleet_a, spec.confidence);
        let share_b = stats::ratio_share(&units(b.unwrap_or(&zero)), &fleet_b, spec.confidence);
        let d = stats::share_difference_df(&share_a, &share_b, df_a, df_b, spec.confidence);
        let tested = share_a.share.max(share_b.share) >= spec.min_share;
        rows.push(DiffRow {
            name,
            module,
            share_a: share_a.share,
            share_b: share_b.share,
            delta: d.delta,
            ci_low: d.ci_low,
            ci_high: d.ci_high,
            z: d.z,
            p: d.p,
            q: 1.0,
            significant: false,
            tested,
        });
    }
    // Benjamini-Hochberg over the tested rows only; the others keep q 1.
    let tested: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].tested).collect();
    let q = stats::benjamini_hochberg(&tested.iter().map(|&i| rows[i].p).collect::<Vec<_>>());
    for (&i, q) in tested.iter().zip(q) {
        rows[i].q = q;
        rows[i].significant = q <= spec.fdr;
    }
    let critical_t = critical_t(tested.len(), df_a + df_b, spec.fdr);
    if let Some(w) = power_warning(&ta, &tb, tested.len(), df_a + df_b, critical_t, spec.fdr) {
        warnings.push(Warning::new(WarningKind::FewSamples, w));
    }
    rows.sort_by(|x, y| {
        y.significant
            .cmp(&x.significant)
            .then_with(|| y.delta.abs().total_cmp(&x.delta.abs()))
            .then_with(|| x.name.cmp(&y.name))
            .then_with(|| x.module.cmp(&y.module))
    });
    let side_of = |sel: &Selector, t: &Totals| DiffSide {
        selector: sel.text(),
        hosts: t.clusters,
        recordings: t.recordings,
        samples: t.samples,
        weight: t.total,
    };
    Ok(FleetDiffReport {
        version: FLEET_REPORT_VERSION,
        store: store.display().to_string(),
        engine: spec.engine.name(),
        level: spec.level.name().to_string(),
        event,
        a: side_of(&spec.a, &ta),
        b: side_of(&spec.b, &tb),
        confidence: spec.confidence,
        fdr: spec.fdr,
        method: format!("{}; {DIFF_T_METHOD}", stats::RATIO_METHOD),
        seed: None,
        functions: rows,
        tested: tested.len() as u64,
        min_share: spec.min_share,
        critical_t,
        warnings,
    })
}

/// The |t| the strongest of `m` tested rows needs to pass Benjamini-Hochberg at `fdr`
/// (its first step: `p <= fdr/m`), on `df` = `df_a + df_b` degrees of freedom, the most
/// the Welch-Satterthwaite approximation can give two sides of `df_a` and `df_b` (a row
/// with all its variance on one side gets that side's alone, and needs more). `None`
/// when nothing is tested.
fn critical_t(m: usize, df: f64, fdr: f64) -> Option<f64> {
    (m > 0).then(|| stats::t_critical(fdr / m as f64, df))
}

/// When the design can find only very large changes (the strongest tested row would need
/// |t| > 10), says so with the numbers and what more hosts would give: "0 found" must not
/// read as "nothing changed".
fn power_warning(
    ta: &Totals,
    tb: &Totals,
    m: usize,
    df: f64,
    critical: Option<f64>,
    fdr: f64,
) -> Option<String> {
    let t = critical?;
    if t <= 10.0 {
        return None;
    }
    // Ten hosts of equal weight a side: 9 + 9 degrees of freedom.
    let with_ten = stats::t_critical(fdr / m as f64, 18.0);
    Some(format!(
        "little power: with {} and {} hosts a side, a change must reach |t| >= {} to pass the \
         false-discovery rate {:.0}% over the {m} tested rows (t on at most {} degrees of \
         freedom), so 'no change found' does not mean no change; with 10 hosts of equal \
         weight a side |t| >= {with_ten:.2} would do (or test fewer rows: --min-share)",
        ta.clusters,
        tb.clusters,
        if t >= 100.0 {
            format!("{t:.0}")
        } else {
            format!("{t:.1}")
        },
        fdr * 100.0,
        df,
    ))
}
