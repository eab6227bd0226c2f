//! The Kubernetes REST API server.
