//! Controllers that give Jobs, Deployments and nodes their life.
