//! How an x86-64 instruction transfers control, from its bytes (enough to label the end of a
//! translation block: QEMU ends a block at every branch, call, return and system call).

/// End kind codes on the wire (see `crate::wire`).
pub const END_OTHER: u8 = 0;
/// A call (direct `E8`, indirect `FF /2`, far `FF /3`, `9A` is invalid in 64-bit mode).
pub const END_CALL: u8 = 1;
/// A return (`C3`, `C2 iw`, `CB`, `CA iw`).
pub const END_RETURN: u8 = 2;
/// `syscall` (`0F 05`), `sysenter` (`0F 34`) or `int 0x80` (`CD 80`).
pub const END_SYSCALL: u8 = 3;

/// Where the opcode of the instruction `bytes` starts: after its legacy prefixes (operand
/// and address size, segment, `lock`, `rep`/`bnd`) and a REX prefix; and whether an
/// operand-size prefix (`0x66`) was among them.
fn opcode_at(bytes: &[u8]) -> (usize, bool) {
    let mut i = 0;
    let mut opsize16 = false;
    while let Some(&b) = bytes.get(i) {
        if !matches!(
            b,
            0x66 | 0x67 | 0xF0 | 0xF2 | 0xF3 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65
        ) {
            break;
        }
        opsize16 |= b == 0x66;
        i += 1;
    }
    if bytes.get(i).is_some_and(|b| (0x40..=0x4F).contains(b)) {
        i += 1;
    }
    (i, opsize16)
}

/// Classifies one instruction's bytes. Legacy prefixes (operand/address size, segment,
/// `lock`, `rep`/`bnd`) and a REX prefix are skipped; anything unrecognised is "other".
pub fn classify(bytes: &[u8]) -> u8 {
    let (i, _) = opcode_at(bytes);
    let op = match bytes.get(i) {
        Some(&b) => b,
        None => return END_OTHER,
    };
    match op {
        0xE8 => END_CALL,
        0xC3 | 0xC2 | 0xCB | 0xCA => END_RETURN,
        0xFF => match bytes.get(i + 1) {
            Some(&modrm) if matches!((modrm >> 3) & 7, 2 | 3) => END_CALL,
            _ => END_OTHER,
        },
        0x0F => match bytes.get(i + 1) {
            Some(0x05) | Some(0x34) => END_SYSCALL,
            _ => END_OTHER,
        },
        0xCD if bytes.get(i + 1) == Some(&0x80) => END_SYSCALL,
        _ => END_OTHER,
    }
}

/// The branch predictor's kind of the instruction `bytes` at guest address `vaddr`
/// (`proftrust_bpred::Kind`): from its end kind ([`classify`]) and its static successors
/// ([`successors`]); a jump through a register or memory is `FF /4` or `FF /5`.
pub fn branch_kind(bytes: &[u8], vaddr: u64) -> proftrust_bpred::Kind {
    use proftrust_bpred::Kind;
    let succ = successors(bytes, vaddr);
    match (classify(bytes), succ) {
        (END_RETURN, _) => Kind::Return,
        (END_CALL, Successors::One(_)) => Kind::DirectCall,
        (END_CALL, _) => Kind::IndirectCall,
        (END_OTHER, Successors::Two { .. }) => Kind::Conditional,
        (END_OTHER, Successors::Dynamic) => {
            let (i, _) = opcode_at(bytes);
            match (bytes.get(i), bytes.get(i + 1).map(|m| (m >> 3) & 7)) {
                (Some(0xFF), Some(4 | 5)) => Kind::IndirectJump,
                _ => Kind::Other,
            }
        }
        _ => Kind::Other,
    }
}

/// Where control goes after the last instruction of a block when it goes where the
/// instruction's bytes say (`bytes` at guest address `vaddr`): `None` for a transfer whose
/// target is only known at run time (return, indirect jump or call, system call, interrupt,
/// far transfer) and for instructions this does not decode. A conditional branch has two
/// successors; the one returned is the *expected* one (static prediction: a backward
/// branch is taken, a forward one falls through), the other is seen by the plugin's
/// unexpected-successor check like any other deviation.
///
/// Any instruction that is not a control transfer (a block cut at QEMU's length limit or a
/// page end) continues at `vaddr + len`. The plugin never trusts this blindly: at run time
/// every block checks that it starts where its predecessor expected, and records the edge
/// when it does not (signals, faults, `ud2`, ...), so a wrong expectation costs speed, never
/// exactness.
pub fn expected_successor(bytes: &[u8], vaddr: u64) -> Option<u64> {
    match successors(bytes, vaddr) {
        Successors::Dynamic => None,
        Successors::One(e) | Successors::Two { predicted: e, .. } => Some(e),
    }
}

