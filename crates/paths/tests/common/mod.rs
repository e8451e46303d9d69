//! The hand-built program shared by the path-profiler, analysis and VPP tests (included by
//! `crates/vpp/tests/sources.rs` through `#[path]`), with helpers to build more.
#![allow(dead_code)]

use proftrust_model::{
    BasicBlock, BlockId, BlockVisitor, Cfg, CfgEdge, EdgeKind, Loop, LoopId, MemAccess, Module,
    ModuleIdx, Svma, TraceBlock, TraceEnd, TraceEvent,
};
use proftrust_paths::ProgramCfgs;

pub fn block(id: u32, ins: &[u64]) -> BasicBlock {
    BasicBlock {
        id: BlockId(id),
        start: Svma(ins[0]),
        end: Svma(ins[ins.len() - 1] + 4),
        instructions: ins.iter().map(|&a| Svma(a)).collect(),
    }
}

pub fn edge(f: u32, t: Option<u32>, kind: EdgeKind) -> CfgEdge {
    CfgEdge {
        from: BlockId(f),
        to: t.map(BlockId),
        kind,
    }
}

/// f: b0 [1000,1004] -> b1 [1008,100c: cond] -> b2 [1010 call g, 1014 jmp b1] (backedge)
///                        b1 -> b3 [1018 ret]
/// g: b0 [2000, 2004 ret]; main: b0 [3000 call f, 3004 call f, 3008 ret]
pub fn program() -> ProgramCfgs {
    let f = Cfg {
        function: "f".into(),
        entry: Svma(0x1000),
        blocks: vec![
            block(0, &[0x1000, 0x1004]),
            block(1, &[0x1008, 0x100c]),
            block(2, &[0x1010, 0x1014]),
            block(3, &[0x1018]),
        ],
        edges: vec![
            edge(0, Some(1), EdgeKind::FallThrough),
            edge(1, Some(2), EdgeKind::FallThrough),
            edge(1, Some(3), EdgeKind::Taken),
            edge(2, Some(1), EdgeKind::Unconditional),
            edge(3, None, EdgeKind::Return),
        ],
        loops: vec![Loop {
            id: LoopId(0),
            header: BlockId(1),
            blocks: vec![BlockId(1), BlockId(2)],
            latches: vec![BlockId(2)],
            parent: None,
            depth: 1,
        }],
        has_unknown_indirect: false,
    };
    let g = Cfg {
        function: "g".into(),
        entry: Svma(0x2000),
        blocks: vec![block(0, &[0x2000, 0x2004])],
        edges: vec![edge(0, None, EdgeKind::Return)],
        loops: vec![],
        has_unknown_indirect: false,
    };
    let main = Cfg {
        function: "main".into(),
        entry: Svma(0x3000),
        blocks: vec![block(0, &[0x3000, 0x3004, 0x3008])],
        edges: vec![edge(0, None, EdgeKind::Return)],
        loops: vec![],
        has_unknown_indirect: false,
    };
    ProgramCfgs::new(Module::new("/t/prog"), vec![f, g, main])
}

/// Feeds `v` one executed block: thread `tid`, module `module`, these instruction addresses,
/// how it ended and its data accesses.
pub fn visit_block(
    v: &mut impl BlockVisitor,
    tid: u32,
    module: u32,
    ins: &[u64],
    end: TraceEnd,
    mem: &[MemAccess],
) {
    let addrs: Vec<Svma> = ins.iter().map(|&a| Svma(a)).collect();
    v.visit(&TraceEvent::Block(TraceBlock {
        tid,
        module: Some(ModuleIdx(module)),
        instructions: &addrs,
        end,
        mem,
        key: None,
    }));
}
