//! proftrust-paths (being written).
