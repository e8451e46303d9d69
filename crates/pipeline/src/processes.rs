//! The same processes on both sides of an audit (docs/processes.md, "Process trees"): the
//! process images of the samples ([`SampleSet::images`]: fork, exec and name records) and
//! those of the exact run ([`ExactProfile::processes`]) matched by name (the kernel's
//! `comm`), by how they began (the started program, a fork, an exec) and by whether an
//! `execve` replaced them; a group whose images differ in number between the sides, or
//! that the exact run could not count, is left out of both sides and named. What is kept
//! is summarised per process name ([`ProcessRow`]).

use proftrust_model::process::{descends_from, program_root};
use proftrust_model::{ExactProfile, ImageStart, SampleSet, SampledImage, Warning, WarningKind};
use proftrust_report::ProcessRow;
use std::collections::{BTreeMap, BTreeSet};

/// What identifies a group of images on both sides: the name (`None` for the started
/// program, which is one image on each side whatever its name), how it began and whether
/// an `execve` replaced it. Without fork or exec records on the sample side (perf script
/// text) only the name counts.
type Key = (Option<String>, Option<(ImageStart, bool)>);

/// The groups an audit compares, to restrict further recordings of the same program
/// (`--sweep`) the same way.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessSet {
    compared: BTreeSet<Key>,
    detailed: bool,
    /// Nothing to restrict (no images on the sample side).
    all: bool,
}

/// A sample-side image with its key parts.
struct Side {
    comm: String,
    start: ImageStart,
    replaced: bool,
}

/// What [`sample_images`] returns: the images, each sample's image, the root, and the
/// sample-side descriptions.
type SampleImages = (
    Vec<SampledImage>,
    Vec<Option<usize>>,
    Option<usize>,
    Vec<Option<Side>>,
);

/// The images of `samples` below the program's root: the started process's first exec
/// image when `started` (a recording proftrust made) names it, else the root of the
/// busiest image's chain ([`program_root`]). Returns the images, each sample's image, the
/// root, and the sample-side descriptions (`None` outside the program's tree).
fn sample_images(samples: &SampleSet, started: Option<u32>) -> SampleImages {
    let images = samples.images();
    let of = samples.image_of_samples(&images);
    let mut counts = vec![0u64; images.len()];
    for i in of.iter().flatten() {
        counts[*i] += 1;
    }
    let root = match started {
        Some(pid) => images.iter().position(|i| i.pid == pid),
        None => program_root(&images, &counts),
    };
    let sides = (0..images.len())
        .map(|i| {
            let root = root?;
            if !descends_from(&images, i, root) {
                return None;
            }
            let replaced = images.iter().any(|j| {
                j.parent == Some(i) && j.start == ImageStart::Exec && j.pid == images[i].pid
            });
            Some(Side {
                comm: images[i].comm.clone(),
                start: if i == root {
                    ImageStart::Root
                } else {
                    images[i].start
                },
                replaced,
            })
        })
        .collect();
    (images, of, root, sides)
}

fn key(detailed: bool, comm: &str, start: ImageStart, replaced: bool) -> Key {
    if start == ImageStart::Root {
        return (None, detailed.then_some((ImageStart::Root, replaced)));
    }
    (
        Some(comm.to_string()),
        detailed.then_some((start, replaced)),
    )
}

/// How a group began, for its row.
fn start_label(k: &Key) -> String {
    match k.1 {
        None if k.0.is_none() => "started".into(),
        None => "-".into(),
        Some((s, replaced)) => s.label(replaced),
    }
}

/// One group of images on both sides.
#[derive(Default)]
struct Group {
    name: String,
    /// Sample-side images.
    sampled: Vec<usize>,
    /// Exact images counted.
    counted: Vec<usize>,
    /// Exact images listed but not counted, with why.
    uncounted: Vec<(usize, String)>,
}

