//! QEMU's plugin API (`qemu-plugin.h`), resolved at run time.
//!
//! One shared object serves two API generations:
//! * **version 1** (QEMU 7.x/8.x, e.g. Debian bookworm's 7.2): shared inline counters
//!   (`qemu_plugin_register_vcpu_tb_exec_inline`, a non-atomic add), `qemu_plugin_insn_data`
//!   returning a pointer;
//! * **version 4** (QEMU >= 9.2): per-vCPU scoreboards for inline operations (race-free),
//!   inline stores and conditional callbacks; `qemu_plugin_insn_data` copies into a buffer
//!   (since version 3) and the shared inline add is gone (since version 2).
//!
//! QEMU reads the plugin's `qemu_plugin_version` right after `dlopen` and refuses a version
//! below its minimum (2 for QEMU >= 9) or above its own. So the version is chosen in a
//! load-time constructor ([`detect`]) from the symbols the QEMU executable exports, and every
//! API function is looked up with `dlsym(RTLD_DEFAULT, ..)` instead of being linked: a
//! symbol missing from one generation is then no load error. Declarations are written from
//! the header's documented signatures (no bindings crate).

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::OnceLock;

/// `qemu_plugin_id_t`.
pub type PluginId = u64;

/// Opaque `struct qemu_plugin_tb`.
#[repr(C)]
pub struct Tb {
    _private: [u8; 0],
}

/// Opaque `struct qemu_plugin_insn`.
#[repr(C)]
pub struct Insn {
    _private: [u8; 0],
}

/// Opaque `struct qemu_plugin_scoreboard` (API >= 2).
#[repr(C)]
pub struct Scoreboard {
    _private: [u8; 0],
}

/// `qemu_plugin_u64`: one `u64` at `offset` in every vCPU's element of a scoreboard.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ScoreU64 {
    /// The scoreboard.
    pub score: *mut Scoreboard,
    /// Byte offset inside each element.
    pub offset: usize,
}

/// `enum qemu_plugin_cb_flags`: `QEMU_PLUGIN_CB_NO_REGS`.
pub const CB_NO_REGS: c_int = 0;
/// `enum qemu_plugin_op`: `QEMU_PLUGIN_INLINE_ADD_U64`.
pub const INLINE_ADD_U64: c_int = 0;
/// `enum qemu_plugin_op`: `QEMU_PLUGIN_INLINE_STORE_U64` (API >= 2).
pub const INLINE_STORE_U64: c_int = 1;
/// `enum qemu_plugin_cond`: `QEMU_PLUGIN_COND_NE` (API >= 2).
pub const COND_NE: c_int = 3;

/// `enum qemu_plugin_mem_rw`: `QEMU_PLUGIN_MEM_RW` (loads and stores).
pub const MEM_RW: c_int = 3;
/// `qemu_plugin_meminfo_t`: opaque access description (size, sign, endianness, store).
pub type MemInfo = u32;

/// `qemu_plugin_vcpu_mem_cb_t`.
pub type VcpuMemCb =
    extern "C" fn(vcpu_index: c_uint, info: MemInfo, vaddr: u64, udata: *mut c_void);
/// `qemu_plugin_vcpu_tb_trans_cb_t`.
pub type TbTransCb = extern "C" fn(id: PluginId, tb: *mut Tb);
/// `qemu_plugin_vcpu_udata_cb_t`.
pub type VcpuUdataCb = extern "C" fn(vcpu_index: c_uint, udata: *mut c_void);
/// `qemu_plugin_vcpu_simple_cb_t`.
pub type VcpuSimpleCb = extern "C" fn(id: PluginId, vcpu_index: c_uint);
/// `qemu_plugin_udata_cb_t`.
pub type UdataCb = extern "C" fn(id: PluginId, udata: *mut c_void);
/// `qemu_plugin_vcpu_syscall_cb_t`.
pub type SyscallCb = extern "C" fn(
    id: PluginId,
    vcpu_index: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    a7: u64,
    a8: u64,
);

/// The API version this plugin declares to QEMU (set by [`detect`] before QEMU reads it).
#[allow(non_upper_case_globals)]
#[no_mangle]
pub static qemu_plugin_version: AtomicI32 = AtomicI32::new(1);

