//! speedscope's JSON file format (`https://www.speedscope.app/file-format-schema.json`):
//! shared frames (`name`, `file`, `line`) and `sampled` profiles whose samples are stacks of
//! frame indices, root first, with one weight each.
//!
//! A sampled profile with a timeline becomes one profile per thread with its samples in
//! time order (speedscope's "Time Order" view is then the real timeline), weighted by the
//! chosen column (1 per sample for `samples`, the period for the event's column). Exact and
//! estimated profiles become one profile of aggregated stacks. Inline frames are expanded
//! as in folded stacks; each frame keeps its source position.

use crate::folded::check_value;
use crate::profile::Profile;
use crate::symbols::Resolver;
use crate::ExportError;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<SampledProfile>,
    name: &'a str,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: String,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<FrameOut>,
}

#[derive(Serialize, Clone, PartialEq, Eq, Hash)]
struct FrameOut {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct SampledProfile {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: f64,
    #[serde(rename = "endValue")]
    end_value: f64,
    samples: Vec<Vec<usize>>,
    weights: Vec<f64>,
}

/// speedscope's units: `none`, `nanoseconds`, `bytes` and a few more.
fn unit(u: &str) -> &'static str {
    match u {
        "nanoseconds" => "nanoseconds",
        "microseconds" => "microseconds",
        "milliseconds" => "milliseconds",
        "seconds" => "seconds",
        "bytes" => "bytes",
        _ => "none",
    }
}

struct Frames<'r, 'a> {
    r: &'r Resolver<'a>,
    index: HashMap<FrameOut, usize>,
    frames: Vec<FrameOut>,
    stacks: HashMap<usize, Vec<usize>>,
}

impl Frames<'_, '_> {
    fn stack(&mut self, p: &Profile, s: usize) -> Vec<usize> {
        if let Some(v) = self.stacks.get(&s) {
            return v.clone();
        }
        let mut out = Vec::new();
        for (i, &loc) in p.stacks[s].frames.iter().enumerate().rev() {
            for f in self.r.frames(loc, i > 0).iter().rev() {
                let fo = FrameOut {
                    name: f.name.clone(),
                    file: f.file.clone(),
                    line: (f.line > 0).then_some(f.line),
                };
                let n = self.frames.len();
                let idx = *self.index.entry(fo.clone()).or_insert(n);
                if idx == n {
                    self.frames.push(fo);
                }
                out.push(idx);
            }
        }
        self.stacks.insert(s, out.clone());
        out
    }
}

/// Writes `p` as a speedscope file weighted by column `value` (module docs).
pub fn write_speedscope<W: Write>(
    mut w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
) -> Result<(), ExportError> {
    check_value(p, value)?;
    let vt = &p.value_types[value];
    let mut fr = Frames {
        r,
        index: HashMap::new(),
        frames: Vec::new(),
        stacks: HashMap::new(),
    };
    let mut profiles = Vec::new();
    if !p.timeline.is_empty() {
        // Per thread, in time order. The column of the sample's event decides whether the
        // sample counts here (several events: each has its own columns).
        let mut threads: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (i, t) in p.timeline.iter().enumerate() {
            if p.counts_in(t, value) {
                threads.entry((t.pid, t.tid)).or_default().push(i);
            }
        }
        let per_sample = vt.kind.ends_with("samples");
        for ((pid, tid), mut idx) in threads {
            idx.sort_by_key(|&i| p.timeline[i].time);
            let mut samples = Vec::with_capacity(idx.len());
            let mut weights = Vec::with_capacity(idx.len());
            for i in idx {
                let t = p.timeline[i];
                samples.push(fr.stack(p, t.stack));
                weights.push(if per_sample { 1.0 } else { t.period as f64 });
            }
            let total: f64 = weights.iter().sum();
            profiles.push(SampledProfile {
                kind: "sampled",
                name: format!("{} (pid {pid}, tid {tid}): {}", p.title, vt.kind),
                unit: unit(&vt.unit),
                start_value: 0.0,
                end_value: total,
                samples,
                weights,
            });
        }
    } else {
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        for (i, s) in p.stacks.iter().enumerate() {
            let v = s.values.get(value).copied().unwrap_or(0.0);
            if v > 0.0 {
                samples.push(fr.stack(p, i));
                weights.push(v);
            }
        }
        let total: f64 = weights.iter().sum();
        profiles.push(SampledProfile {
            kind: "sampled",
            name: format!("{}: {}", p.title, vt.kind),
            unit: unit(&vt.unit),
            start_value: 0.0,
            end_value: total,
            samples,
            weights,
        });
    }
    let file = File {
        schema: "https://www.speedscope.app/file-format-schema.json",
        shared: Shared { frames: fr.frames },
        profiles,
        name: &p.title,
        active_profile_index: 0,
        exporter: format!("proftrust {}", env!("CARGO_PKG_VERSION")),
    };
    serde_json::to_writer(&mut w, &file)?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(())
}