/// Matches the process images of both sides (module docs), leaves out of both what cannot
/// be compared (samples dropped, exact images' counts removed), says so in `warnings`, and
/// returns the set compared and a row per process name. `event`: the compared event (the
/// rows count its samples). With `exact` `None` (interrupted before the exact run) the
/// samples are kept to the program's tree.
pub(crate) fn compare_same_processes(
    samples: &mut SampleSet,
    exact: Option<&mut ExactProfile>,
    started: Option<u32>,
    event: u16,
    warnings: &mut Vec<Warning>,
) -> (ProcessSet, Vec<ProcessRow>) {
    let (images, of, root, sides) = sample_images(samples, started);
    if root.is_none() {
        return (
            ProcessSet {
                all: true,
                ..Default::default()
            },
            Vec::new(),
        );
    }
    leave_out_other_trees(samples, &of, &sides, warnings);
    let detailed = !samples.forks.is_empty() || samples.threads.iter().any(|t| t.exec);
    let Some(exact) = exact else {
        return (
            ProcessSet {
                all: true,
                detailed,
                ..Default::default()
            },
            Vec::new(),
        );
    };
    let mut groups = sampled_groups(&sides, detailed);
    // An exact profile that lists no processes (a file of an older proftrust, a callgrind
    // file): one image, the started program.
    let listed = !exact.processes.is_empty();
    let mut wildcards = add_exact_images(&mut groups, exact, detailed);
    let totals = group_totals(&groups, samples, &of, images.len(), event, exact);
    let mut compared: BTreeSet<Key> = BTreeSet::new();
    let mut left: BTreeMap<Key, String> = BTreeMap::new();
    for (k, g) in &groups {
        if let Some(why) = why_left_out(k, g, detailed, &mut wildcards) {
            left.insert(k.clone(), why);
        } else {
            compared.insert(k.clone());
        }
    }
    let (samples_before, exact_before) = (samples.samples.len() as u64, exact.total_instructions);
    let dropped = keep_groups(samples, &of, exact, &groups, &compared);
    // Shown when the exact side lists its processes (a run here; files of older versions
    // and other tools do not say).
    let rows = if listed {
        rows_of(&groups, &compared, &left, &totals, exact, &images)
    } else {
        Vec::new()
    };
    if !left.is_empty() {
        warnings.push(Warning::new(WarningKind::Scope, format!(
            "processes left out of both sides: {}; {dropped} of {samples_before} samples and {} of {exact_before} exact instructions left out{}",
            left_out_names(&groups, &left),
            exact_before.saturating_sub(exact.total_instructions),
            if rows.is_empty() {
                ""
            } else {
                " (the rows under `processes`)"
            },
        )));
    }
    let set = ProcessSet {
        compared,
        detailed,
        all: false,
    };
    (set, rows)
}

/// An exact image whose name the backend does not know (callgrind's part of a forked child
/// before its exec): how it began, and why it was not counted.
type Wildcard = ((ImageStart, bool), String);

/// The groups of the sample-side images of the program's tree (`sides`), by [`Key`].
fn sampled_groups(sides: &[Option<Side>], detailed: bool) -> BTreeMap<Key, Group> {
    let mut groups: BTreeMap<Key, Group> = BTreeMap::new();
    for (i, s) in sides.iter().enumerate() {
        if let Some(s) = s {
            let g = groups
                .entry(key(detailed, &s.comm, s.start, s.replaced))
                .or_default();
            g.name = s.comm.clone();
            g.sampled.push(i);
        }
    }
    groups
}

/// Adds the exact images to their groups (counted, or not with why); an exact profile
/// that lists no processes counts as the started program alone (`usize::MAX`: its
/// totals). Returns the images without a name, matched by how they began alone.
fn add_exact_images(
    groups: &mut BTreeMap<Key, Group>,
    exact: &ExactProfile,
    detailed: bool,
) -> Vec<Wildcard> {
    let mut wildcards = Vec::new();
    if exact.processes.is_empty() {
        // The file's one process is the started program (up to its first exec).
        let root_key = groups
            .keys()
            .find(|k| k.0.is_none())
            .cloned()
            .unwrap_or((None, None));
        groups.entry(root_key).or_default().counted.push(usize::MAX);
        return wildcards;
    }
    for (i, p) in exact.processes.iter().enumerate() {
        let start = if i == 0 { ImageStart::Root } else { p.start };
        if p.comm.is_empty() && start != ImageStart::Root {
            let why = p.not_counted.clone().unwrap_or_default();
            wildcards.push(((start, p.replaced), why));
            continue;
        }
        let g = groups
            .entry(key(detailed, &p.comm, start, p.replaced))
            .or_default();
        if g.name.is_empty() {
            g.name = p.comm.clone();
        }
        match &p.not_counted {
            None => g.counted.push(i),
            Some(why) => g.uncounted.push((i, why.clone())),
        }
    }
    wildcards
}

