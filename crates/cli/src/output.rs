//! Output files (`-o`, `--html`, `--exact`, `--folded`, `--svg` ...): checked before any
//! work starts, written so that a failure leaves nothing half-written.
//!
//! * [`check`] runs first in every command: a directory is an error, so is a missing parent
//!   directory or one where no file can be created, and an existing file that cannot be
//!   written; the program is not run for nothing.
//! * [`write()`] writes a **regular file** (or a new path) atomically: an anonymous file
//!   (`O_TMPFILE`) in the same directory, given a temporary name only once complete and
//!   renamed over the path, so a failure, an interrupt or a crash leaves no temporary and
//!   no half-written file (file systems without `O_TMPFILE` get a named temporary that is
//!   removed on failure). An existing file keeps its permission bits. A **device, FIFO or
//!   socket** (`/dev/null`, `/dev/stdout`, a named pipe) is opened and written directly, as
//!   any tool would, and `-` is standard output. Symbolic links are followed: the file they
//!   point to is replaced, not the link.

use anyhow::{bail, Context, Result};
use proftrust_pipeline::export::{ExportSpec, Job, Sides};
use proftrust_report::{Report, TextOptions};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the bytes of a [`write()`] go.
#[derive(Debug)]
pub enum Sink {
    /// A file: the anonymous temporary, the named fallback, or a device/FIFO.
    File(File),
    /// Standard output (`-`).
    Stdout(std::io::Stdout),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Stdout(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Stdout(s) => s.flush(),
        }
    }
}

/// What an output path is.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// `-`.
    Stdout,
    /// A character or block device, FIFO or socket: written in place.
    Direct(PathBuf),
    /// A regular file (`mode` when it exists) or a new path, after following symlinks.
    Regular { path: PathBuf, mode: Option<u32> },
}

fn directory_of(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Follows symbolic links (also dangling ones: the target is the file to create).
fn follow(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(t) => p = directory_of(&p).join(t),
                Err(_) => break,
            },
            _ => break,
        }
    }
    p
}

fn kind(path: &Path) -> Result<Kind> {
    if path.as_os_str() == "-" {
        return Ok(Kind::Stdout);
    }
    if path.as_os_str().is_empty() {
        bail!("an empty output path: give a file name (or - for standard output)");
    }
    let target = follow(path);
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => bail!(
            "{} is a directory: give the name of a file to write",
            path.display()
        ),
        Ok(m) if m.is_file() => {
            // Opening for writing (without truncating) checks the permission now, before
            // any work; the file itself is replaced, not written in place.
            OpenOptions::new()
                .write(true)
                .open(&target)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(Kind::Regular {
                path: target,
                mode: Some(m.permissions().mode() & 0o7777),
            })
        }
        Ok(m) => {
            let t = m.file_type();
            if t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket() {
                Ok(Kind::Direct(target))
            } else {
                bail!("{}: not a file proftrust can write", path.display())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = directory_of(&target);
            match std::fs::metadata(dir) {
                Ok(d) if d.is_dir() => {}
                Ok(_) => bail!(
                    "cannot create {}: {} is not a directory",
                    path.display(),
                    dir.display()
                ),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "cannot create {}: directory {}",
                            path.display(),
                            dir.display()
                        )
                    })
                }
            }
            // Probe: can a file be created there at all (permissions, read-only mount)?
            tempfile::tempfile_in(dir).with_context(|| {
                format!(
                    "cannot create {}: no file can be created in {}",
                    path.display(),
                    dir.display()
                )
            })?;
            Ok(Kind::Regular {
                path: target,
                mode: None,
            })
        }
        Err(e) => Err(e).with_context(|| format!("cannot write {}", path.display())),
    }
}

/// Checks that `path` can be written (see the module documentation). Call it before any
/// work; [`write()`] checks again when it writes.
pub fn check(path: &Path) -> Result<()> {
    kind(path).map(|_| ())
}

/// [`check`] for an optional path.
pub fn check_opt(path: Option<&PathBuf>) -> Result<()> {
    path.map_or(Ok(()), |p| check(p))
}

/// Writes `path` (see the module documentation): `f` writes the contents; only when it
/// succeeds does the file appear (regular files) or count as written.
pub fn write(path: &Path, f: impl FnOnce(&mut BufWriter<Sink>) -> Result<()>) -> Result<()> {
    write_as(path, false, f).map(|_| ())
}

/// Writes `path` as [`write()`] does, keeping a non-empty regular file it replaces as
/// `PATH.old` (what `perf record` does with an existing `perf.data`; an older `PATH.old` is
/// replaced). Returns the `.old` path when one was kept.
pub fn write_keeping_old(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<Sink>) -> Result<()>,
) -> Result<Option<PathBuf>> {
    write_as(path, true, f)
}

