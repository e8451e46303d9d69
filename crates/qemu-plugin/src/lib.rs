//! proftrust QEMU TCG plugin (being written).
