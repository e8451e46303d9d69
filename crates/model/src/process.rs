//! Processes on both sides of a comparison: the process images an exact run counted
//! ([`ExactProcess`], in [`ExactProfile::processes`](crate::ExactProfile)) and those a
//! recording saw ([`SampledImage`], from [`SampleSet::images`]).
//!
//! A *process image* is a process from its start (the start of the run, or a `fork`) or an
//! `execve` to its exit or its next `execve`: what one program did in one process. Images
//! are named as the kernel names processes (`comm`: the last component of the path given to
//! `execve`, cut to 15 bytes; a forked child keeps its parent's), which is what perf's
//! `COMM` records carry, so images of two runs of one command can be matched by name.

use crate::exact::{InstrCount, RunOutcome};
use crate::sample::SampleSet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How a process image began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageStart {
    /// The program the run started (or, for a recording attached to a running process or
    /// a file without fork records, a process first seen already running).
    Root,
    /// A child forked by another image (same program, new process).
    Fork,
    /// An `execve`: a new program in the same process.
    Exec,
}

impl ImageStart {
    /// How an image began, for a table: `started`, `forked` or `exec`, followed by
    /// `, then exec` when an `execve` replaced it.
    pub fn label(self, replaced: bool) -> String {
        let s = match self {
            ImageStart::Root => "started",
            ImageStart::Fork => "forked",
            ImageStart::Exec => "exec",
        };
        if replaced {
            format!("{s}, then exec")
        } else {
            s.to_string()
        }
    }
}

/// One process image of an exact run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactProcess {
    /// Process id in the exact run (QEMU's or valgrind's process).
    pub pid: u32,
    /// Index in [`ExactProfile::processes`](crate::ExactProfile) of the image that forked
    /// this one (start [`ImageStart::Fork`]) or that this one replaced (`Exec`).
    pub parent: Option<usize>,
    /// How it began.
    pub start: ImageStart,
    /// The process name (see the module docs).
    pub comm: String,
    /// The ELF file it ran (for a `#!` script, the interpreter); empty when unknown.
    pub path: String,
    /// Its arguments (`argv[0]` first, as the kernel gave them); empty when unknown.
    pub argv: Vec<String>,
    /// Instructions it executed (0 when not counted).
    pub total_instructions: u64,
    /// Its own per-instruction counts, sorted by location, in the profile's module table;
    /// **empty when the profile has only this process** (its counts are then the
    /// profile's `instructions`, see
    /// [`ExactProfile::process_instructions`](crate::ExactProfile::process_instructions)).
    #[serde(default)]
    pub instructions: Vec<InstrCount>,
    /// `None` when it was counted; else why not (the backend could not follow it: an
    /// `execve` of a program it cannot run, a process killed before its counts were
    /// written). An image that was not counted is in none of the profile's counts.
    #[serde(default)]
    pub not_counted: Option<String>,
    /// How the image ended, when the backend says (`Exited` also for an image that ended by
    /// an `execve`: see [`ExactProcess::replaced`]).
    #[serde(default)]
    pub outcome: Option<RunOutcome>,
    /// The image ended by an `execve` (another image of the same process follows).
    #[serde(default)]
    pub replaced: bool,
}

/// One process image of a recording (see [`SampleSet::images`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledImage {
    /// Process id.
    pub pid: u32,
    /// Index in the image list of the image that forked this one or that it replaced.
    pub parent: Option<usize>,
    /// How it began.
    pub start: ImageStart,
    /// Time stamp it began at (0: before the recording's first record).
    pub time: u64,
    /// Its name: the `COMM` of its `execve`, its parent's for a forked child, the first
    /// name seen for a process first seen running.
    pub comm: String,
}

/// A `PERF_RECORD_FORK` of a new process (or thread): `pid`/`tid` created by `ppid`/`ptid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStart {
    /// Process id of the new thread (equal to `ppid` for a thread of the same process).
    pub pid: u32,
    /// Thread id of the new thread.
    pub tid: u32,
    /// Process that created it.
    pub ppid: u32,
    /// Thread that created it.
    pub ptid: u32,
    /// Time stamp (the samples' clock; 0 unknown).
    pub time: u64,
}

