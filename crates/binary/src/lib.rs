//! proftrust-binary (being written).