/// Runs when the dynamic loader maps the plugin, before QEMU reads `qemu_plugin_version`.
#[used]
#[link_section = ".init_array"]
static DETECT: extern "C" fn() = detect;

/// Declares API version 4 when the QEMU executable exports the version-4 functions the
/// plugin uses, else version 1.
extern "C" fn detect() {
    let v4 = [
        "qemu_plugin_scoreboard_new",
        "qemu_plugin_read_memory_vaddr",
    ]
    .iter()
    .all(|n| !sym(n).is_null());
    qemu_plugin_version.store(if v4 { 4 } else { 1 }, Relaxed);
}

fn sym(name: &str) -> *mut c_void {
    let Ok(c) = std::ffi::CString::new(name) else {
        return std::ptr::null_mut();
    };
    // SAFETY: dlsym with a valid NUL-terminated name; RTLD_DEFAULT searches the executable
    // and its libraries (QEMU exports its plugin API from the executable).
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) }
}

macro_rules! api {
    ($( $field:ident : $name:literal => fn($($a:ty),*) $(-> $r:ty)? ;)*) => {
        /// The API functions both generations share, and the generation-specific ones.
        #[allow(missing_docs)]
        pub struct Api {
            /// The API version declared to QEMU (1 or 4).
            pub version: i32,
            $( pub $field: unsafe extern "C" fn($($a),*) $(-> $r)?, )*
            pub v1: Option<V1>,
            pub v4: Option<V4>,
        }
        impl Api {
            fn load() -> Result<Api, String> {
                // SAFETY: each symbol is QEMU's function of that name, whose C signature
                // (qemu-plugin.h, same in versions 1 and 4) the field's type declares.
                unsafe {
                    Ok(Api {
                        version: qemu_plugin_version.load(Relaxed),
                        $( $field: std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) $(-> $r)?>(need($name)?), )*
                        v1: None,
                        v4: None,
                    })
                }
            }
        }
    };
}

api! {
    register_vcpu_tb_trans_cb: "qemu_plugin_register_vcpu_tb_trans_cb" => fn(PluginId, TbTransCb);
    register_vcpu_tb_exec_cb: "qemu_plugin_register_vcpu_tb_exec_cb" => fn(*mut Tb, VcpuUdataCb, c_int, *mut c_void);
    register_vcpu_mem_cb: "qemu_plugin_register_vcpu_mem_cb" => fn(*mut Insn, VcpuMemCb, c_int, c_int, *mut c_void);
    mem_size_shift: "qemu_plugin_mem_size_shift" => fn(MemInfo) -> c_uint;
    mem_is_store: "qemu_plugin_mem_is_store" => fn(MemInfo) -> bool;
    register_vcpu_init_cb: "qemu_plugin_register_vcpu_init_cb" => fn(PluginId, VcpuSimpleCb);
    register_vcpu_exit_cb: "qemu_plugin_register_vcpu_exit_cb" => fn(PluginId, VcpuSimpleCb);
    register_vcpu_syscall_cb: "qemu_plugin_register_vcpu_syscall_cb" => fn(PluginId, SyscallCb);
    register_atexit_cb: "qemu_plugin_register_atexit_cb" => fn(PluginId, UdataCb, *mut c_void);
    tb_n_insns: "qemu_plugin_tb_n_insns" => fn(*const Tb) -> usize;
    tb_get_insn: "qemu_plugin_tb_get_insn" => fn(*const Tb, usize) -> *mut Insn;
    insn_size: "qemu_plugin_insn_size" => fn(*const Insn) -> usize;
    insn_vaddr: "qemu_plugin_insn_vaddr" => fn(*const Insn) -> u64;
    insn_haddr: "qemu_plugin_insn_haddr" => fn(*const Insn) -> *mut c_void;
}

/// Version-1 only functions.
pub struct V1 {
    /// `qemu_plugin_register_vcpu_tb_exec_inline` (one shared, non-atomic counter).
    pub tb_exec_inline: unsafe extern "C" fn(*mut Tb, c_int, *mut c_void, u64),
    /// `qemu_plugin_insn_data` of versions 1 and 2 (a pointer to the bytes).
    pub insn_data: unsafe extern "C" fn(*const Insn) -> *const c_void,
}

