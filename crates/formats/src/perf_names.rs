//! Event names as perf prints them, for a perf.data file that does not name its events
//! (pipe mode without the `EVENT_DESC` feature, older perf): `cache-references`, not the
//! reader's `Hardware(CacheReferences, PmuTypeId(0))`. The tables are perf's own
//! (tools/perf/util/evsel.c: `evsel__hw_names`, `evsel__sw_names`, `evsel__hw_cache`,
//! `evsel__hw_cache_op`, `evsel__hw_cache_result`, `evsel__bp_name`).

use linux_perf_data::linux_perf_event_reader::{
    HardwareCacheId, HardwareCacheOp, HardwareCacheOpResult, HardwareEventId, HwBreakpointType,
    PerfEventType, SoftwareCounterType,
};

/// perf's name of an event of type `t`. Hardware events of one PMU of a hybrid CPU (a PMU
/// type in the upper config bits; perf names them `cpu_core/cycles/` from the file's PMU
/// table) are `pmuN/cycles/`, N the PMU's type number; other dynamic PMUs
/// `pmuN/config=0x.../`.
pub(crate) fn event_name(t: &PerfEventType) -> String {
    match t {
        PerfEventType::Hardware(id, pmu) => with_pmu(hardware(*id), pmu.0),
        PerfEventType::Software(c) => software(*c).to_string(),
        PerfEventType::Tracepoint(id) => format!("tracepoint:{id}"),
        PerfEventType::HwCache(cache, op, result, pmu) => {
            let (op_one, op_many) = match op {
                HardwareCacheOp::Read => ("load", "loads"),
                HardwareCacheOp::Write => ("store", "stores"),
                HardwareCacheOp::Prefetch => ("prefetch", "prefetches"),
            };
            let name = match result {
                HardwareCacheOpResult::Access => format!("{}-{op_many}", cache_name(*cache)),
                HardwareCacheOpResult::Miss => format!("{}-{op_one}-misses", cache_name(*cache)),
            };
            with_pmu(&name, pmu.0)
        }
        PerfEventType::Breakpoint(ty, addr, _) => {
            let mut access = String::new();
            for (bit, c) in [
                (HwBreakpointType::R, 'r'),
                (HwBreakpointType::W, 'w'),
                (HwBreakpointType::X, 'x'),
            ] {
                if ty.contains(bit) {
                    access.push(c);
                }
            }
            format!("mem:{:#x}:{access}", addr.0)
        }
        // PERF_TYPE_RAW: perf's `rNNN`.
        PerfEventType::DynamicPmu(4, config, _, _) => format!("r{config:x}"),
        PerfEventType::DynamicPmu(pmu, config, _, _) => format!("pmu{pmu}/config={config:#x}/"),
    }
}

fn with_pmu(name: &str, pmu: u32) -> String {
    if pmu == 0 {
        name.to_string()
    } else {
        format!("pmu{pmu}/{name}/")
    }
}

fn hardware(id: HardwareEventId) -> &'static str {
    match id {
        HardwareEventId::CpuCycles => "cycles",
        HardwareEventId::Instructions => "instructions",
        HardwareEventId::CacheReferences => "cache-references",
        HardwareEventId::CacheMisses => "cache-misses",
        HardwareEventId::BranchInstructions => "branches",
        HardwareEventId::BranchMisses => "branch-misses",
        HardwareEventId::BusCycles => "bus-cycles",
        HardwareEventId::StalledCyclesFrontend => "stalled-cycles-frontend",
        HardwareEventId::StalledCyclesBackend => "stalled-cycles-backend",
        HardwareEventId::RefCpuCycles => "ref-cycles",
        _ => "unknown-hardware-event",
    }
}

fn software(c: SoftwareCounterType) -> &'static str {
    match c {
        SoftwareCounterType::CpuClock => "cpu-clock",
        SoftwareCounterType::TaskClock => "task-clock",
        SoftwareCounterType::PageFaults => "page-faults",
        SoftwareCounterType::ContextSwitches => "context-switches",
        SoftwareCounterType::CpuMigrations => "cpu-migrations",
        SoftwareCounterType::PageFaultsMin => "minor-faults",
        SoftwareCounterType::PageFaultsMaj => "major-faults",
        SoftwareCounterType::AlignmentFaults => "alignment-faults",
        SoftwareCounterType::EmulationFaults => "emulation-faults",
        SoftwareCounterType::Dummy => "dummy",
        SoftwareCounterType::BpfOutput => "bpf-output",
        SoftwareCounterType::CgroupSwitches => "cgroup-switches",
        _ => "unknown-software-event",
    }
}

fn cache_name(c: HardwareCacheId) -> &'static str {
    match c {
        HardwareCacheId::L1d => "L1-dcache",
        HardwareCacheId::L1i => "L1-icache",
        HardwareCacheId::Ll => "LLC",
        HardwareCacheId::Dtlb => "dTLB",
        HardwareCacheId::Itlb => "iTLB",
        HardwareCacheId::Bpu => "branch",
        HardwareCacheId::Node => "node",
        _ => "unknown-cache",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `perf_event_attr` (type, config) and the name `perf evlist` gives it (perf 6.1).
    #[test]
    fn names_as_perf_gives_them() {
        let cases: [(u32, u32, u64, &str); 11] = [
            (0, 0, 0, "cycles"),
            (0, 0, 3, "cache-misses"),
            (0, 0, 2, "cache-references"),
            (0, 0, 4, "branches"),
            (0, 0, (8 << 32) | 1, "pmu8/instructions/"),
            (1, 0, 2, "page-faults"),
            (1, 0, 6, "major-faults"),
            // L1-dcache (0), read (0 << 8), miss (1 << 16); LLC (2), write, access.
            (3, 0, 1 << 16, "L1-dcache-load-misses"),
            (3, 0, 2 | (1 << 8), "LLC-stores"),
            (4, 0, 0x1c2, "r1c2"),
            (5, 3, 0, "mem:0x0:rw"),
        ];
        for (ty, bp, config, name) in cases {
            let t = PerfEventType::parse(ty, bp, config, 0, 0).expect("a known type");
            assert_eq!(event_name(&t), name, "type {ty} config {config:#x}");
        }
        let t = PerfEventType::parse(2, 0, 316, 0, 0).unwrap();
        assert_eq!(event_name(&t), "tracepoint:316");
        let t = PerfEventType::parse(10, 0, 0x3c, 0, 0).unwrap();
        assert_eq!(event_name(&t), "pmu10/config=0x3c/");
    }
}
