//! The committed CRDs in `deploy/crds/` are exactly what the Rust types generate.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

#[test]
fn committed_crds_match_the_types() {
    let mut stale = Vec::new();
    for crd in etcd_operator_api::crds() {
        let name = etcd_operator_api::crd_file_name(&crd);
        let path = deploy_dir().join(&name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != etcd_operator_api::crd_yaml(&crd) {
            stale.push(format!("deploy/crds/{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "{} differ from what the Rust types generate: run `make crds` and commit the result",
        stale.join(", ")
    );
}

#[test]
fn deploy_crds_holds_no_other_yaml() {
    let generated: BTreeSet<String> = etcd_operator_api::crds()
        .iter()
        .map(etcd_operator_api::crd_file_name)
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(deploy_dir())
        .expect("deploy/crds exists: run `make crds`")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml") || name.ends_with(".yml"))
        .collect();
    let unknown: Vec<_> = present.difference(&generated).collect();
    assert!(
        unknown.is_empty(),
        "deploy/crds has files no type generates (a renamed or removed CRD?): {unknown:?}; \
         delete them and run `make crds`"
    );
}

#[test]
fn crds_are_the_five_resources_of_the_group_and_the_extension_kind() {
    let crds = etcd_operator_api::crds();
    let names: Vec<_> = crds
        .iter()
        .map(|crd| crd.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "etcdclusters.etcd-operator.cozystack.io",
            "etcdmembers.etcd-operator.cozystack.io",
            "etcdsnapshots.etcd-operator.cozystack.io",
            "etcddefrags.etcd-operator.cozystack.io",
            "etcddefragpolicies.etcd-operator.cozystack.io",
            "etcdsnapshotschedules.etcd-operator.cozystack.io",
        ]
    );
    for crd in &crds {
        assert_eq!(crd.spec.group, etcd_operator_api::GROUP);
        assert_eq!(crd.spec.versions.len(), 1);
        assert_eq!(crd.spec.versions[0].name, etcd_operator_api::VERSION);
        let yaml = etcd_operator_api::crd_yaml(crd);
        assert!(
            !yaml.contains("nullable"),
            "{}: the finishing pass leaves no nullable",
            crd.spec.names.plural
        );
    }
}
