//! The analyzer's side of following a process tree under QEMU (`follow=`, protocol in
//! `docs/exact.md`): a listening Unix socket in the abstract namespace (nothing on disk to
//! leak), one connection per process image besides the started one, each read to its end
//! by a thread of its own while the program runs (a writer never waits on the analyzer for
//! long), and the images' counts put together once the run is over.

use crate::protocol::{Decoder, ProcessRecord, Record, Resolver, Snapshot, SnapshotReason};
use crate::ExactError;
use proftrust_model::{ExactProcess, ImageStart};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One image's stream, read to its end: its records in order, or why it could not be.
pub(crate) struct Stream {
    /// The header's pid.
    pub pid: u32,
    /// Header: edges on.
    pub edges: bool,
    /// Header: plugin API version.
    pub api: u8,
    /// Its records.
    pub records: Vec<Record>,
    /// A decoding error met before the end.
    pub error: Option<String>,
}

/// The socket the images of a followed tree connect to, and the threads reading them.
pub(crate) struct Listener {
    /// The abstract socket name given to the plugin (`follow=`).
    pub name: String,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<Vec<Reader>>>,
}

/// A connection and the thread reading it.
type Reader = (std::os::unix::net::UnixStream, JoinHandle<Stream>);

impl Listener {
    /// Binds a new abstract socket and starts accepting.
    pub fn start() -> Result<Listener, ExactError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "proftrust-tree-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| ExactError::io("naming the process-tree socket", e))?;
        let l = UnixListener::bind_addr(&addr)
            .map_err(|e| ExactError::io("binding the process-tree socket", e))?;
        l.set_nonblocking(true)
            .map_err(|e| ExactError::io("the process-tree socket", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let acceptor = std::thread::spawn(move || {
            let mut readers = Vec::new();
            loop {
                match l.accept() {
                    Ok((c, _)) => {
                        let _ = c.set_nonblocking(false);
                        if let Ok(handle) = c.try_clone() {
                            readers.push((handle, std::thread::spawn(move || read_stream(c))));
                        }
                        continue;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
                // Stopped, and nothing was waiting at the last look: every image of the
                // run has connected (the run is over and its processes are gone).
                if s.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            readers
        });
        Ok(Listener {
            name,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// After the run (every process of it ended): the streams of every image that
    /// connected, in the order they connected. A connection still open
    /// [`proftrust_supervise::TERM_GRACE`] later (a process that escaped the end of the run)
    /// is shut down: its stream ends there.
    pub fn finish(mut self) -> Vec<Stream> {
        self.stop.store(true, Ordering::Release);
        let readers = self
            .acceptor
            .take()
            .and_then(|a| a.join().ok())
            .unwrap_or_default();
        end_readers(readers)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(a) = self.acceptor.take() {
            end_readers(a.join().unwrap_or_default());
        }
    }
}

/// Joins the readers, shutting down the connections still open after the grace period.
fn end_readers(readers: Vec<Reader>) -> Vec<Stream> {
    let deadline = std::time::Instant::now() + proftrust_supervise::TERM_GRACE;
    while readers.iter().any(|(_, r)| !r.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    readers
        .into_iter()
        .filter_map(|(c, r)| {
            if !r.is_finished() {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
            r.join().ok()
        })
        .collect()
}

/// Reads one connection to its end.
fn read_stream(c: std::os::unix::net::UnixStream) -> Stream {
    let mut out = Stream {
        pid: 0,
        edges: false,
        api: 0,
        records: Vec::new(),
        error: None,
    };
    let mut d = match Decoder::new(std::io::BufReader::new(c)) {
        Ok(Some(d)) => d,
        Ok(None) => {
            out.error = Some("the image connected but wrote nothing".into());
            return out;
        }
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    out.pid = d.pid;
    out.edges = d.edges;
    out.api = d.api;
    loop {
        match d.next_record() {
            Ok(Some(r)) => out.records.push(r),
            Ok(None) => break,
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
        }
    }
    out
}

/// What the stream of one image says beyond its counts.
#[derive(Debug, Default)]
pub(crate) struct ImageNotes {
    /// Its PROCESS record.
    pub process: Option<ProcessRecord>,
    /// `execve`s it asked for that took effect (the stream ends after them), followed or
    /// not.
    pub exec: Option<ExecNote>,
}

/// An `execve` that replaced the image.
#[derive(Debug, Clone)]
pub(crate) struct ExecNote {
    /// The new image's id (`None`: not followed).
    pub image: Option<u32>,
    /// Its name, ELF, arguments.
    pub comm: String,
    /// The ELF.
    pub path: String,
    /// Its arguments.
    pub argv: Vec<String>,
    /// Why it is not followed.
    pub why: String,
}

/// Applies records to `resolver` (definitions), returning the last snapshot, whether END
/// came, and the notes. An EXEC record counts only when nothing but its snapshot and END
/// follow it (else the `execve` failed and the image ran on).
pub(crate) fn apply_records(
    resolver: &mut Resolver,
    records: Vec<Record>,
) -> Result<(Option<Snapshot>, bool, ImageNotes), ExactError> {
    let mut snapshot = None;
    let mut clean = false;
    let mut notes = ImageNotes::default();
    for r in records {
        note_record(&mut notes, &r);
        match r {
            Record::Module { id, base, path } => {
                resolver.module(id, base, &path);
            }
            Record::Block {
                id,
                module,
                end,
                addrs,
                ..
            } => resolver.block(id, module, end, &addrs)?,
            Record::Snapshot(s) => snapshot = Some(s),
            Record::End => clean = true,
            _ => {}
        }
    }
    Ok((snapshot, clean, notes))
}

/// Keeps what a record says about the image (see [`apply_records`]).
pub(crate) fn note_record(notes: &mut ImageNotes, r: &Record) {
    match r {
        Record::Process(p) => notes.process = Some(*p),
        Record::Exec {
            image,
            comm,
            path,
            why,
            argv,
        } => {
            notes.exec = Some(ExecNote {
                image: *image,
                comm: comm.clone(),
                path: path.clone(),
                argv: argv.clone(),
                why: why.clone(),
            })
        }
        // The snapshot written before the exec, and the END after a followed one.
        Record::Snapshot(s) if s.reason == SnapshotReason::Exec => {}
        Record::End => {}
        _ => notes.exec = None,
    }
}

/// A process image of the tree, assembled from its stream.
pub(crate) struct Image {
    /// The image's id.
    pub id: u32,
    /// The listing (counts filled in by the caller).
    pub process: ExactProcess,
}

/// The image list of a tree from the root's notes and the other streams' notes: comm, ELF
/// and arguments of an exec'd image from its parent's EXEC record, of a forked one from its
/// parent; an exec that was not followed becomes an image not counted. `root` is image 0.
pub(crate) fn image_list(
    root: ExactProcess,
    root_notes: &ImageNotes,
    others: &[(ImageNotes, u32)],
) -> Vec<Image> {
    let mut images = vec![Image {
        id: 0,
        process: root,
    }];
    // New image id -> (the image that exec'd, its EXEC record).
    let mut exec_of: std::collections::HashMap<u32, (u32, &ExecNote)> = Default::default();
    let mut unfollowed: Vec<(u32, &ExecNote)> = Vec::new();
    let froms = std::iter::once((0, root_notes)).chain(
        others
            .iter()
            .filter_map(|(n, _)| n.process.map(|p| (p.image, n))),
    );
    for (from, n) in froms {
        if let Some(e) = &n.exec {
            match e.image {
                Some(k) => {
                    exec_of.insert(k, (from, e));
                }
                None => unfollowed.push((from, e)),
            }
        }
    }
    let mut order: Vec<&(ImageNotes, u32)> =
        others.iter().filter(|(n, _)| n.process.is_some()).collect();
    order.sort_by_key(|(n, _)| n.process.map_or(u32::MAX, |p| p.image));
    for (n, pid) in order {
        let Some(p) = n.process else { continue };
        let parent = images.iter().find(|i| Some(i.id) == p.parent);
        let (comm, path, argv) = match (p.start, exec_of.get(&p.image), parent) {
            (ImageStart::Exec, Some((_, e)), _) => (e.comm.clone(), e.path.clone(), e.argv.clone()),
            (_, _, Some(par)) => (
                par.process.comm.clone(),
                par.process.path.clone(),
                par.process.argv.clone(),
            ),
            _ => Default::default(),
        };
        let parent_idx = images.iter().position(|i| Some(i.id) == p.parent);
        if p.start == ImageStart::Exec {
            if let Some(pi) = parent_idx {
                images[pi].process.replaced = true;
            }
        }
        images.push(Image {
            id: p.image,
            process: ExactProcess {
                pid: *pid,
                parent: parent_idx,
                start: p.start,
                comm,
                path,
                argv,
                total_instructions: 0,
                instructions: Vec::new(),
                not_counted: None,
                outcome: None,
                replaced: false,
            },
        });
    }
    // Announced images that never reported: QEMU could not start on them.
    let mut lost: Vec<(u32, u32, &ExecNote)> = exec_of
        .iter()
        .filter(|(k, _)| !images.iter().any(|i| i.id == **k))
        .map(|(&k, &(from, e))| (k, from, e))
        .collect();
    lost.sort_by_key(|x| x.0);
    unfollowed.extend(lost.into_iter().map(|(_, from, e)| (from, e)));
    for (from, e) in unfollowed {
        let parent_idx = images.iter().position(|i| i.id == from);
        if let Some(pi) = parent_idx {
            images[pi].process.replaced = true;
        }
        let pid = parent_idx.map_or(0, |i| images[i].process.pid);
        images.push(Image {
            id: u32::MAX,
            process: ExactProcess {
                pid,
                parent: parent_idx,
                start: ImageStart::Exec,
                comm: e.comm.clone(),
                path: e.path.clone(),
                argv: e.argv.clone(),
                total_instructions: 0,
                instructions: Vec::new(),
                not_counted: Some(if e.why.is_empty() {
                    "QEMU did not start on the program the process exec'd".into()
                } else {
                    e.why.clone()
                }),
                outcome: None,
                replaced: false,
            },
        });
    }
    images
}

/// One profile of a whole tree from each image's listing and counts (`None`: not counted),
/// in order (the `parent` indices of the listings point into this order): the counts are
/// summed, each counted image keeps its own, and the backend fields come from the first
/// counted image.
pub(crate) fn assemble(
    list: Vec<(ExactProcess, Option<proftrust_model::ExactProfile>)>,
) -> proftrust_model::ExactProfile {
    let mut out = proftrust_model::ExactProfile::default();
    let listed: Vec<ExactProcess> = list.iter().map(|(p, _)| p.clone()).collect();
    let mut first: Option<(
        String,
        String,
        Vec<String>,
        Option<proftrust_model::RunOutcome>,
    )> = None;
    for (proc, prof) in list {
        match prof {
            Some(mut p) if proc.not_counted.is_none() => {
                if first.is_none() {
                    first = Some((
                        p.backend.clone(),
                        p.backend_detail.clone(),
                        p.command.clone(),
                        p.outcome.clone(),
                    ));
                    out.extra_cost_names = p.extra_cost_names.clone();
                }
                p.processes = vec![proc];
                out.merge(&p);
            }
            _ => out.processes.push(proc),
        }
    }
    for (p, l) in out.processes.iter_mut().zip(listed) {
        p.parent = l.parent;
        p.start = l.start;
        p.not_counted = l.not_counted;
        p.replaced = l.replaced;
    }
    if out.processes.len() == 1 {
        out.processes[0].instructions.clear();
    }
    if let Some((backend, detail, command, outcome)) = first {
        out.backend = backend;
        out.backend_detail = detail;
        out.command = command;
        out.outcome = outcome;
    }
    out
}

/// `; N process images, M counted` for a backend's detail when `p` lists several images
/// (empty otherwise).
pub(crate) fn images_phrase(p: &proftrust_model::ExactProfile) -> String {
    if p.processes.len() < 2 {
        return String::new();
    }
    let counted = p
        .processes
        .iter()
        .filter(|x| x.not_counted.is_none())
        .count();
    format!("; {} process images, {counted} counted", p.processes.len())
}
