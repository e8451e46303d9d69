//! What the binary's code says about the samples: basic blocks, the skid shadow after slow
//! instructions and calls, and blocks whose samples sit on one instruction (a locked phase).

use crate::rows::Names;
use proftrust_binary::{Flow, Instr, Symbolizer};
use proftrust_model::{Location, ModuleIdx, Svma};
use rustc_hash::{FxHashMap, FxHashSet};

/// What [`code_findings`] found.
#[derive(Debug, Default, Clone)]
pub struct CodeFindings {
    /// Block id per sampled location id (the index into the locations given).
    pub block_of: FxHashMap<u32, u32>,
    /// Block names (`function@0xSTART`).
    pub blocks: Names,
    /// Samples on the instruction before a shadow position and on the shadow position,
    /// within a block (after long-latency instructions).
    pub within: (u64, u64),
    /// The same across a block boundary (the return site after a call).
    pub across: (u64, u64),
    /// Per function name: (samples on pairs, samples in the shadow).
    pub per_function: FxHashMap<String, (u64, u64)>,
    /// Blocks whose samples sit on one instruction that is no shadow position: (block,
    /// samples).
    pub locked: Vec<(String, u64)>,
    /// Functions whose code could not be read, with the reason.
    pub unreadable: Vec<String>,
    /// Functions examined.
    pub functions: usize,
}

/// Whether an instruction takes long enough that a sample skids past it: an explicit memory
/// load (a cache miss costs hundreds of cycles), or the virtual PMU's slow arithmetic class
/// (divisions and square roots, [`proftrust_vpmu::is_div_or_sqrt`]: one rule for the cycle
/// model and for this test, on the decoder's mnemonic).
pub fn long_latency(i: &Instr) -> bool {
    (i.memory && i.loads) || proftrust_vpmu::is_div_or_sqrt(i.mnemonic)
}

/// A sampled location: where, how many samples, and its function's id in `fnames`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampledLocation {
    /// The module-relative address.
    pub location: Location,
    /// Samples on it.
    pub samples: u64,
    /// Its function's id (a name of the function level).
    pub function: u32,
}

/// Examines the code of the sampled functions (the `max_functions` with most samples).
///
/// Skid shadow (seed 000 §1.2, eqs. 1-2): a sample triggered at instruction `I_m` is
/// attributed to `I_{m+g(S,m,c)}`, `g` counting the instructions retired during the skid `S`
/// cycles. After an instruction of long latency `c_m >> S` the skid ends on its successor
/// (`g = 1`), so the samples of the slow instruction *and* of the instructions before it
/// within `S` cycles pile up on the successor, and the slow instruction itself keeps few.
/// For each pair (long-latency or call instruction `L`, next instruction `N` in address
/// order) the pile-up is `c_N / (c_L + c_N)`: about 1/2 without skid for an instruction
/// event (both retire equally often), at most 1/2 for a time or cycles event (the slow
/// instruction holds its own time), near 1 under skid. Pairs whose `N` starts another
/// basic block (the return site after a call) measure skid across blocks and functions.
///
/// Locked phase (seed 001 §4.2, seed 002 §3.3): every instruction of a basic block retires
/// equally often, so under an instruction event a block's samples spread over its
/// instructions (shifted, not gathered, by a constant skid); a block of at least 4
/// instructions with at least 30 samples, 80% of them on one instruction that is no shadow
/// position, means the period is locked to the loop.
pub fn code_findings(
    sym: &Symbolizer,
    locs: &[SampledLocation],
    fnames: &[String],
    max_functions: usize,
) -> CodeFindings {
    let mut out = CodeFindings::default();
    // Sampled locations per (module, function start).
    let mut by_fn: FxHashMap<(ModuleIdx, u64), Vec<u32>> = FxHashMap::default();
    for (id, l) in locs.iter().enumerate() {
        let Some(m) = l.location.module else { continue };
        let Some(f) = sym.binary(m).and_then(|b| b.function_at(l.location.svma)) else {
            continue;
        };
        by_fn.entry((m, f.start.0)).or_default().push(id as u32);
    }
    let mut fns: Vec<((ModuleIdx, u64), Vec<u32>)> = by_fn.into_iter().collect();
    let samples_of = |v: &[u32]| v.iter().map(|&i| locs[i as usize].samples).sum::<u64>();
    fns.sort_by(|a, b| samples_of(&b.1).cmp(&samples_of(&a.1)).then(a.0.cmp(&b.0)));
    fns.truncate(max_functions);
    for ((m, start), ids) in fns {
        examine_function(sym, m, start, &ids, locs, fnames, &mut out);
    }
    out
}