/// Where a block's last instruction can send control, from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Successors {
    /// Only known at run time (return, indirect transfer, system call, ...; see
    /// [`expected_successor`]).
    Dynamic,
    /// One static successor: an unconditional direct jump or call, or the next instruction.
    One(u64),
    /// A conditional branch: the statically predicted side (backward taken, forward falls
    /// through) and the other one.
    Two {
        /// The predicted successor.
        predicted: u64,
        /// The other successor.
        other: u64,
    },
}

/// The static successors of the instruction `bytes` at guest address `vaddr` (see
/// [`expected_successor`] for which transfers are static).
pub fn successors(bytes: &[u8], vaddr: u64) -> Successors {
    use Successors::*;
    let next = vaddr.wrapping_add(bytes.len() as u64);
    let (i, opsize16) = opcode_at(bytes);
    let Some(&op) = bytes.get(i) else {
        return Dynamic;
    };
    let rel8 = |at: usize| -> Option<u64> {
        let d = *bytes.get(at)? as i8 as i64;
        Some(next.wrapping_add(d as u64))
    };
    let rel32 = |at: usize| -> Option<u64> {
        let b = bytes.get(at..at + 4)?;
        let d = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64;
        Some(next.wrapping_add(d as u64))
    };
    // A 0x66 prefix on a relative branch truncates the target to 16 bits (not emitted by
    // compilers in 64-bit code): left to the run-time check.
    let branch = |target: Option<u64>, conditional: bool| -> Successors {
        match target {
            None => Dynamic,
            Some(_) if opsize16 => Dynamic,
            Some(t) if !conditional || t == next => One(t),
            Some(t) if t > vaddr => Two {
                predicted: next,
                other: t,
            },
            Some(t) => Two {
                predicted: t,
                other: next,
            },
        }
    };
    match op {
        // jcc rel8, loop/loopz/loopnz/jrcxz rel8
        0x70..=0x7F | 0xE0..=0xE3 => branch(rel8(i + 1), true),
        0xEB => branch(rel8(i + 1), false),
        0xE9 | 0xE8 => branch(rel32(i + 1), false),
        0x0F => match bytes.get(i + 1) {
            Some(0x80..=0x8F) => branch(rel32(i + 2), true),
            // syscall, sysenter, ud2, ud1, ud0
            None | Some(0x05 | 0x34 | 0x0B | 0xB9 | 0xFF) => Dynamic,
            Some(_) => One(next),
        },
        // ret, far ret, iret, int3, int n, into, far call/jump, hlt, indirect jump/call
        0xC2 | 0xC3 | 0xCA | 0xCB | 0xCF | 0xCC | 0xCD | 0xCE | 0x9A | 0xEA | 0xF4 => Dynamic,
        0xFF => match bytes.get(i + 1).map(|m| (m >> 3) & 7) {
            Some(2..=5) | None => Dynamic,
            Some(_) => One(next),
        },
        _ => One(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings checked against `objdump -d` output of gcc-compiled code.
    #[test]
    fn classifies_common_encodings() {
        let cases: &[(&str, &[u8], u8)] = &[
            ("call rel32", &[0xE8, 0, 0, 0, 0], END_CALL),
            ("call *%rax", &[0xFF, 0xD0], END_CALL),
            ("call *0x8(%rbx)", &[0xFF, 0x53, 0x08], END_CALL),
            ("call *%r11", &[0x41, 0xFF, 0xD3], END_CALL),
            ("bnd call", &[0xF2, 0xE8, 0, 0, 0, 0], END_CALL),
            ("notrack call *%rax", &[0x3E, 0xFF, 0xD0], END_CALL),
            ("ret", &[0xC3], END_RETURN),
            ("repz ret", &[0xF3, 0xC3], END_RETURN),
            ("ret $8", &[0xC2, 8, 0], END_RETURN),
            ("syscall", &[0x0F, 0x05], END_SYSCALL),
            ("int $0x80", &[0xCD, 0x80], END_SYSCALL),
            ("jmp *%rax", &[0xFF, 0xE0], END_OTHER),
            ("jne rel8", &[0x75, 0x10], END_OTHER),
            ("jne rel32", &[0x0F, 0x85, 0, 0, 0, 0], END_OTHER),
            ("inc (%rax)", &[0xFF, 0x00], END_OTHER),
            ("empty", &[], END_OTHER),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(classify(bytes), *want, "{name}");
        }
    }

    /// Predictor kinds of encodings checked against `objdump -d` output.
    #[test]
    fn branch_kinds() {
        use proftrust_bpred::Kind;
        let cases: &[(&str, &[u8], Kind)] = &[
            ("jne rel8", &[0x75, 0x10], Kind::Conditional),
            (
                "jle rel32",
                &[0x0F, 0x8E, 0xF0, 0xFF, 0xFF, 0xFF],
                Kind::Conditional,
            ),
            ("jmp rel8", &[0xEB, 0x10], Kind::Other),
            ("call rel32", &[0xE8, 0, 0, 0, 0], Kind::DirectCall),
            ("call *%rax", &[0xFF, 0xD0], Kind::IndirectCall),
            ("jmp *%rax", &[0xFF, 0xE0], Kind::IndirectJump),
            ("notrack jmp *%rax", &[0x3E, 0xFF, 0xE0], Kind::IndirectJump),
            (
                "jmp *0x8(%rax,%rdx,8)",
                &[0xFF, 0x64, 0xD0, 0x08],
                Kind::IndirectJump,
            ),
            ("ret", &[0xC3], Kind::Return),
            ("syscall", &[0x0F, 0x05], Kind::Other),
            ("add %eax,%ebx", &[0x01, 0xC3], Kind::Other),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(branch_kind(bytes, 0x1000), *want, "{name}");
        }
    }

    /// Successors of encodings checked against `objdump -d` (addresses as printed there).
    #[test]
    fn expected_successors() {
        let cases: &[(&str, &[u8], u64, Option<u64>)] = &[
            ("jne back (loop)", &[0x75, 0xF0], 0x1010, Some(0x1002)),
            (
                "jne forward falls through",
                &[0x75, 0x10],
                0x1000,
                Some(0x1002),
            ),
            (
                "jle rel32 back",
                &[0x0F, 0x8E, 0xF0, 0xFF, 0xFF, 0xFF],
                0x2000,
                Some(0x1FF6),
            ),
            (
                "jle rel32 forward",
                &[0x0F, 0x8E, 0x10, 0, 0, 0],
                0x2000,
                Some(0x2006),
            ),
            ("jmp rel8", &[0xEB, 0x05], 0x100, Some(0x107)),
            ("jmp rel32", &[0xE9, 0x00, 0x01, 0, 0], 0x100, Some(0x205)),
            (
                "call rel32",
                &[0xE8, 0xFB, 0xFF, 0xFF, 0xFF],
                0x100,
                Some(0x100),
            ),
            ("bnd jmp", &[0xF2, 0xE9, 0x10, 0, 0, 0], 0x100, Some(0x116)),
            ("ret", &[0xC3], 0x100, None),
            ("jmp *%rax", &[0xFF, 0xE0], 0x100, None),
            ("call *0x8(%rbx)", &[0xFF, 0x53, 0x08], 0x100, None),
            ("syscall", &[0x0F, 0x05], 0x100, None),
            ("ud2", &[0x0F, 0x0B], 0x100, None),
            ("add (cut block)", &[0x48, 0x01, 0xD8], 0x100, Some(0x103)),
            ("inc (%rax)", &[0xFF, 0x00], 0x100, Some(0x102)),
            ("jmp rel16 (0x66)", &[0x66, 0xE9, 0x10, 0x00], 0x100, None),
            ("truncated jcc", &[0x0F, 0x85, 0x10], 0x100, None),
            ("empty", &[], 0x100, None),
        ];
        for (name, bytes, vaddr, want) in cases {
            assert_eq!(expected_successor(bytes, *vaddr), *want, "{name}");
        }
        assert_eq!(
            successors(&[0x75, 0xF0], 0x1010),
            Successors::Two {
                predicted: 0x1002,
                other: 0x1012
            }
        );
        assert_eq!(
            successors(&[0x75, 0x10], 0x1000),
            Successors::Two {
                predicted: 0x1002,
                other: 0x1012
            }
        );
        assert_eq!(successors(&[0x75, 0x00], 0x1000), Successors::One(0x1002));
    }
}
