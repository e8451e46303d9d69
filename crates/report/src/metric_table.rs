//! The audit's metric table, written once for the text and the HTML report: which metrics,
//! in which order, under which names, with which values. Each renderer only formats the
//! rows ([`metric_rows`]), so a new metric is one entry of [`METRICS`].

use crate::model::{AuditReport, Metrics};

/// One metric of the audit table.
pub(crate) struct MetricDef {
    /// The `Metrics` field (its JSON key), also its key in `Metrics::too_few`.
    pub key: &'static str,
    /// Short name: the text table's metric column.
    pub name: &'static str,
    /// What it means: the text table's meaning column.
    pub meaning: &'static str,
    /// Name and meaning in one, with the seed paper: the HTML table's metric column.
    pub label: &'static str,
    /// Its value in a `Metrics`.
    pub get: fn(&Metrics) -> Option<f64>,
}

/// The metrics of the audit table, in the order both reports show them.
pub(crate) const METRICS: [MetricDef; 12] = [
    MetricDef {
        key: "epsilon_function",
        name: "epsilon (function)",
        meaning: "share of samples in the wrong function",
        label: "ε function (share of samples in the wrong function, paper 000)",
        get: |m| m.epsilon_function,
    },
    MetricDef {
        key: "epsilon_inline",
        name: "epsilon (inline)",
        meaning: "same, innermost inlined function",
        label: "ε innermost inlined function",
        get: |m| m.epsilon_inline,
    },
    MetricDef {
        key: "epsilon_block",
        name: "epsilon (block)",
        meaning: "same, basic block",
        label: "ε basic block",
        get: |m| m.epsilon_block,
    },
    MetricDef {
        key: "epsilon_instruction",
        name: "epsilon (instruction)",
        meaning: "same, instruction address",
        label: "ε instruction",
        get: |m| m.epsilon_instruction,
    },
    MetricDef {
        key: "nrmse_sr",
        name: "NRMSE_SR",
        meaning: "weighted error of IP shares (paper 001)",
        label: "NRMSE_SR (paper 001)",
        get: |m| m.nrmse_sr,
    },
    MetricDef {
        key: "sc",
        name: "SC",
        meaning: "share of executions at sampled IPs",
        label: "SC sample coverage (paper 001)",
        get: |m| m.sc,
    },
    MetricDef {
        key: "od",
        name: "OD",
        meaning: "order deviation of sampled IPs (paper 001 as printed, /m)",
        label: "OD order deviation (paper 001, as printed)",
        get: |m| m.od,
    },
    MetricDef {
        key: "od_prose",
        name: "OD (prose)",
        meaning: "same without /m: mean level deviation (paper: 2 = deviated by 2)",
        label: "OD without /m (paper 001's prose reading)",
        get: |m| m.od_prose,
    },
    MetricDef {
        key: "kendall_tau",
        name: "Kendall tau-b",
        meaning: "function rank agreement (1 = same)",
        label: "Kendall tau-b of function ranks",
        get: |m| m.kendall_tau,
    },
    MetricDef {
        key: "top5_overlap",
        name: "top-5 overlap",
        meaning: "hottest 5 functions in common",
        label: "top-5 overlap",
        get: |m| m.top5_overlap,
    },
    MetricDef {
        key: "top10_overlap",
        name: "top-10 overlap",
        meaning: "hottest 10 functions in common",
        label: "top-10 overlap",
        get: |m| m.top10_overlap,
    },
    MetricDef {
        key: "coverage",
        name: "coverage",
        meaning: "functions >1% exact with a sample",
        label: "function coverage (>1% exact with a sample)",
        get: |m| m.coverage,
    },
];

/// One row of the metric table of a report.
pub(crate) struct MetricRow<'a> {
    /// Which metric.
    pub def: &'static MetricDef,
    /// Its value.
    pub value: Option<f64>,
    /// Its value after `--correct-skid`; `None` when the report has no corrected side.
    pub corrected: Option<Option<f64>>,
    /// Why it rests on too few samples to be evidence (`Metrics::too_few`): it keeps its
    /// value, and the reports say so beside it.
    pub too_few: Option<&'a str>,
}

/// The rows of `r`'s metric table, in [`METRICS`] order.
pub(crate) fn metric_rows(r: &AuditReport) -> Vec<MetricRow<'_>> {
    let corrected = r.corrected.as_ref().map(|c| &c.metrics);
    METRICS
        .iter()
        .map(|def| MetricRow {
            def,
            value: (def.get)(&r.metrics),
            corrected: corrected.map(|c| (def.get)(c)),
            too_few: r.metrics.too_few.get(def.key).map(String::as_str),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each metric's key is the JSON field its getter reads (so a `too_few` reason lands on
    /// the right row), and no metric is listed twice.
    #[test]
    fn keys_name_the_fields_the_getters_read() {
        let m = Metrics {
            epsilon_function: Some(1.0),
            epsilon_inline: Some(2.0),
            epsilon_block: Some(3.0),
            epsilon_instruction: Some(4.0),
            nrmse_sr: Some(5.0),
            sc: Some(6.0),
            od: Some(7.0),
            od_prose: Some(8.0),
            kendall_tau: Some(9.0),
            top5_overlap: Some(10.0),
            top10_overlap: Some(11.0),
            coverage: Some(12.0),
            ..Default::default()
        };
        let j = serde_json::to_value(&m).unwrap();
        let mut seen = Vec::new();
        for def in &METRICS {
            assert_eq!(j[def.key].as_f64(), (def.get)(&m), "{}", def.key);
            seen.push((def.get)(&m).unwrap() as u32);
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=12).collect::<Vec<_>>(), "every metric once");
    }

    /// The rows carry the raw value, the corrected one and the too-few reason.
    #[test]
    fn rows_carry_value_corrected_value_and_reason() {
        let mut r = AuditReport::default();
        r.metrics.sc = Some(0.5);
        r.metrics.too_few.insert("sc".into(), "2 samples".into());
        let rows = metric_rows(&r);
        let sc = rows.iter().find(|x| x.def.key == "sc").unwrap();
        assert_eq!(
            (sc.value, sc.corrected, sc.too_few),
            (Some(0.5), None, Some("2 samples"))
        );
        r.corrected = Some(crate::model::CorrectedSide {
            skid: 3.0,
            method: "flow".into(),
            metrics: Metrics {
                sc: Some(0.75),
                ..Default::default()
            },
            functions: Vec::new(),
        });
        let rows = metric_rows(&r);
        let sc = rows.iter().find(|x| x.def.key == "sc").unwrap();
        assert_eq!(sc.corrected, Some(Some(0.75)));
        let od = rows.iter().find(|x| x.def.key == "od").unwrap();
        assert_eq!(
            (od.value, od.corrected, od.too_few),
            (None, Some(None), None)
        );
    }
}