impl SampleSet {
    /// The recording's process images, in order of their start: from its `FORK` records
    /// ([`SampleSet::forks`]) and the exec names of [`SampleSet::threads`]; a process seen
    /// only in samples or non-exec names (a file without those records, an attached
    /// process) is one [`ImageStart::Root`] image from its first appearance.
    pub fn images(&self) -> Vec<SampledImage> {
        // (time, order, kind): 0 a name (exec or not), 1 a fork, 2 a sample's process.
        let mut events: Vec<(u64, u8, usize)> = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            if t.tid == t.pid {
                events.push((t.time, 0, i));
            }
        }
        for (i, f) in self.forks.iter().enumerate() {
            if f.pid != f.ppid {
                events.push((f.time, 1, i));
            }
        }
        let mut first_sample: HashMap<u32, (u64, usize)> = HashMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            let e = first_sample.entry(s.pid).or_insert((s.time, i));
            if s.time < e.0 {
                *e = (s.time, i);
            }
        }
        for (&_, &(t, i)) in &first_sample {
            events.push((t, 2, i));
        }
        // Forks before the exec names of the same time stamp (a child execs after it
        // exists); names before samples.
        events.sort_by_key(|&(t, k, i)| (t, k != 1, k, i));
        let mut images: Vec<SampledImage> = Vec::new();
        let mut current: HashMap<u32, usize> = HashMap::new();
        for (time, kind, i) in events {
            match kind {
                0 => {
                    let t = &self.threads[i];
                    match current.get(&t.pid).copied() {
                        Some(c) if !t.exec => {
                            // A rename (prctl) or a name perf synthesised: the image keeps
                            // its exec name, unless it had none yet.
                            if images[c].comm.is_empty() {
                                images[c].comm = t.comm.clone();
                            }
                        }
                        prev => {
                            let start = if t.exec {
                                ImageStart::Exec
                            } else {
                                ImageStart::Root
                            };
                            current.insert(t.pid, images.len());
                            images.push(SampledImage {
                                pid: t.pid,
                                parent: prev,
                                start,
                                time,
                                comm: t.comm.clone(),
                            });
                        }
                    }
                }
                1 => {
                    let f = &self.forks[i];
                    let parent = current.get(&f.ppid).copied();
                    let comm = parent.map(|p| images[p].comm.clone()).unwrap_or_default();
                    current.insert(f.pid, images.len());
                    images.push(SampledImage {
                        pid: f.pid,
                        parent,
                        start: ImageStart::Fork,
                        time,
                        comm,
                    });
                }
                _ => {
                    let s = &self.samples[i];
                    if let std::collections::hash_map::Entry::Vacant(v) = current.entry(s.pid) {
                        v.insert(images.len());
                        images.push(SampledImage {
                            pid: s.pid,
                            parent: None,
                            start: ImageStart::Root,
                            time: 0,
                            comm: self.comm_at(s.pid, s.tid, s.time).unwrap_or("").to_string(),
                        });
                    }
                }
            }
        }
        images
    }

    /// The image of every sample (parallel to [`SampleSet::samples`]): the last image of
    /// its process that began at or before the sample's time (else the process's first).
    pub fn image_of_samples(&self, images: &[SampledImage]) -> Vec<Option<usize>> {
        let mut per: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
        for (i, im) in images.iter().enumerate() {
            per.entry(im.pid).or_default().push((im.time, i));
        }
        self.samples
            .iter()
            .map(|s| {
                let v = per.get(&s.pid)?;
                let n = v.partition_point(|&(t, _)| t <= s.time);
                Some(v[n.saturating_sub(1)].1)
            })
            .collect()
    }
}

/// The root of a recording's program among `images` (see [`SampleSet::images`]): for the
/// image holding most samples (`counts`, per image), the first image begun by an `execve`
/// on its chain of parents from the top (perf's own process and its child before the exec
/// of the command are not the program), else the top of the chain.
pub fn program_root(images: &[SampledImage], counts: &[u64]) -> Option<usize> {
    let busiest = (0..images.len())
        .max_by_key(|&i| (counts.get(i).copied().unwrap_or(0), std::cmp::Reverse(i)))?;
    let mut chain = vec![busiest];
    let mut at = busiest;
    while let Some(p) = images[at].parent {
        if chain.len() > images.len() {
            break;
        }
        chain.push(p);
        at = p;
    }
    chain.reverse();
    chain
        .iter()
        .copied()
        .find(|&i| images[i].start == ImageStart::Exec)
        .or(chain.first().copied())
}

