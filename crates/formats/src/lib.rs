//! proftrust-formats (being written).