/// Samples (of the compared `event`) and exact instructions per group, before anything is
/// left out. `of`: each sample's image among `n_images`.
fn group_totals(
    groups: &BTreeMap<Key, Group>,
    samples: &SampleSet,
    of: &[Option<usize>],
    n_images: usize,
    event: u16,
    exact: &ExactProfile,
) -> BTreeMap<Key, (u64, u64)> {
    let mut per_image = vec![0u64; n_images];
    for (smp, im) in samples.samples.iter().zip(of) {
        if let (true, Some(i)) = (smp.event == event, im) {
            per_image[*i] += 1;
        }
    }
    groups
        .iter()
        .map(|(k, g)| {
            let n = g.sampled.iter().map(|&i| per_image[i]).sum();
            let instr = g
                .counted
                .iter()
                .map(|&i| match i {
                    usize::MAX => exact.total_instructions,
                    i => exact.processes[i].total_instructions,
                })
                .sum();
            (k.clone(), (n, instr))
        })
        .collect()
}

/// Why group `g` (key `k`) is left out of both sides, `None` when it is compared: as many
/// images on both sides, all counted (without fork and exec records, at least as many
/// exact ones). A group with no exact image takes the reason of the nameless exact images
/// that began as it did (`wildcards`, one used per sampled image).
fn why_left_out(
    k: &Key,
    g: &Group,
    detailed: bool,
    wildcards: &mut Vec<Wildcard>,
) -> Option<String> {
    let (s, t, u) = (g.sampled.len(), g.counted.len(), g.uncounted.len());
    if u == 0 && (s == t || (!detailed && s <= t)) {
        return None;
    }
    let began_so = |(how, _): &Wildcard| k.1.is_none_or(|kh| kh == *how);
    if t == 0 && u == 0 {
        if let Some(w) = wildcards.iter().position(began_so) {
            let why = wildcards[w].1.clone();
            for _ in 0..s {
                if let Some(w) = wildcards.iter().position(began_so) {
                    wildcards.remove(w);
                }
            }
            return Some(why);
        }
    }
    Some(if t == 0 && s == u {
        g.uncounted[0].1.clone()
    } else if u > 0 {
        format!(
            "{s} in the samples, {t} counted exactly and {u} not ({})",
            g.uncounted[0].1
        )
    } else {
        format!("{s} in the samples, {t} in the exact run: not the same processes")
    })
}

/// Leaves out of both sides what is not `compared`: the samples of other groups' images
/// (`of`: each sample's image) and the counts of other exact images. Returns how many
/// samples were dropped.
fn keep_groups(
    samples: &mut SampleSet,
    of: &[Option<usize>],
    exact: &mut ExactProfile,
    groups: &BTreeMap<Key, Group>,
    compared: &BTreeSet<Key>,
) -> u64 {
    let kept = || groups.iter().filter(|(k, _)| compared.contains(k));
    let keep_images: BTreeSet<usize> = kept()
        .flat_map(|(_, g)| g.sampled.iter().copied())
        .collect();
    let mut dropped = 0u64;
    let mut keep_flags = of
        .iter()
        .map(|im| im.is_some_and(|i| keep_images.contains(&i)));
    samples.samples.retain(|_| {
        let k = keep_flags.next().unwrap_or(false);
        dropped += u64::from(!k);
        k
    });
    let kept_exact: Vec<usize> = kept()
        .flat_map(|(_, g)| g.counted.iter().copied())
        .filter(|&i| i != usize::MAX)
        .collect();
    if !exact.processes.is_empty() {
        exact.keep_processes(
            &kept_exact,
            "left out: the samples do not have the same processes of this name",
        );
    }
    dropped
}

/// `name (how it began: why)` of each group left out, `; `-separated.
fn left_out_names(groups: &BTreeMap<Key, Group>, left: &BTreeMap<Key, String>) -> String {
    let names: Vec<String> = groups
        .iter()
        .filter(|(k, _)| left.contains_key(*k))
        .map(|(k, g)| {
            format!(
                "{} ({}: {})",
                if g.name.is_empty() {
                    "?".into()
                } else {
                    g.name.clone()
                },
                start_label(k),
                left[k]
            )
        })
        .collect();
    names.join("; ")
}