fn examine_function(
    sym: &Symbolizer,
    m: ModuleIdx,
    start: u64,
    ids: &[u32],
    locs: &[SampledLocation],
    fnames: &[String],
    out: &mut CodeFindings,
) {
    let Some(bin) = sym.binary(m) else { return };
    let Some(func) = bin.function_at(Svma(start)) else {
        return;
    };
    let fname = fnames[locs[ids[0] as usize].function as usize].clone();
    let (instrs, cfg) = match (bin.instructions(func), bin.cfg(func)) {
        (Ok(i), Ok(c)) => (i, c),
        (Err(e), _) | (_, Err(e)) => {
            out.unreadable.push(format!("{fname}: {e}"));
            return;
        }
    };
    out.functions += 1;
    let count: FxHashMap<u64, u64> = ids
        .iter()
        .map(|&i| (locs[i as usize].location.svma.0, locs[i as usize].samples))
        .collect();
    let c = |a: Svma| count.get(&a.0).copied().unwrap_or(0);
    // Blocks.
    for &id in ids {
        let a = locs[id as usize].location.svma;
        if let Some(b) = cfg.block_at(a) {
            let start = cfg.blocks[b.0 as usize].start;
            let bid = out.blocks.id(format!("{fname}@{:#x}", start.0));
            out.block_of.insert(id, bid);
        }
    }
    // Skid shadow.
    let block_start: FxHashSet<u64> = cfg.blocks.iter().map(|b| b.start.0).collect();
    let mut shadow_pos: FxHashSet<u64> = FxHashSet::default();
    let fe = out.per_function.entry(fname.clone()).or_default();
    for w in instrs.windows(2) {
        let (l, n) = (&w[0], &w[1]);
        let call = matches!(l.flow, Flow::Call | Flow::IndirectCall);
        if !(call || (long_latency(l) && l.flow == Flow::Next)) {
            continue;
        }
        shadow_pos.insert(n.addr.0);
        let (cl, cn) = (c(l.addr), c(n.addr));
        let acc = if block_start.contains(&n.addr.0) {
            &mut out.across
        } else {
            &mut out.within
        };
        acc.0 += cl + cn;
        acc.1 += cn;
        fe.0 += cl + cn;
        fe.1 += cn;
    }
    // Locked blocks.
    for b in &cfg.blocks {
        if b.instructions.len() < 4 {
            continue;
        }
        let total: u64 = b.instructions.iter().map(|&a| c(a)).sum();
        if total < 30 {
            continue;
        }
        let (top_addr, top) = b
            .instructions
            .iter()
            .map(|&a| (a, c(a)))
            .max_by_key(|x| x.1)
            .unwrap_or((b.start, 0));
        if top as f64 >= 0.8 * total as f64 && !shadow_pos.contains(&top_addr.0) {
            out.locked
                .push((format!("{fname}@{:#x}", b.start.0), total));
        }
    }
}