fn write_as(
    path: &Path,
    keep_old: bool,
    f: impl FnOnce(&mut BufWriter<Sink>) -> Result<()>,
) -> Result<Option<PathBuf>> {
    let complete = |w: &mut BufWriter<Sink>| -> Result<()> {
        // A bare I/O error of the writer (ENOSPC, EIO) names the file it failed on.
        f(w).map_err(|e| {
            if e.chain().count() == 1 && e.downcast_ref::<std::io::Error>().is_some() {
                e.context(format!("cannot write {}", path.display()))
            } else {
                e
            }
        })?;
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))
    };
    match kind(path)? {
        Kind::Stdout => {
            complete(&mut BufWriter::new(Sink::Stdout(std::io::stdout()))).map(|_| None)
        }
        Kind::Direct(p) => {
            let file = OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("cannot open {}", path.display()))?;
            complete(&mut BufWriter::new(Sink::File(file))).map(|_| None)
        }
        Kind::Regular { path: target, mode } => {
            write_regular(path, &target, mode, keep_old, complete)
        }
    }
}

/// Moves a non-empty regular file at `target` to `target.old`, once the new contents are
/// complete and about to be renamed over it.
fn keep_old_file(shown: &Path, target: &Path) -> Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.is_file() && m.len() > 0 => {
            let mut old = target.as_os_str().to_owned();
            old.push(".old");
            let old = PathBuf::from(old);
            std::fs::rename(target, &old).with_context(|| {
                format!(
                    "cannot keep the previous {} as {}",
                    shown.display(),
                    old.display()
                )
            })?;
            Ok(Some(old))
        }
        _ => Ok(None),
    }
}

/// Writes `text` to `path` as [`write()`] does, or to standard output when there is no path
/// (a command's `-o FILE` or its report on stdout).
pub fn write_text(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        Some(p) => write(p, |w| {
            w.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", p.display()))
        }),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .context("cannot write to stdout")
        }
    }
}

/// Where a command's report goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportTo {
    /// `-o FILE`: written as [`write()`] writes (atomically).
    File(PathBuf),
    /// Standard output (no `-o`, or `-o -`).
    Stdout,
    /// Standard error (`audit` running a program whose output has standard output).
    Stderr,
}

impl ReportTo {
    /// `-o PATH` (`-` is standard output), else standard output.
    pub fn output(path: Option<&Path>) -> ReportTo {
        match path {
            Some(p) if p.as_os_str() != "-" => ReportTo::File(p.to_path_buf()),
            _ => ReportTo::Stdout,
        }
    }

    /// Whether the report lands on a terminal (colours, only then and without `NO_COLOR`).
    fn colors(&self) -> bool {
        use std::io::IsTerminal;
        let terminal = match self {
            ReportTo::File(_) => false,
            ReportTo::Stdout => std::io::stdout().is_terminal(),
            ReportTo::Stderr => std::io::stderr().is_terminal(),
        };
        terminal && std::env::var_os("NO_COLOR").is_none()
    }
}

/// The output step of every command with a report: the JSON (`json`) or the text (`top`
/// rows per table, colours on a terminal) written to `to`; with the text of a report that
/// leaves its warnings out ([`Report::warnings_on_stderr`]), each warning on standard error
/// as `proftrust: warning: MESSAGE`.
pub fn write_report<R: Report + ?Sized>(
    report: &R,
    to: &ReportTo,
    json: bool,
    top: usize,
) -> Result<()> {
    let text = if json {
        report.to_json().context("cannot encode the JSON report")?
    } else {
        if report.warnings_on_stderr() {
            for w in report.warnings() {
                crate::util::note(format!("warning: {w}"));
            }
        }
        report.render_text(&TextOptions {
            top,
            color: to.colors(),
        })
    };
    match to {
        ReportTo::File(p) => write_text(Some(p), &text),
        ReportTo::Stdout => write_text(None, &text),
        ReportTo::Stderr => {
            let mut e = std::io::stderr().lock();
            e.write_all(text.as_bytes())
                .and_then(|_| e.flush())
                .context("cannot write the report to stderr")
        }
    }
}

/// Writes the HTML page of `report` (`--html FILE`, [`write()`]) and says where it went.
pub fn write_html<R: Report + ?Sized>(report: &R, path: &Path, top: usize) -> Result<()> {
    let o = TextOptions { top, color: false };
    let Some(html) = report.render_html(&o) else {
        bail!("this report has no HTML page");
    };
    write_text(Some(path), &html)?;
    crate::util::note(format!("HTML report written to {}", path.display()));
    Ok(())
}

/// Checks every `--export` file before any work ([`check`]).
pub fn check_exports(specs: &[ExportSpec]) -> Result<()> {
    for s in specs {
        check(&s.file)
            .with_context(|| format!("--export {}:{}", s.target.name(), s.file.display()))?;
    }
    Ok(())
}

/// Writes one export to `out` ([`write()`]: atomically, `-` = standard output) and notes
/// where it went.
pub fn write_export(job: &Job<'_>, out: &Path) -> Result<()> {
    write(out, |w| {
        Ok(proftrust_pipeline::export::write_export(
            job,
            w,
            &crate::util::Ui,
        )?)
    })?;
    if out.as_os_str() != "-" {
        crate::util::note(format_args!(
            "{} written to {}",
            job.target.name(),
            out.display()
        ));
    }
    Ok(())
}