/// Whether image `i` descends from `root` (or is it) through fork and exec links.
pub fn descends_from(images: &[SampledImage], mut i: usize, root: usize) -> bool {
    for _ in 0..=images.len() {
        if i == root {
            return true;
        }
        match images[i].parent {
            Some(p) => i = p,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Location, ModuleIdx, Sample, ThreadName};

    fn name(pid: u32, time: u64, comm: &str, exec: bool) -> ThreadName {
        ThreadName {
            pid,
            tid: pid,
            time,
            comm: comm.into(),
            exec,
        }
    }

    fn fork(pid: u32, ppid: u32, time: u64) -> ThreadStart {
        ThreadStart {
            pid,
            tid: pid,
            ppid,
            ptid: ppid,
            time,
        }
    }

    fn sample(pid: u32, time: u64) -> Sample {
        Sample {
            event: 0,
            pid,
            tid: pid,
            time,
            cpu: 0,
            period: 1,
            ip: Location::new(ModuleIdx(0), 0x1000),
            callchain: Vec::new(),
            branches: Vec::new(),
        }
    }

    /// `perf record -- sh -c 'sort f | uniq'` by hand: perf (10) forks 11, which execs sh;
    /// sh forks 12 and 13, which exec sort and uniq. The images, their parents and names;
    /// the samples' images; the program's root is sh's image, not perf's.
    #[test]
    fn images_of_a_shell_pipeline() {
        let set = SampleSet {
            threads: vec![
                name(10, 0, "perf", false),
                name(11, 100, "sh", true),
                name(12, 300, "sort", true),
                name(13, 310, "uniq", true),
                name(12, 400, "renamed", false),
            ],
            forks: vec![
                fork(11, 10, 50),
                fork(12, 11, 200),
                fork(13, 11, 210),
                ThreadStart {
                    pid: 12,
                    tid: 14,
                    ppid: 12,
                    ptid: 12,
                    time: 350,
                },
            ],
            samples: vec![
                sample(11, 150),
                sample(12, 250),
                sample(12, 500),
                sample(13, 600),
                sample(12, 700),
            ],
            ..Default::default()
        };
        let im = set.images();
        let got: Vec<(u32, Option<usize>, ImageStart, &str)> = im
            .iter()
            .map(|i| (i.pid, i.parent, i.start, i.comm.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, None, ImageStart::Root, "perf"),
                (11, Some(0), ImageStart::Fork, "perf"),
                (11, Some(1), ImageStart::Exec, "sh"),
                (12, Some(2), ImageStart::Fork, "sh"),
                (13, Some(2), ImageStart::Fork, "sh"),
                (12, Some(3), ImageStart::Exec, "sort"),
                (13, Some(4), ImageStart::Exec, "uniq"),
            ]
        );
        let of = set.image_of_samples(&im);
        assert_eq!(of, vec![Some(2), Some(3), Some(5), Some(6), Some(5)]);
        let mut counts = vec![0u64; im.len()];
        for i in of.into_iter().flatten() {
            counts[i] += 1;
        }
        assert_eq!(program_root(&im, &counts), Some(2));
        assert!(descends_from(&im, 6, 2));
        assert!(!descends_from(&im, 1, 2));
    }

    /// Without fork or exec records (perf script text): one root image per process, named
    /// from the samples' comm.
    #[test]
    fn processes_seen_only_in_samples_are_root_images() {
        let set = SampleSet {
            threads: vec![ThreadName {
                pid: 7,
                tid: 7,
                time: 0,
                comm: "prog".into(),
                exec: false,
            }],
            samples: vec![sample(7, 5), sample(8, 6)],
            ..Default::default()
        };
        let im = set.images();
        assert_eq!(im.len(), 2);
        assert_eq!(
            (im[0].pid, im[0].comm.as_str(), im[0].start),
            (7, "prog", ImageStart::Root)
        );
        assert_eq!((im[1].pid, im[1].comm.as_str()), (8, ""));
        assert_eq!(program_root(&im, &[1, 1]), Some(0));
    }
}
