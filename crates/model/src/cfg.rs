//! Control-flow graphs of functions, with loops.
//!
//! Built by `proftrust-binary` (decoding with iced-x86); analysed there and by `skid` and
//! `paths`. Calls do **not** end a basic block: a call is assumed to return to the next
//! instruction, as in seed 000 §2.1 and seed 003 §2 (intraprocedural paths).

use crate::addr::Svma;
use serde::{Deserialize, Serialize};

/// Index of a block in [`Cfg::blocks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BlockId(pub u32);

/// Index of a loop in [`Cfg::loops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LoopId(pub u32);

/// A maximal straight-line run of instructions with one entry and one exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasicBlock {
    /// Its index.
    pub id: BlockId,
    /// Address of the first instruction.
    pub start: Svma,
    /// Address one past the last byte.
    pub end: Svma,
    /// Addresses of its instructions, in order.
    pub instructions: Vec<Svma>,
}

impl BasicBlock {
    /// Number of instructions (|B_b| in seed 000 eq. 3).
    pub fn len(&self) -> usize {
        self.instructions.len()
    }
    /// True when the block has no instructions (never produced by the builder).
    pub fn is_empty(&self) -> bool {
        self.instructions.is_empty()
    }
    /// Address of the last instruction.
    pub fn last(&self) -> Svma {
        *self.instructions.last().unwrap_or(&self.start)
    }
    /// Whether `a` is the address of one of its instructions.
    pub fn contains_instruction(&self, a: Svma) -> bool {
        self.instructions.binary_search(&a).is_ok()
    }
}

/// Kind of a control-flow edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Falls into the next block (no branch, or a conditional branch not taken).
    FallThrough,
    /// Conditional branch taken.
    Taken,
    /// Unconditional direct jump.
    Unconditional,
    /// Indirect jump whose target was resolved (jump table).
    IndirectResolved,
    /// Indirect jump with an unknown target; `to` is `None`. Never guessed.
    IndirectUnknown,
    /// Return from the function; `to` is `None`.
    Return,
    /// Jump out of the function (tail call) or to code outside it; `to` is `None`.
    Exit,
}

/// An edge between two blocks of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CfgEdge {
    /// Source block.
    pub from: BlockId,
    /// Target block; `None` when it leaves the function or is unknown.
    pub to: Option<BlockId>,
    /// Edge kind.
    pub kind: EdgeKind,
}

/// A natural loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loop {
    /// Its index.
    pub id: LoopId,
    /// The header (dominates every block of the loop).
    pub header: BlockId,
    /// All blocks of the loop, header included, sorted.
    pub blocks: Vec<BlockId>,
    /// Sources of back edges to the header (latches).
    pub latches: Vec<BlockId>,
    /// Innermost enclosing loop.
    pub parent: Option<LoopId>,
    /// Nesting depth, 1 for outermost loops.
    pub depth: u32,
}

/// An elementary cycle through a loop header (seed 000 §2.1, Fig. 1): the header, then the
/// blocks in execution order, back to the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimpleLoop {
    /// Blocks in order, starting at the header; the edge from the last back to the first closes it.
    pub blocks: Vec<BlockId>,
}

/// The CFG of one function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cfg {
    /// Function name (demangled).
    pub function: String,
    /// Entry address.
    pub entry: Svma,
    /// Blocks, sorted by address; block 0 is the entry block.
    pub blocks: Vec<BasicBlock>,
    /// Edges.
    pub edges: Vec<CfgEdge>,
    /// Natural loops, outer loops before inner ones.
    pub loops: Vec<Loop>,
    /// True when an indirect jump could not be resolved (analyses that need a complete CFG
    /// must say so).
    pub has_unknown_indirect: bool,
}

impl Cfg {
    /// Block containing the instruction at `a` (by address range).
    pub fn block_at(&self, a: Svma) -> Option<BlockId> {
        let i = self.blocks.partition_point(|b| b.start <= a);
        let b = self.blocks.get(i.checked_sub(1)?)?;
        (a < b.end).then_some(b.id)
    }
    /// The block with this id.
    pub fn block(&self, id: BlockId) -> &BasicBlock {
        &self.blocks[id.0 as usize]
    }
    /// Successor edges of a block.
    pub fn successors(&self, id: BlockId) -> impl Iterator<Item = &CfgEdge> {
        self.edges.iter().filter(move |e| e.from == id)
    }
    /// Predecessor edges of a block.
    pub fn predecessors(&self, id: BlockId) -> impl Iterator<Item = &CfgEdge> {
        self.edges.iter().filter(move |e| e.to == Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bb(id: u32, start: u64, n: u64) -> BasicBlock {
        BasicBlock {
            id: BlockId(id),
            start: Svma(start),
            end: Svma(start + n * 4),
            instructions: (0..n).map(|k| Svma(start + 4 * k)).collect(),
        }
    }

    #[test]
    fn block_at_finds_containing_block() {
        let cfg = Cfg {
            function: "f".into(),
            entry: Svma(0x100),
            blocks: vec![bb(0, 0x100, 2), bb(1, 0x108, 3)],
            edges: vec![CfgEdge {
                from: BlockId(0),
                to: Some(BlockId(1)),
                kind: EdgeKind::FallThrough,
            }],
            loops: vec![],
            has_unknown_indirect: false,
        };
        assert_eq!(cfg.block_at(Svma(0x100)), Some(BlockId(0)));
        assert_eq!(cfg.block_at(Svma(0x10c)), Some(BlockId(1)));
        assert_eq!(cfg.block_at(Svma(0x114)), None);
        assert_eq!(cfg.block_at(Svma(0xff)), None);
        assert_eq!(cfg.successors(BlockId(0)).count(), 1);
        assert_eq!(cfg.predecessors(BlockId(1)).count(), 1);
        assert!(cfg.block(BlockId(1)).contains_instruction(Svma(0x110)));
    }
}
