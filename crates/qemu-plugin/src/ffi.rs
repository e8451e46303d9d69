//! The few declarations of QEMU 7.2's plugin API (version 1, `qemu-plugin.h`) this plugin
//! uses, written from the header's documented signatures. QEMU exports these symbols from its
//! executable; they resolve when QEMU `dlopen`s the plugin.

use std::ffi::{c_int, c_uint, c_void};

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

/// `enum qemu_plugin_cb_flags`: `QEMU_PLUGIN_CB_NO_REGS`.
pub const CB_NO_REGS: c_int = 0;
/// `enum qemu_plugin_op`: `QEMU_PLUGIN_INLINE_ADD_U64`.
pub const INLINE_ADD_U64: c_int = 0;

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

extern "C" {
    pub fn qemu_plugin_register_vcpu_tb_trans_cb(id: PluginId, cb: TbTransCb);
    pub fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_int,
        udata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_tb_exec_inline(
        tb: *mut Tb,
        op: c_int,
        ptr: *mut c_void,
        imm: u64,
    );
    pub fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut Insn,
        cb: VcpuMemCb,
        flags: c_int,
        rw: c_int,
        udata: *mut c_void,
    );
    pub fn qemu_plugin_mem_size_shift(info: MemInfo) -> c_uint;
    pub fn qemu_plugin_mem_is_store(info: MemInfo) -> bool;
    pub fn qemu_plugin_register_vcpu_init_cb(id: PluginId, cb: VcpuSimpleCb);
    pub fn qemu_plugin_register_vcpu_exit_cb(id: PluginId, cb: VcpuSimpleCb);
    pub fn qemu_plugin_register_vcpu_syscall_cb(id: PluginId, cb: SyscallCb);
    pub fn qemu_plugin_register_atexit_cb(id: PluginId, cb: UdataCb, udata: *mut c_void);
    pub fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    pub fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
    pub fn qemu_plugin_insn_data(insn: *const Insn) -> *const c_void;
    pub fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
    pub fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
    pub fn qemu_plugin_insn_haddr(insn: *const Insn) -> *mut c_void;
}
