/* Assembler labels (STT_NOTYPE symbols) in .text, as ld.so's `_start`/`_dl_start_user`:
 * perf names samples by them unless they are hidden; a label in a data section is no code. */
#include <stdio.h>
__asm__(".text\n"
        ".globl entry_label\n"
        "entry_label:\n"
        "    nop\n"
        ".globl after_label\n"
        "after_label:\n"
        "    ret\n"
        ".globl hidden_label\n"
        ".hidden hidden_label\n"
        "hidden_label:\n"
        "    ret\n"
        ".data\n"
        ".globl data_label\n"
        "data_label:\n"
        "    .quad 0\n"
        ".text\n");
int main(void) {
    printf("labels\n");
    return 0;
}
