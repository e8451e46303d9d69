//! The modelled cores and their instruction tables (from LLVM's scheduling models).

use iced_x86::Code;
use rustc_hash::FxHashMap;

/// Scheduling data of one instruction form on one core, as LLVM's scheduling model gives it
/// through `llvm-mca -instruction-info -resource-pressure` (`tables/CPU.tsv`).
#[derive(Debug, Clone, PartialEq)]
pub struct InstrInfo {
    /// Micro-ops (LLVM's `NumMicroOps`).
    pub uops: u16,
    /// Latency in cycles from the inputs to the result (LLVM's `Latency`; for a form with a
    /// memory source it includes the load).
    pub latency: u16,
    /// Reciprocal throughput (cycles per instruction when independent), LLVM's `RThroughput`.
    pub rthroughput: f32,
    /// llvm-mca's `MayLoad`.
    pub may_load: bool,
    /// llvm-mca's `MayStore`.
    pub may_store: bool,
    /// Cycles each port is busy per execution (port index, cycles), averaged by llvm-mca over
    /// the ports the form may use (`Resource pressure by instruction`).
    pub pressure: Vec<(u8, f32)>,
}

/// Which core is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoreKind {
    /// Intel Golden Cove, LLVM's `sapphirerapids` model (the P-core of Alder Lake and
    /// Sapphire Rapids; Raptor Cove, the core of Raptor Lake and Emerald Rapids, is a
    /// derivative). Default.
    #[default]
    GoldenCove,
    /// AMD Zen 4, LLVM's `znver4` model.
    Zen4,
}

impl CoreKind {
    /// Parses an LLVM CPU name or the core's name (`golden-cove`, `zen4`).
    pub fn parse(s: &str) -> Option<CoreKind> {
        match s {
            "sapphirerapids" | "golden-cove" | "goldencove" => Some(CoreKind::GoldenCove),
            "znver4" | "zen4" => Some(CoreKind::Zen4),
            _ => None,
        }
    }
}

/// Named by LLVM's CPU name (`--core`); [`CoreKind::parse`] also takes the core's name.
impl proftrust_model::named::Named for CoreKind {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            CoreKind::GoldenCove,
            "sapphirerapids",
            "Intel Golden Cove (Alder Lake P-core, Sapphire Rapids; Raptor Cove derives from it)",
        ),
        (CoreKind::Zen4, "znver4", "AMD Zen 4"),
    ];
}
proftrust_model::named_from_str!(CoreKind);

/// A modelled core: its pipeline parameters (LLVM's `SchedMachineModel` of the core) and its
/// instruction table.
#[derive(Debug, Clone)]
pub struct Core {
    /// Which core.
    pub kind: CoreKind,
    /// What is modelled, for reports (`Intel Golden Cove (LLVM 19 sapphirerapids model)`).
    pub name: &'static str,
    /// Where every number comes from.
    pub source: &'static str,
    /// Micro-ops dispatched per cycle (`IssueWidth`).
    pub issue_width: u32,
    /// Reorder-buffer entries in micro-ops (`MicroOpBufferSize`).
    pub rob: u32,
    /// Instructions retired per cycle (`RetireControlUnit`), `None` when the model sets no
    /// limit (llvm-mca then retires without one).
    pub retire_width: Option<u32>,
    /// Cycles after a load's issue at which an integer register operand of the same
    /// instruction is needed (`ReadAdvance<ReadAfterLd, N>`): the load part of a form with a
    /// memory source.
    pub load_advance: u32,
    /// The same for vector operands (`ReadAdvance<ReadAfterVecXLd, N>`).
    pub vec_load_advance: u32,
    /// Cycles from a branch's resolution to the first correct-path instruction
    /// (`MispredictPenalty`).
    pub mispredict_penalty: u32,
    /// Cycles from a taken branch's dispatch to the dispatch of the instruction it leads
    /// to, at the earliest: the front end fetches one block per cycle, ending at the first
    /// taken branch, so at most one taken branch per cycle. LLVM's models have no front
    /// end; 1 is the best case of both cores (a taken branch whose target the first-level
    /// branch target buffer holds), measured on this project's Raptor Cove host by
    /// `workloads/chains.c`'s `jumps` kernel (docs/audit.md, "The front end").
    pub taken_branch_cycles: u32,
    /// Port names, by the indices of [`InstrInfo::pressure`].
    pub ports: Vec<String>,
    /// LLVM version and CPU the table was generated with (its header line).
    pub table_source: String,
    table: FxHashMap<(Code, bool), InstrInfo>,
}

const SPR_TABLE: &str = include_str!("../tables/sapphirerapids.tsv");
const ZEN4_TABLE: &str = include_str!("../tables/znver4.tsv");

