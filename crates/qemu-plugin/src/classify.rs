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

/// Classifies one instruction's bytes. Legacy prefixes (operand/address size, segment,
/// `lock`, `rep`/`bnd`) and a REX prefix are skipped; anything unrecognised is "other".
pub fn classify(bytes: &[u8]) -> u8 {
    let mut i = 0;
    while i < bytes.len()
        && matches!(
            bytes[i],
            0x66 | 0x67 | 0xF0 | 0xF2 | 0xF3 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65
        )
    {
        i += 1;
    }
    if i < bytes.len() && (0x40..=0x4F).contains(&bytes[i]) {
        i += 1;
    }
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
}