/// Version-4 only functions.
pub struct V4 {
    /// `qemu_plugin_scoreboard_new(element_size)`.
    pub scoreboard_new: unsafe extern "C" fn(usize) -> *mut Scoreboard,
    /// `qemu_plugin_scoreboard_find(score, vcpu_index)`: the vCPU's element (its address
    /// changes when QEMU grows the scoreboard for a new vCPU).
    pub scoreboard_find: unsafe extern "C" fn(*mut Scoreboard, c_uint) -> *mut c_void,
    /// `qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, op, entry, imm)`.
    pub tb_exec_inline_per_vcpu: unsafe extern "C" fn(*mut Tb, c_int, ScoreU64, u64),
    /// `qemu_plugin_register_vcpu_tb_exec_cond_cb(tb, cb, flags, cond, entry, imm, udata)`.
    pub tb_exec_cond_cb:
        unsafe extern "C" fn(*mut Tb, VcpuUdataCb, c_int, c_int, ScoreU64, u64, *mut c_void),
    /// `qemu_plugin_insn_data(insn, dest, len)` of version >= 3 (copies the bytes).
    pub insn_data: unsafe extern "C" fn(*const Insn, *mut c_void, usize) -> usize,
}

/// QEMU's function `name` as the function pointer type `F`.
///
/// # Safety
/// `F` is the function pointer type of `name`'s C signature.
unsafe fn get<F: Copy>(name: &str) -> Result<F, String> {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    let p = need(name)?;
    // SAFETY: per the caller's contract, `p` is a function of type `F` (a pointer).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

fn need(name: &str) -> Result<*mut c_void, String> {
    let p = sym(name);
    if p.is_null() {
        Err(format!(
            "this QEMU does not export {name} (a QEMU without plugin support, or an API version other than 1 or >= 4)"
        ))
    } else {
        Ok(p)
    }
}

static API: OnceLock<Api> = OnceLock::new();

/// Resolves the API (once; at install). Errors name the missing function.
pub fn init() -> Result<&'static Api, String> {
    if let Some(a) = API.get() {
        return Ok(a);
    }
    let mut a = Api::load()?;
    // SAFETY: as in `Api::load`: each pointer is QEMU's function of that name with the
    // declared signature of the API version chosen by `detect`.
    unsafe {
        if a.version >= 4 {
            a.v4 = Some(V4 {
                scoreboard_new: get("qemu_plugin_scoreboard_new")?,
                scoreboard_find: get("qemu_plugin_scoreboard_find")?,
                tb_exec_inline_per_vcpu: get("qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu")?,
                tb_exec_cond_cb: get("qemu_plugin_register_vcpu_tb_exec_cond_cb")?,
                insn_data: get("qemu_plugin_insn_data")?,
            });
        } else {
            a.v1 = Some(V1 {
                tb_exec_inline: get("qemu_plugin_register_vcpu_tb_exec_inline")?,
                insn_data: get("qemu_plugin_insn_data")?,
            });
        }
    }
    Ok(API.get_or_init(|| a))
}

/// The resolved API (after [`init`] succeeded in `qemu_plugin_install`).
#[inline(always)]
pub fn api() -> &'static Api {
    API.get().expect("qemu_plugin_install resolved the API")
}

/// Copies up to `buf.len()` bytes of `insn` into `buf`; returns how many.
///
/// # Safety
/// `insn` is an instruction handle QEMU passed during translation.
pub unsafe fn insn_bytes(insn: *mut Insn, buf: &mut [u8]) -> usize {
    let a = api();
    // SAFETY: per the caller's contract; the version-specific function matches the API
    // version resolved in `init`.
    unsafe {
        let size = (a.insn_size)(insn).min(buf.len());
        if let Some(v4) = &a.v4 {
            (v4.insn_data)(insn, buf.as_mut_ptr() as *mut c_void, size).min(size)
        } else if let Some(v1) = &a.v1 {
            let p = (v1.insn_data)(insn) as *const u8;
            if p.is_null() {
                return 0;
            }
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), size);
            size
        } else {
            0
        }
    }
}

/// A C string's text, lossily.
///
/// # Safety
/// `p` is a valid NUL-terminated string or null.
pub unsafe fn c_str(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
