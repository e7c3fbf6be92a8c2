//! The measured cases; each returns its section of the document.

pub mod apply;
pub mod builds;
pub mod files;
pub mod startup;
