//! Following a process tree (`follow=NAME`, count mode; protocol in [`crate::wire`]): a
//! forked child reports on a stream of its own, and an `execve` of the guest runs QEMU with
//! this plugin on the new program instead of running it natively.
//!
//! * **fork**: QEMU's `fork()` runs the `pthread_atfork` handlers: before it, the parent's
//!   buffered records are written (so the definitions the child inherits are in the
//!   parent's stream) under the plugin's lock, which the child then re-initialises: new image
//!   id, a new connection to the analyzer, every count zeroed (the child's own counts start
//!   at the fork), the first block after the fork a thread start.
//! * **exec**: in the system call hook, before QEMU's own `execve`: the path, `argv` and
//!   `envp` are read from guest memory (through `/proc/self/mem`; the guest base is the
//!   difference between a translated instruction's host and guest addresses), the program is
//!   resolved as the kernel would (`proftrust_supervise::exec::plan_exec`: `#!` chains), and
//!   when it is an x86-64 ELF the image writes its final counts and QEMU is started again
//!   (`/proc/self/exe`, the same options, this plugin with `image=` the new id) on it, with
//!   the guest's environment. An `execve` the kernel would refuse is left to fail as it
//!   would; a program QEMU cannot run (another architecture) runs natively, uncounted, and
//!   the EXEC record says so.
//!
//! Not carried into an exec'd image: signals the guest ignored (QEMU emulates the guest's
//! dispositions; the new QEMU starts with defaults) and the guest's blocked signals (the
//! new image starts with none blocked).

use crate::wire::{self, Put};
use std::ffi::{c_int, CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// What following needs, set at install when `follow=` is given (count mode only).
pub(crate) struct Follow {
    /// The analyzer's abstract socket name.
    pub name: String,
    /// The shared counter file, kept open (close-on-exec) for the next image.
    pub shm_fd: c_int,
    /// The control pipe, kept open (close-on-exec) for the next image; -1 without one.
    pub ctl_fd: c_int,
    /// `edges=` of this run.
    pub edges: bool,
}

pub(crate) static FOLLOW: OnceLock<Follow> = OnceLock::new();
/// This image's id (0: the started program).
pub(crate) static IMAGE: AtomicU32 = AtomicU32::new(0);
/// The shared file's image counter (null without `shm=`).
pub(crate) static IMAGES_SHARED: std::sync::atomic::AtomicPtr<u64> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// Host address minus guest address (user mode: `g2h`), known once a block with host
/// addresses was translated.
static GUEST_BASE: AtomicU64 = AtomicU64::new(0);
static GUEST_BASE_KNOWN: AtomicBool = AtomicBool::new(false);

/// Whether following is on.
pub(crate) fn on() -> bool {
    FOLLOW.get().is_some()
}

/// Records the guest base from a translated instruction (guest and host address).
#[inline]
pub(crate) fn note_guest_base(vaddr: u64, haddr: u64) {
    if haddr != 0 && !GUEST_BASE_KNOWN.load(Relaxed) {
        GUEST_BASE.store(haddr.wrapping_sub(vaddr), Relaxed);
        GUEST_BASE_KNOWN.store(true, Relaxed);
    }
}

/// The next image id, from the shared counter (so every process of the tree draws from one
/// sequence).
pub(crate) fn next_image() -> u32 {
    let p = IMAGES_SHARED.load(Relaxed);
    if p.is_null() {
        return u32::MAX;
    }
    // SAFETY: a u64 of the shared mapping (8-aligned, mapped for the life of the process
    // and in every process of the tree, accessed only atomically).
    let v = unsafe { std::sync::atomic::AtomicU64::from_ptr(p) }.fetch_add(1, Relaxed) + 1;
    v.min(u32::MAX as u64 - 1) as u32
}

/// A new connection to the analyzer's socket.
pub(crate) fn connect() -> Result<std::fs::File, String> {
    use std::os::linux::net::SocketAddrExt;
    let f = FOLLOW.get().ok_or("following is off")?;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(f.name.as_bytes())
        .map_err(|e| format!("socket name {}: {e}", f.name))?;
    let s = std::os::unix::net::UnixStream::connect_addr(&addr)
        .map_err(|e| format!("cannot reach the analyzer: {e}"))?;
    Ok(std::fs::File::from(std::os::fd::OwnedFd::from(s)))
}

/// The PROCESS record.
pub(crate) fn process_record(
    image: u32,
    parent: u32,
    start: u8,
    blocks: u32,
    modules: u32,
) -> Vec<u8> {
    let mut r = Vec::with_capacity(22);
    r.u8(wire::TAG_PROCESS);
    r.u32(image);
    r.u32(parent);
    r.u8(start);
    r.u32(std::process::id());
    r.u32(blocks);
    r.u32(modules);
    r
}

/// The EXEC record: the new image (or `u32::MAX`) and its strings.
fn exec_record(image: u32, strings: &[&[u8]]) -> Vec<u8> {
    let mut r = Vec::new();
    r.u8(wire::TAG_EXEC);
    r.u32(image);
    r.u16(strings.len().min(u16::MAX as usize) as u16);
    for s in strings.iter().take(u16::MAX as usize) {
        r.u32(s.len() as u32);
        r.extend_from_slice(s);
    }
    r
}

/// Longest string read from guest memory (`MAX_ARG_STRLEN`, 32 pages).
const MAX_STR: usize = 32 * 4096;
/// Most `argv`/`envp` entries read.
const MAX_ARGS: usize = 1 << 20;

/// `len` bytes of guest memory at `addr` (through `/proc/self/mem`, so a bad pointer is an
/// error, not a fault).
fn read_guest(mem: &std::fs::File, addr: u64, buf: &mut [u8]) -> bool {
    use std::os::unix::fs::FileExt;
    if !GUEST_BASE_KNOWN.load(Relaxed) {
        return false;
    }
    let host = addr.wrapping_add(GUEST_BASE.load(Relaxed));
    mem.read_exact_at(buf, host).is_ok()
}

/// The NUL-terminated string at guest address `addr`.
fn guest_str(mem: &std::fs::File, addr: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        // Up to the end of the page, so that a string ending just before an unmapped page
        // reads.
        let n = (4096 - (at % 4096)) as usize;
        let mut buf = vec![0u8; n];
        if !read_guest(mem, at, &mut buf) {
            return None;
        }
        if let Some(z) = buf.iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..z]);
            return Some(out);
        }
        out.extend_from_slice(&buf);
        if out.len() > MAX_STR {
            return None;
        }
        at += n as u64;
    }
}

