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
    /// False-discovery rate over all functions.
    pub fdr: f64,
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
    }
}

/// Picks the event: the one asked for (which must exist), else the one with most
/// samples; a warning when the store holds several.
async fn pick_event(
    ctx: &datafusion::prelude::SessionContext,
    asked: Option<&str>,
    warnings: &mut Vec<String>,
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
                warnings.push(format!(
                    "the store holds several events ({names}); shares are of {} (choose with --event)",
                    first.0
                ));
            }
            Ok(first.0.clone())
        }
    }
}

/// Runs `fleet report` on `store`: the report, and every host's share of each of the top
/// functions (the HTML page's per-host spread).
pub async fn report(store: &Path, spec: &ReportSpec) -> Result<(FleetReport, Vec<HostShare>)> {
    let ctx = engine::session(&spec.engine, store).await?;
    let mut warnings = Vec::new();
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
    warnings.extend(stats::fleet_warnings(&fleet));

    let mut functions = Vec::with_capacity(sums.len());
    let mut shares = Vec::with_capacity(sums.len());
    for f in &sums {
        let s = stats::ratio_share(&units(f), &fleet, spec.confidence);
        functions.push(FleetFunction {
            name: f.name.clone(),
            module: f.module.clone(),
            samples: f.y,
            share: s.share,
            ci_low: s.ci_low,
            ci_high: s.ci_high,
            se: s.se,
            design_effect: s.design_effect,
            hosts: f.hosts,
        });
        shares.push(s);
    }

    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (h, l) in &labels {
        by_host.entry(h.as_str()).or_default().push(l.clone());
    }
    let host_table: Vec<FleetHost> = host_rows
        .iter()
        .map(|h| FleetHost {
            host: h.host.clone(),
            recordings: h.recordings,
            samples: h.samples,
            labels: by_host.get(h.host.as_str()).cloned().unwrap_or_default(),
        })
        .collect();

    // Per-host deviations of the top functions: every host is tested, including those
    // without a sample in the function (y_h = 0).
    let top = spec.top.min(sums.len());
    let names: Vec<String> = sums[..top].iter().map(|f| f.name.clone()).collect();
    let per_host = query::host_functions(&ctx, &scope, &names).await?;
    let mut y_of: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for r in &per_host {
        y_of.insert((r.host.as_str(), r.name.as_str(), r.module.as_str()), r.y);
    }
    let mut tests = Vec::new();
    let mut host_shares = Vec::new();
    for f in &sums[..top] {
        for h in &host_rows {
            let y = y_of
                .get(&(h.host.as_str(), f.name.as_str(), f.module.as_str()))
                .copied()
                .unwrap_or(0);
            let rest_y = f.y.saturating_sub(y) as f64;
            let rest_n = totals.total.saturating_sub(h.samples) as f64;
            let t = stats::host_deviation(y as f64, h.samples as f64, rest_y, rest_n);
            let host_share = if h.samples > 0 {
                y as f64 / h.samples as f64
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
                samples: y,
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
    let mut host_deviations: Vec<HostDeviation> =
        tests.into_iter().filter(|t| t.q <= spec.fdr).collect();
    host_deviations.sort_by(|a, b| {
        b.z.abs()
            .total_cmp(&a.z.abs())
            .then_with(|| a.host.cmp(&b.host))
            .then_with(|| a.function.cmp(&b.function))
    });

    let precision = sums[..top]
        .iter()
        .zip(&shares)
        .map(|(f, s)| {
            let (binomial, needed, hosts) = stats::precision_needed(
                s,
                totals.total,
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
        .collect();

    let report = FleetReport {
        version: FLEET_REPORT_VERSION,
        store: store.display().to_string(),
        engine: spec.engine.name(),
        level: spec.level.name().to_string(),
        event,
        hosts: totals.clusters,
        recordings: totals.recordings,
        samples: totals.total,
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
    let ctx = engine::session(&spec.engine, store).await?;
    check_selector(&ctx, &spec.a).await?;
    check_selector(&ctx, &spec.b).await?;
    let mut warnings = Vec::new();
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
            warnings.push(format!("side {}: {w}", sel.text()));
        }
    }
    let (df_a, df_b) = (stats::share_df(&fleet_a), stats::share_df(&fleet_b));
    let mut rows = Vec::with_capacity(keys.len());
    for ((name, module), (a, b)) in keys {
        let share_a = stats::ratio_share(&units(a.unwrap_or(&zero)), &fleet_a, spec.confidence);
        let share_b = stats::ratio_share(&units(b.unwrap_or(&zero)), &fleet_b, spec.confidence);
        let d = stats::share_difference_df(&share_a, &share_b, df_a, df_b, spec.confidence);
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
        });
    }
    let q = stats::benjamini_hochberg(&rows.iter().map(|r| r.p).collect::<Vec<_>>());
    for (r, q) in rows.iter_mut().zip(q) {
        r.q = q;
        r.significant = q <= spec.fdr;
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
        samples: t.total,
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
        warnings,
    })
}