/// Writes every `--export` of `audit` or `correct` from the sides the command has.
pub fn write_exports(specs: &[ExportSpec], sides: &Sides<'_>) -> Result<()> {
    for (spec, job) in proftrust_pipeline::export::export_jobs(specs, sides)? {
        write_export(&job, &spec.file)
            .with_context(|| format!("--export {}:{}", spec.target.name(), spec.file.display()))?;
    }
    Ok(())
}

/// A name for the temporary link, unique in this process.
fn temporary_name(target: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    directory_of(target).join(format!(
        ".{name}.proftrust-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn write_regular(
    shown: &Path,
    target: &Path,
    mode: Option<u32>,
    keep_old: bool,
    complete: impl FnOnce(&mut BufWriter<Sink>) -> Result<()>,
) -> Result<Option<PathBuf>> {
    let dir = directory_of(target);
    let anonymous = OpenOptions::new()
        .write(true)
        .mode(0o666)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    let (file, named) = match anonymous {
        Ok(f) => (f, None),
        // No O_TMPFILE on this file system: a named temporary, removed unless persisted.
        Err(_) => {
            let t = tempfile::Builder::new()
                .prefix(".proftrust-")
                .permissions(std::fs::Permissions::from_mode(0o666))
                .tempfile_in(dir)
                .with_context(|| format!("cannot create a file in {}", dir.display()))?;
            let f = t
                .as_file()
                .try_clone()
                .with_context(|| format!("cannot create a file in {}", dir.display()))?;
            (f, Some(t))
        }
    };
    if let Some(m) = mode {
        file.set_permissions(std::fs::Permissions::from_mode(m))
            .with_context(|| format!("cannot keep the permissions of {}", shown.display()))?;
    }
    let mut w = BufWriter::new(Sink::File(file));
    complete(&mut w)?;
    let Sink::File(file) = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("cannot write {}", shown.display()))?
    else {
        unreachable!("write_regular writes to a file")
    };
    let mut kept = None;
    match named {
        Some(t) => {
            drop(file);
            if keep_old {
                kept = keep_old_file(shown, target)?;
            }
            t.persist(target)
                .with_context(|| format!("cannot write {}", shown.display()))?;
        }
        None => {
            let tmp = temporary_name(target);
            crate::sys::link_anonymous(&file, &tmp)
                .with_context(|| format!("cannot write {}", shown.display()))?;
            if keep_old {
                kept = keep_old_file(shown, target).inspect_err(|_| {
                    let _ = std::fs::remove_file(&tmp);
                })?;
            }
            if let Err(e) = std::fs::rename(&tmp, target) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e).with_context(|| format!("cannot write {}", shown.display()));
            }
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("proftrust"))
            .collect()
    }

    /// Each case: what the path is, whether `check` accepts it, and what `write` leaves.
    #[test]
    fn output_paths_table() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        // new file: created with the umask's mode, no temporary left.
        let new = dir.join("new.out");
        check(&new).unwrap();
        write(&new, |w| Ok(w.write_all(b"abc")?)).unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"abc");
        assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
        // existing 0600 file: replaced, mode kept.
        let private = dir.join("private.out");
        std::fs::write(&private, "old").unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
        write(&private, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read(&private).unwrap(), b"new");
        let m = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600);
        // a failing writer leaves the old contents and no temporary.
        let e = write(&private, |w| {
            w.write_all(b"half")?;
            bail!("writer failed")
        })
        .unwrap_err();
        assert!(e.to_string().contains("writer failed"), "{e}");
        assert_eq!(std::fs::read(&private).unwrap(), b"new");
        assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
        // a directory is refused by check, before any work.
        let e = check(dir).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        assert!(leftovers(dir).is_empty());
        // a missing parent directory.
        let e = check(&dir.join("no/such/dir/x.out")).unwrap_err();
        assert!(format!("{e:#}").contains("no/such/dir"), "{e:#}");
        // a symlink: the target is replaced, the link stays.
        let link = dir.join("link.out");
        std::os::unix::fs::symlink("new.out", &link).unwrap();
        write(&link, |w| Ok(w.write_all(b"via link")?)).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&new).unwrap(), b"via link");
        // /dev/null stays a device.
        write(Path::new("/dev/null"), |w| Ok(w.write_all(b"gone")?)).unwrap();
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
        // /dev/full: the device's error, not a regular file in its place.
        if Path::new("/dev/full").exists() {
            let e = write(Path::new("/dev/full"), |w| {
                w.write_all(&[0u8; 100_000])?;
                Ok(())
            })
            .unwrap_err();
            assert!(format!("{e:#}").contains("No space left"), "{e:#}");
            assert!(std::fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device());
        }
        // a FIFO is written in place.
        let fifo = dir.join("fifo");
        crate::sys::mkfifo(&fifo).unwrap();
        let reader = {
            let f = fifo.clone();
            std::thread::spawn(move || std::fs::read(f).unwrap())
        };
        write(&fifo, |w| Ok(w.write_all(b"through the pipe")?)).unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        // an empty path.
        assert!(check(Path::new("")).is_err());
    }
}
