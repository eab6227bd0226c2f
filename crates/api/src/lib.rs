//! The `etcd-operator.cozystack.io/v1alpha2` API.
