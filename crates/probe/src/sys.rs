//! Everything `unsafe` of the probe runtime: the time-stamp counter and the executable's
//! load bias.

/// Reads the TSC where a timed path starts: `rdtsc` then `lfence`, so that the path's own
/// instructions do not start before the read (Intel's "How to Benchmark Code Execution
/// Times", the start half).
#[inline(always)]
pub fn tsc_start() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc and lfence have no memory effects; both exist on every x86-64 CPU.
        unsafe {
            let t = core::arch::x86_64::_rdtsc();
            core::arch::x86_64::_mm_lfence();
            t
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// Reads the TSC where a timed path ends: `rdtscp`, which waits until the path's
/// instructions have executed (the end half).
#[inline(always)]
pub fn tsc_end() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp writes only `aux`, a live local; every x86-64 CPU proftrust targets
        // has it (checked by `has_rdtscp` before a session starts).
        unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// Whether the CPU has `rdtscp` (CPUID 0x8000_0001 EDX bit 27).
// `__cpuid` became a safe function in newer Rust; the blocks keep older compilers happy.
#[allow(unused_unsafe)]
pub fn has_rdtscp() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: cpuid is available on every x86-64 CPU and has no memory effects.
        let max = unsafe { core::arch::x86_64::__cpuid(0x8000_0000) }.eax;
        if max < 0x8000_0001 {
            return false;
        }
        // SAFETY: as above; the leaf is supported (checked against `max`).
        let r = unsafe { core::arch::x86_64::__cpuid(0x8000_0001) };
        r.edx >> 27 & 1 == 1
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

unsafe extern "C" fn first_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `info` for the duration of the call; `data` is the
    // `&mut u64` given to dl_iterate_phdr in `load_bias`.
    unsafe {
        *(data as *mut u64) = (*info).dlpi_addr;
    }
    1 // stop after the first object: the main executable
}

/// Load bias of the main executable (runtime address − SVMA): the first object
/// `dl_iterate_phdr` reports.
pub fn load_bias() -> u64 {
    let mut bias: u64 = 0;
    // SAFETY: the callback only writes through `data`, which points to `bias`, alive for
    // the whole call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(first_object),
            &mut bias as *mut u64 as *mut libc::c_void,
        );
    }
    bias
}
