use super::*;

fn graph(files: &[(&str, &str)]) -> Graph {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .collect();
    crate_graph("lib.rs", &|f| files.get(f).cloned()).expect("a crate")
}

fn edges(g: &Graph) -> Vec<(String, String)> {
    g.edges
        .iter()
        .flat_map(|(f, o)| o.keys().map(move |t| (f.clone(), t.clone())))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn a_hand_made_circle_is_found_and_named() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n\nfn f() -> crate::c::C { todo!() }\n",
        ),
        (
            "c/mod.rs",
            "// crate::a is only a comment here\nuse super::a::A;\npub struct C;\n",
        ),
    ]);
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].to_string(),
        "a.rs:1 → b.rs, b.rs:3 → c/mod.rs, c/mod.rs:2 → a.rs"
    );
    assert_eq!(found[0].files, ["a.rs", "b.rs", "c/mod.rs"]);
}

#[test]
fn no_circle_in_a_layered_crate() {
    let g = graph(&[
        ("lib.rs", "pub mod low;\npub mod mid;\npub mod top;\n"),
        ("low.rs", "pub struct L;\n"),
        (
            "mid/mod.rs",
            "mod rules;\npub use rules::M;\nuse crate::low::L;\n",
        ),
        ("mid/rules.rs", "use crate::low::L;\npub struct M(L);\n"),
        (
            "top.rs",
            "use crate::mid::M;\nuse crate::low;\nfn f(_: M, _: low::L) {}\n",
        ),
    ]);
    assert!(circles(&g).is_empty(), "{:?}", circles(&g));
    // A re-export is followed to where the item is defined.
    assert_eq!(
        edges(&g),
        pairs(&[
            ("mid/mod.rs", "low.rs"),
            ("mid/rules.rs", "low.rs"),
            ("top.rs", "low.rs"),
            ("top.rs", "mid/rules.rs"),
        ])
    );
}

#[test]
fn paths_in_code_groups_aliases_and_inline_modules_are_edges() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "fn f() { let _ = crate::b::x(); }\n"),
        (
            "b.rs",
            "use crate::{c::{self, C as Renamed}, d::*};\npub fn x() {}\nfn g() { c::h(); }\n",
        ),
        (
            "c.rs",
            "pub struct C;\npub fn h() {}\nmod inner {\n    use super::super::d::D;\n}\n",
        ),
        ("d.rs", "pub struct D;\n"),
    ]);
    assert_eq!(
        edges(&g),
        pairs(&[
            ("a.rs", "b.rs"),
            ("b.rs", "c.rs"),
            ("b.rs", "d.rs"),
            ("c.rs", "d.rs")
        ])
    );
}

#[test]
fn test_code_comments_and_strings_are_not_edges() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n"),
        (
            "a.rs",
            "/* crate::b::B */\nconst S: &str = \"crate::b::B\";\nconst R: &str = r#\"super::b\"#;\n\
             fn f<'a>(c: char) -> bool { c == '\"' }\n\
             #[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n\
             #[cfg(test)]\nfn only_in_tests() { crate::b::f(); }\n",
        ),
        ("b.rs", "use crate::a;\npub struct B;\n"),
        ("tests.rs", "use crate::b::B;\n"),
    ]);
    assert_eq!(edges(&g), pairs(&[("b.rs", "a.rs")]));
    assert!(!g.files.contains("tests.rs"));
}

#[test]
fn a_missing_module_file_is_an_error() {
    let files: BTreeMap<String, String> = [("lib.rs".to_string(), "mod gone;".to_string())].into();
    let err = crate_graph("lib.rs", &|f| files.get(f).cloned()).expect_err("missing file");
    assert!(err.contains("gone.rs"), "{err}");
}

#[test]
fn an_edge_up_the_layers_is_found() {
    let g = graph(&[
        ("lib.rs", "mod low;\nmod mid;\nmod top;\n"),
        ("low.rs", "pub const L: u8 = crate::top::T;\n"),
        ("mid/mod.rs", "use crate::low::L;\npub const M: u8 = L;\n"),
        ("top.rs", "pub const T: u8 = crate::mid::M;\n"),
    ]);
    let layers: &[&[&str]] = &[&["low"], &["mid"], &["top", "lib"]];
    let up = upward_edges(&g, layers).expect("every module in a layer");
    assert_eq!(
        up.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["low.rs:1 → top.rs"]
    );
    let err = upward_edges(&g, &[&["low"], &["top", "lib"]]).expect_err("mid is in no layer");
    assert!(err.contains("`mid`"), "{err}");
}

/// The operator's layers, lowest first (docs/architecture.md, "Layers"): a file may use
/// its own layer and the ones below, never one above. `plan` is pure and reads only what
/// is below it; the I/O (`observe`, `act`) and the figures (`metrics`) read `plan`'s
/// values; the controllers sit on all of it; the process on top.
const OPERATOR_LAYERS: &[&[&str]] = &[
    &["domain"],
    &["etcd"],
    &["build", "security"],
    &["plan"],
    &["observe", "act", "metrics", "failpoints"],
    &["reconcile", "snapshot", "defrag"],
    &[
        "config",
        "leader",
        "logging",
        "permissions",
        "run",
        "server",
        "lib",
        "main",
    ],
];

/// Issue 31: no module of the operator uses one of a layer above it (`plan` never imports
/// a controller, `build` never `plan`, `domain` nothing).
#[test]
fn the_operator_uses_only_layers_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = crate_graph_at(&src, "lib.rs").expect("the operator's sources");
    let up = upward_edges(&g, OPERATOR_LAYERS).unwrap_or_else(|e| {
        panic!("{e}: add it to OPERATOR_LAYERS and to the picture in docs/architecture.md")
    });
    assert!(
        up.is_empty(),
        "{} use(s) of a layer above (`file:line → file`); move what is shared down \
         (`domain` holds the vocabulary of several capabilities):\n{}",
        up.len(),
        up.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Issue 31: no import circle between the files of the operator and of the API crate.
#[test]
fn the_operator_and_the_api_have_no_import_circle() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = Vec::new();
    for (name, src, roots) in [
        (
            "etcd-operator",
            manifest.join("src"),
            &["lib.rs", "main.rs"][..],
        ),
        (
            "etcd-operator-api",
            manifest.join("../api/src"),
            &["lib.rs"][..],
        ),
    ] {
        for root in roots {
            let g = crate_graph_at(&src, root).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                !g.edges.is_empty() || *root == "main.rs",
                "{name}: no edge at all"
            );
            for circle in circles(&g) {
                report.push(format!("{name} ({root}): {circle}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "{} import circle(s); `file:line → file` means that line names something the \
         next file defines. Move what both need to a layer below both \
         (docs/architecture.md, \"Layers\"):\n{}",
        report.len(),
        report.join("\n")
    );
}