impl Core {
    /// The core's model with its embedded table.
    pub fn new(kind: CoreKind) -> Core {
        let codes: FxHashMap<String, Code> =
            Code::values().map(|c| (format!("{c:?}"), c)).collect();
        let (text, base) = match kind {
            CoreKind::GoldenCove => (
                SPR_TABLE,
                Core {
                    kind,
                    name: "Intel Golden Cove (LLVM 19 sapphirerapids scheduling model)",
                    source: "LLVM 19.1.7 llvm/lib/Target/X86/X86SchedSapphireRapids.td: IssueWidth 6, MicroOpBufferSize 512, ReadAdvance ReadAfterLd 5 / ReadAfterVecXLd 6, MispredictPenalty 14, no RetireControlUnit; front end: one taken branch per cycle (no LLVM parameter; docs/audit.md, \"The front end\"); per-instruction micro-ops, latency and port pressure from llvm-mca-19 -mcpu=sapphirerapids (crates/uarch/tables/sapphirerapids.tsv)",
                    issue_width: 6,
                    rob: 512,
                    retire_width: None,
                    load_advance: 5,
                    vec_load_advance: 6,
                    mispredict_penalty: 14,
                    taken_branch_cycles: 1,
                    ports: Vec::new(),
                    table_source: String::new(),
                    table: FxHashMap::default(),
                },
            ),
            CoreKind::Zen4 => (
                ZEN4_TABLE,
                Core {
                    kind,
                    name: "AMD Zen 4 (LLVM 19 znver4 scheduling model)",
                    source: "LLVM 19.1.7 llvm/lib/Target/X86/X86ScheduleZnver4.td (after AMD's Software Optimization Guide for Family 19h): IssueWidth 6, MicroOpBufferSize 320, RetireControlUnit 9 per cycle, ReadAdvance ReadAfterLd 4 (LoadLatency) / ReadAfterVecXLd 7 (VecLoadLatency), MispredictPenalty 13; front end: one taken branch per cycle (no LLVM parameter; docs/audit.md, \"The front end\"); per-instruction micro-ops, latency and port pressure from llvm-mca-19 -mcpu=znver4 (crates/uarch/tables/znver4.tsv)",
                    issue_width: 6,
                    rob: 320,
                    retire_width: Some(9),
                    load_advance: 4,
                    vec_load_advance: 7,
                    mispredict_penalty: 13,
                    taken_branch_cycles: 1,
                    ports: Vec::new(),
                    table_source: String::new(),
                    table: FxHashMap::default(),
                },
            ),
        };
        let mut core = base;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ports\t") {
                core.ports = rest.split('\t').map(str::to_string).collect();
                continue;
            }
            if let Some(rest) = line.strip_prefix("# proftrust-uarch instruction table: ") {
                core.table_source = rest.to_string();
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() < 8 {
                continue;
            }
            let Some(&code) = codes.get(f[0]) else {
                continue;
            };
            let num = |s: &str| s.parse::<f32>().unwrap_or(0.0);
            let pressure = f[7]
                .split(',')
                .filter_map(|p| {
                    let (i, c) = p.split_once(':')?;
                    Some((i.parse().ok()?, num(c)))
                })
                .collect();
            core.table.insert(
                (code, f[1] == "1"),
                InstrInfo {
                    uops: f[2].parse().unwrap_or(1),
                    latency: f[3].parse().unwrap_or(1),
                    rthroughput: num(f[4]),
                    may_load: f[5] == "1",
                    may_store: f[6] == "1",
                    pressure,
                },
            );
        }
        core
    }

    /// The table's entry for a form: its code, with a memory operand or not.
    pub fn info(&self, code: Code, memory: bool) -> Option<&InstrInfo> {
        self.table.get(&(code, memory))
    }

    /// Instruction forms in the table.
    pub fn forms(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spot checks of the embedded tables against LLVM 19's scheduling models
    /// (X86SchedSapphireRapids.td: `WriteDiv32` latency 15 holding port 1 for 3 cycles,
    /// `WriteFDiv64` latency 14, `WriteIMul64Reg` latency 3; llvm-mca-19 -mcpu=znver4 gives
    /// `idiv r32` latency 13 holding the divider (ALU0) 13 cycles, `imul r64, r64` 3).
    #[test]
    fn tables_hold_llvms_numbers() {
        let spr = Core::new(CoreKind::GoldenCove);
        assert!(spr.forms() > 500, "{}", spr.forms());
        let idiv = spr.info(Code::Idiv_rm32, false).expect("idiv r32");
        assert_eq!((idiv.latency, idiv.uops), (15, 4));
        assert!(idiv.pressure.contains(&(1, 3.0)), "{:?}", idiv.pressure);
        assert_eq!(spr.ports[1], "SPRPort01");
        assert_eq!(spr.info(Code::Divsd_xmm_xmmm64, false).unwrap().latency, 14);
        assert_eq!(spr.info(Code::Imul_r64_rm64, false).unwrap().latency, 3);
        let load = spr.info(Code::Mov_r64_rm64, true).unwrap();
        assert_eq!(load.latency, 5);
        assert!(load.may_load && !load.may_store);
        let zen = Core::new(CoreKind::Zen4);
        let idiv = zen.info(Code::Idiv_rm32, false).expect("idiv r32");
        assert_eq!(idiv.latency, 13);
        assert!(idiv.pressure.contains(&(3, 13.0)), "{:?}", idiv.pressure);
        assert_eq!(zen.ports[3], "Zn4ALU0");
        assert_eq!(zen.info(Code::Imul_r64_rm64, false).unwrap().latency, 3);
        assert!(zen.table_source.contains("znver4"), "{}", zen.table_source);
    }
}