/// Drops the samples of processes outside the program's tree (perf's own, other
/// programs of a system-wide recording), with a warning naming them.
fn leave_out_other_trees(
    samples: &mut SampleSet,
    of: &[Option<usize>],
    sides: &[Option<Side>],
    warnings: &mut Vec<Warning>,
) {
    let total = samples.samples.len() as u64;
    let mut pids: BTreeMap<u32, u64> = BTreeMap::new();
    let mut keep = Vec::with_capacity(of.len());
    for (s, im) in samples.samples.iter().zip(of) {
        let inside = im.is_some_and(|i| sides[i].is_some());
        if !inside {
            *pids.entry(s.pid).or_default() += 1;
        }
        keep.push(inside);
    }
    if pids.is_empty() {
        return;
    }
    let mut k = keep.into_iter();
    samples.samples.retain(|_| k.next().unwrap_or(false));
    let n: u64 = pids.values().sum();
    let list: Vec<String> = pids.keys().take(8).map(|p| p.to_string()).collect();
    warnings.push(Warning::new(WarningKind::Scope, format!(
        "{n} of {total} samples ({:.2}%) are in {} process(es) outside the audited program's process tree (pid {}{}): left out",
        100.0 * n as f64 / total.max(1) as f64,
        pids.len(),
        list.join(", "),
        if pids.len() > 8 { ", ..." } else { "" }
    )));
}

/// The rows of the processes table: compared groups by exact instructions (the started
/// program first), then those left out. `totals`: each group's samples and exact
/// instructions.
fn rows_of(
    groups: &BTreeMap<Key, Group>,
    compared: &BTreeSet<Key>,
    left: &BTreeMap<Key, String>,
    totals: &BTreeMap<Key, (u64, u64)>,
    exact: &ExactProfile,
    images: &[SampledImage],
) -> Vec<ProcessRow> {
    let (total_samples, total_exact) = totals
        .iter()
        .filter(|(k, _)| compared.contains(*k))
        .fold((0, 0), |(a, b), (_, (n, i))| (a + n, b + i));
    let mut rows: Vec<(bool, ProcessRow)> = Vec::new();
    for (k, g) in groups {
        let is_compared = compared.contains(k);
        if !is_compared && !left.contains_key(k) {
            continue;
        }
        let (n, instr) = totals.get(k).copied().unwrap_or_default();
        let mut sampled_pids: Vec<u32> = g.sampled.iter().map(|&i| images[i].pid).collect();
        sampled_pids.sort_unstable();
        sampled_pids.dedup();
        let mut exact_pids: Vec<u32> = g
            .counted
            .iter()
            .chain(g.uncounted.iter().map(|(i, _)| i))
            .filter(|&&i| i != usize::MAX)
            .filter_map(|&i| exact.processes.get(i).map(|p| p.pid))
            .collect();
        exact_pids.sort_unstable();
        exact_pids.dedup();
        let share = |x: u64, t: u64| if t == 0 { 0.0 } else { x as f64 / t as f64 };
        rows.push((
            k.0.is_none(),
            ProcessRow {
                name: g.name.clone(),
                start: start_label(k),
                sampled_images: g.sampled.len() as u64,
                exact_images: (g.counted.len() + g.uncounted.len()) as u64,
                samples: n,
                sampled_share: if is_compared {
                    share(n, total_samples)
                } else {
                    0.0
                },
                exact_instructions: instr,
                exact_share: if is_compared {
                    share(instr, total_exact)
                } else {
                    0.0
                },
                sampled_pids,
                exact_pids,
                left_out: left.get(k).cloned(),
            },
        ));
    }
    rows.sort_by(|a, b| {
        (
            b.0,
            b.1.left_out.is_none(),
            b.1.exact_instructions,
            b.1.samples,
        )
            .cmp(&(
                a.0,
                a.1.left_out.is_none(),
                a.1.exact_instructions,
                a.1.samples,
            ))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// Keeps the samples of a further recording of the same program (`--sweep`) in the groups
/// `set` compared, as [`compare_same_processes`] kept the first one's.
pub(crate) fn keep_compared(samples: &mut SampleSet, set: &ProcessSet, started: Option<u32>) {
    if set.all {
        return;
    }
    let (_, of, _, sides) = sample_images(samples, started);
    let keep: Vec<bool> = of
        .iter()
        .map(|im| {
            im.and_then(|i| sides[i].as_ref()).is_some_and(|s| {
                set.compared
                    .contains(&key(set.detailed, &s.comm, s.start, s.replaced))
            })
        })
        .collect();
    let mut k = keep.into_iter();
    samples.samples.retain(|_| k.next().unwrap_or(false));
}