/// The NULL-terminated array of string pointers at guest address `addr` (NULL: empty).
fn guest_strs(mem: &std::fs::File, addr: u64) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    if addr == 0 {
        return Some(out);
    }
    for i in 0..MAX_ARGS as u64 {
        let mut p = [0u8; 8];
        if !read_guest(mem, addr + 8 * i, &mut p) {
            return None;
        }
        let p = u64::from_le_bytes(p);
        if p == 0 {
            return Some(out);
        }
        out.push(guest_str(mem, p)?);
    }
    None
}

/// An `execve` (`dirfd` `None`) or `execveat` of the guest, before QEMU runs it: follow it
/// when the plugin can (see the module docs). Returns only when the exec is left to QEMU.
pub(crate) fn on_exec(path: u64, argv: u64, envp: u64, at: Option<(i64, u64)>) {
    let Ok(mem) = std::fs::File::open("/proc/self/mem") else {
        return;
    };
    let (Some(file), Some(args), Some(env)) = (
        guest_str(&mem, path),
        guest_strs(&mem, argv),
        guest_strs(&mem, envp),
    ) else {
        return;
    };
    let file = match at {
        // execveat: relative to the directory `dirfd`, or the file `dirfd` itself.
        Some((dirfd, flags)) if file.is_empty() && flags & libc::AT_EMPTY_PATH as u64 != 0 => {
            format!("/proc/self/fd/{dirfd}").into_bytes()
        }
        Some((dirfd, _)) if !file.starts_with(b"/") && dirfd != libc::AT_FDCWD as i64 => {
            let mut p = format!("/proc/self/fd/{dirfd}/").into_bytes();
            p.extend_from_slice(&file);
            p
        }
        _ => file,
    };
    let file_os = OsString::from_vec(file.clone());
    let args_os: Vec<OsString> = args.iter().map(|a| OsString::from_vec(a.clone())).collect();
    // Refused by the kernel too: the exec fails under QEMU as it would natively.
    let Ok(plan) = proftrust_supervise::exec::plan_exec(file_os.as_ref(), &args_os) else {
        return;
    };
    let elf = plan.elf.as_os_str().as_bytes().to_vec();
    if !plan.ident.is_x86_64() {
        let why = format!(
            "an {} program, which qemu-x86_64 cannot run: it ran natively, uncounted",
            plan.ident.machine_name()
        );
        crate::put_record(&exec_record(
            u32::MAX,
            &[plan.comm.as_bytes(), &elf, why.as_bytes()],
        ));
        crate::snapshot(1);
        return;
    }
    let image = next_image();
    let mut strings: Vec<&[u8]> = vec![plan.comm.as_bytes(), &elf, b""];
    let argv_bytes: Vec<Vec<u8>> = plan.argv.iter().map(|a| a.as_bytes().to_vec()).collect();
    strings.extend(argv_bytes.iter().map(|a| a.as_slice()));
    crate::put_record(&exec_record(image, &strings));
    crate::snapshot(1);
    crate::end_stream();
    if let Err(e) = exec_qemu(image, &plan, &env) {
        eprintln!(
            "proftrust-qemu-plugin: cannot follow the execve of {}: {e}",
            plan.elf.display()
        );
    }
}

