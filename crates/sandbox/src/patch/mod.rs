//! Patches: JSON merge, JSON patch, strategic merge, and server-side apply.
