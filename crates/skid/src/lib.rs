//! proftrust-skid (being written).