/// Replaces this process by QEMU running `plan` as image `image`; returns only on failure.
fn exec_qemu(
    image: u32,
    plan: &proftrust_supervise::exec::ExecPlan,
    env: &[Vec<u8>],
) -> Result<(), String> {
    let f = FOLLOW.get().ok_or("following is off")?;
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let cmdline =
        std::fs::read("/proc/self/cmdline").map_err(|e| format!("/proc/self/cmdline: {e}"))?;
    let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    // QEMU's options as the runner wrote them (`-plugin SPEC [-cpu X] -0 ARGV0 PROGRAM
    // ARGS`): the plugin's file from SPEC, the other options kept.
    let mut so: Option<&[u8]> = None;
    let mut options: Vec<&[u8]> = Vec::new();
    let mut i = 1;
    while i < words.len() && words[i] != b"-0" {
        if words[i] == b"-plugin" && i + 1 < words.len() {
            let spec = words[i + 1];
            so = Some(spec.split(|&b| b == b',').next().unwrap_or(spec));
            i += 2;
            continue;
        }
        options.push(words[i]);
        i += 1;
    }
    let so = so.ok_or("no -plugin option on QEMU's command line")?;
    let mut spec = so.to_vec();
    spec.extend_from_slice(
        format!(
            ",mode=count,edges={},follow={},image={image},parent={},shm=fd:{}{}",
            if f.edges { "on" } else { "off" },
            f.name,
            IMAGE.load(Relaxed),
            f.shm_fd,
            if f.ctl_fd >= 0 {
                format!(",ctl=fd:{}", f.ctl_fd)
            } else {
                String::new()
            },
        )
        .as_bytes(),
    );
    let mut argv: Vec<Vec<u8>> = vec![
        exe.as_os_str().as_bytes().to_vec(),
        b"-plugin".to_vec(),
        spec,
    ];
    argv.extend(options.iter().map(|o| o.to_vec()));
    argv.push(b"-0".to_vec());
    argv.push(
        plan.argv
            .first()
            .map_or_else(Vec::new, |a| a.as_bytes().to_vec()),
    );
    argv.push(plan.elf.as_os_str().as_bytes().to_vec());
    argv.extend(plan.argv.iter().skip(1).map(|a| a.as_bytes().to_vec()));
    let cs = |v: &[Vec<u8>]| -> Result<Vec<CString>, String> {
        v.iter()
            .map(|b| CString::new(b.clone()).map_err(|_| "a NUL byte in an argument".to_string()))
            .collect()
    };
    let argv = cs(&argv)?;
    let envp = cs(env)?;
    let exe_c =
        CString::new(exe.as_os_str().as_bytes()).map_err(|_| "a NUL byte in QEMU's path")?;
    crate::sys_exec(&exe_c, &argv, &envp, &[f.shm_fd, f.ctl_fd])
}