/// `c_N / (c_L + c_N)` of [`code_findings`] and whether it shows skid: at least 50 samples
/// on the pairs and 3 standard deviations away from the 1/2 of an instruction event without
/// skid, by at least 1/4. Under an instruction event (`two_sided`) both directions are skid:
/// seed 000's `g(S,m,c)` (eq. 1) ends the skid on the instruction executing when `S` cycles
/// have passed, which is the slow instruction itself when it is reached (samples gather *on*
/// it, as the virtual PMU models), and hardware that reports the next instruction to retire
/// puts them on its successor. Under a time or cycles event the slow instruction rightly
/// holds more than half, so only a pile-up on the successor counts.
pub fn skid_shows(pair: (u64, u64), two_sided: bool) -> Option<(f64, bool)> {
    let (n, s) = pair;
    if n == 0 {
        return None;
    }
    let f = s as f64 / n as f64;
    let z = (s as f64 - 0.5 * n as f64) / (0.25 * n as f64).sqrt();
    let off = if two_sided {
        (f - 0.5).abs() >= 0.25 && z.abs() >= 3.0
    } else {
        f >= 0.75 && z >= 3.0
    };
    Some((f, n >= 50 && off))
}

/// Whether a function's own pairs show a skid shadow: at least 20 samples on them and a
/// share of 0.8 on the successors (or at most 0.2 under an instruction event).
pub fn function_shows_skid(pairs: u64, shadow: u64, two_sided: bool) -> bool {
    let f = shadow as f64 / pairs.max(1) as f64;
    pairs >= 20 && (f >= 0.8 || (two_sided && f <= 0.2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::Svma;

    fn instr(text: &str, mnemonic: iced_x86::Mnemonic, memory: bool, loads: bool) -> Instr {
        Instr {
            addr: Svma(0x1000),
            len: 3,
            text: text.into(),
            flow: Flow::Next,
            target: None,
            memory,
            loads,
            stores: false,
            mnemonic,
        }
    }

    /// The class rule, not the text: `divsd` and `sqrtsd` are slow, `vdivps` too; a load is;
    /// `addsd` and a register `mov` are not. The old text rule (`contains("div")` or
    /// `contains("sqrt")` on the mnemonic) also called `rsqrtps` slow, the approximate
    /// reciprocal square root of a few cycles that the cycle model prices as any SIMD
    /// arithmetic.
    #[test]
    fn long_latency_follows_the_cycle_model_classes() {
        use iced_x86::Mnemonic::*;
        assert!(long_latency(&instr(
            "divsd %xmm1,%xmm0",
            Divsd,
            false,
            false
        )));
        assert!(long_latency(&instr(
            "sqrtsd %xmm1,%xmm0",
            Sqrtsd,
            false,
            false
        )));
        assert!(long_latency(&instr(
            "vdivps %ymm1,%ymm2,%ymm0",
            Vdivps,
            false,
            false
        )));
        assert!(long_latency(&instr("idiv %rcx", Idiv, false, false)));
        assert!(long_latency(&instr("mov (%rax),%rbx", Mov, true, true)));
        assert!(!long_latency(&instr("mov %rax,(%rbx)", Mov, true, false)));
        assert!(!long_latency(&instr(
            "addsd %xmm1,%xmm0",
            Addsd,
            false,
            false
        )));
        assert!(!long_latency(&instr(
            "rsqrtps %xmm1,%xmm0",
            Rsqrtps,
            false,
            false
        )));
        assert!(!long_latency(&instr("mov %rax,%rbx", Mov, false, false)));
    }

    #[test]
    fn skid_shows_by_hand() {
        // 60 of 64 on the successor: f 0.9375, z = (60 − 32)/4 = 7: skid.
        assert_eq!(skid_shows((64, 60), false), Some((0.9375, true)));
        // 40 samples only: not enough.
        assert_eq!(skid_shows((40, 40), false).map(|x| x.1), Some(false));
        // Under an instruction event, a pile-up on the slow instruction is skid too.
        assert_eq!(skid_shows((100, 10), true).map(|x| x.1), Some(true));
        assert_eq!(skid_shows((100, 10), false).map(|x| x.1), Some(false));
        assert_eq!(skid_shows((0, 0), true), None);
        assert!(function_shows_skid(20, 16, false));
        assert!(!function_shows_skid(19, 19, false));
        assert!(function_shows_skid(20, 4, true) && !function_shows_skid(20, 4, false));
    }
}
