//! Structural schemas of custom resources: validation, defaulting, pruning, CEL, OpenAPI.
