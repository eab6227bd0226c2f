//! The files of a crate and which of them use which, read from the source: the `mod` lines
//! give the module tree (which file is which module), the `use` lines and the paths in the
//! code give the edges (`source` reads a file). The tests (`tests.rs`) keep `crates/operator`
//! and `crates/api` without import circles and the operator's modules in their layers (issue
//! 31): a circle means two files that cannot be understood, changed or moved one without the
//! other, and it is how a pure layer (`plan`) ends up depending on the I/O above it.
//!
//! An edge `a.rs → b.rs` means code in `a.rs` names an item defined in `b.rs`:
//! - a private `use` line names it (a `pub use` re-export is a signpost, not a use: whoever
//!   names the item through it gets the edge to the file that defines it);
//! - a path in the code (`crate::x::y`, `super::y`, a child module's `m::y`, or a name a `use`
//!   line of the file brought in) names it.
//!
//! Code under `#[cfg(test)]` is left out (test modules are allowed to reach everywhere); so are
//! comments, strings and paths into other crates. A module's file follows Rust's rules
//! (`a/b.rs` or `a/b/mod.rs`, `#[path]` honoured), inline `mod x { .. }` blocks included.
//!
//! It is a reader of this project's code, not of all Rust: macros' bodies are read as code,
//! glob imports of our own modules (`use crate::x::*`) count as a use of the module's file,
//! and a method call names no path, so an `impl` spread over several files (`observe`'s
//! `Observer`) is one unit to it.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use source::{Module, parse_file};

/// An edge of the graph, with where it comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// The first line of `from` that names something of `to`.
    pub line: usize,
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} → {}", self.from, self.line, self.to)
    }
}

/// The files of a crate and their edges.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub files: BTreeSet<String>,
    /// from → to → the first line.
    pub edges: BTreeMap<String, BTreeMap<String, usize>>,
}

/// The crate whose root is `root` (`lib.rs`), its files read through `read` by their path
/// relative to the crate's `src/`. A declared module whose file is missing is an error.
pub fn crate_graph(root: &str, read: &dyn Fn(&str) -> Option<String>) -> Result<Graph, String> {
    // The module tree, from the root's `mod` lines down.
    let mut modules: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let mut queue: Vec<(Vec<String>, String)> = vec![(Vec::new(), root.to_string())];
    while let Some((path, file)) = queue.pop() {
        let src = read(&file).ok_or_else(|| format!("cannot read {file}"))?;
        let dir = module_dir(&file);
        for (inner, module) in parse_file(&file, &src) {
            let mut full = path.clone();
            full.extend(inner.iter().cloned());
            for (name, path_attr) in &module.declared {
                let mut child = full.clone();
                child.push(name.clone());
                // An inline module's children live in its directory.
                let base = format!(
                    "{dir}{}",
                    inner.iter().map(|n| format!("{n}/")).collect::<String>()
                );
                let candidates = match path_attr {
                    Some(p) => vec![format!("{}{p}", file_dir(&file))],
                    None => vec![format!("{base}{name}.rs"), format!("{base}{name}/mod.rs")],
                };
                let found = candidates
                    .iter()
                    .find(|f| read(f).is_some())
                    .ok_or_else(|| {
                        format!(
                            "{file}: mod {name}: none of {} exists",
                            candidates.join(", ")
                        )
                    })?;
                queue.push((child, found.clone()));
            }
            modules.insert(full, module);
        }
    }
    let mut graph = Graph::default();
    for module in modules.values() {
        graph.files.insert(module.file.clone());
    }
    for (path, module) in &modules {
        let mut add = |target: Option<String>, line: usize| {
            if let Some(to) = target
                && to != module.file
            {
                let e = graph.edges.entry(module.file.clone()).or_default();
                let l = e.entry(to).or_insert(line);
                *l = (*l).min(line);
            }
        };
        for u in module.uses.iter().filter(|u| !u.public) {
            add(file_of(&modules, path, &u.path, 0), u.line);
        }
        for m in &module.mentions {
            // A name alone is a use only when a `use` line brought it in (a child module's
            // name alone is a field or a variable: modules are not values).
            if m.path.len() == 1
                && !module
                    .uses
                    .iter()
                    .any(|u| u.name == m.path.first().cloned())
            {
                continue;
            }
            add(file_of(&modules, path, &m.path, 0), m.line);
        }
    }
    Ok(graph)
}

/// The directory a file's child modules live in: `a/b.rs` and `a/b/mod.rs` → `a/b/`,
/// `lib.rs` → ``.
fn module_dir(file: &str) -> String {
    let name = file.rsplit('/').next().unwrap_or(file);
    let dir = file_dir(file);
    if matches!(name, "mod.rs" | "lib.rs" | "main.rs") {
        dir
    } else {
        format!("{dir}{}/", name.trim_end_matches(".rs"))
    }
}

/// The directory a file is in, with a trailing `/` (empty at the top).
fn file_dir(file: &str) -> String {
    match file.rfind('/') {
        Some(i) => file[..=i].to_string(),
        None => String::new(),
    }
}

/// The file defining what `path`, written in module `from`, names; `None` when it names
/// something outside the crate (or a local item of `from`).
fn file_of(
    modules: &BTreeMap<Vec<String>, Module>,
    from: &[String],
    path: &[String],
    hops: usize,
) -> Option<String> {
    let abs = absolute(modules, from, path, hops)?;
    resolve(modules, &abs, hops)
}

/// `path` as written in module `from`, made absolute; `None` for another crate's or a local
/// item.
fn absolute(
    modules: &BTreeMap<Vec<String>, Module>,
    from: &[String],
    path: &[String],
    hops: usize,
) -> Option<Vec<String>> {
    if hops > 16 || path.is_empty() {
        return None;
    }
    let first = path[0].as_str();
    match first {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some([from, &path[1..]].concat()),
        "super" => {
            let mut base = from.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            Some([&base[..], rest].concat())
        }
        _ => {
            let mut child = from.to_vec();
            child.push(first.to_string());
            if modules.contains_key(&child) {
                return Some([from, path].concat());
            }
            // A name a `use` line of this module brought in.
            let module = modules.get(from)?;
            let u = module
                .uses
                .iter()
                .find(|u| u.name.as_deref() == Some(first))?;
            let target = absolute(modules, from, &u.path, hops + 1)?;
            Some([&target[..], &path[1..]].concat())
        }
    }
}

/// The file defining the item at the absolute `path`: the deepest module on it, unless that
/// module only re-exports the name, then where the re-export leads.
fn resolve(
    modules: &BTreeMap<Vec<String>, Module>,
    path: &[String],
    hops: usize,
) -> Option<String> {
    let n = (0..=path.len())
        .rev()
        .find(|&n| modules.contains_key(&path[..n]))?;
    let module = &modules[&path[..n]];
    if let Some(name) = path.get(n)
        && let Some(u) = module
            .uses
            .iter()
            .find(|u| u.name.as_deref() == Some(name.as_str()))
    {
        // Where the re-export leads; `None` when it leads into another crate.
        let target = absolute(modules, &path[..n], &u.path, hops + 1)?;
        return resolve(modules, &[&target[..], &path[n + 1..]].concat(), hops + 1);
    }
    if n == 0 && path.is_empty() {
        return None;
    }
    Some(module.file.clone())
}

/// A group of files that all reach each other through their edges.
#[derive(Clone, Debug, PartialEq)]
pub struct Circle {
    /// Every file of the group (a strongly connected component), sorted.
    pub files: Vec<String>,
    /// A shortest cycle through the first of them, edge by edge.
    pub cycle: Vec<Edge>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cycle: Vec<String> = self.cycle.iter().map(ToString::to_string).collect();
        write!(f, "{}", cycle.join(", "))?;
        if self.files.len() > self.cycle.len() {
            write!(f, " (one of the circles among {})", self.files.join(", "))?;
        }
        Ok(())
    }
}

/// The circles of a graph: one per group of files that reach each other (a strongly
/// connected component of more than one file). Empty when the graph has none.
pub fn circles(graph: &Graph) -> Vec<Circle> {
    // Tarjan's algorithm, iterative enough for a crate's few hundred files.
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        sccs: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(out) = s.g.edges.get(v) {
            for w in out.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort_unstable();
                s.sccs.push(scc);
            }
        }
    }
    let mut s = State {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        sccs: Vec::new(),
    };
    for f in &graph.files {
        if !s.index.contains_key(f.as_str()) {
            visit(&mut s, f);
        }
    }
    let mut sccs = s.sccs;
    sccs.sort();
    sccs.iter()
        .map(|scc| Circle {
            files: scc.iter().map(ToString::to_string).collect(),
            cycle: shortest_cycle(graph, scc),
        })
        .collect()
}

/// A shortest cycle through the first file of a component, by breadth-first search inside it.
fn shortest_cycle(graph: &Graph, scc: &[&str]) -> Vec<Edge> {
    let members: BTreeSet<&str> = scc.iter().copied().collect();
    let start = scc[0];
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        for w in graph.edges.get(v).into_iter().flat_map(|o| o.keys()) {
            let w = w.as_str();
            if !members.contains(w) {
                continue;
            }
            if w == start {
                last = Some(v);
                break 'search;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    // Walk back from the last file before `start` to `start`, then close the circle.
    let mut order = Vec::new();
    let mut v = last.unwrap_or(start);
    while v != start {
        order.push(v);
        v = prev[v];
    }
    order.push(start);
    order.reverse();
    order.push(start);
    order
        .windows(2)
        .map(|w| Edge {
            from: w[0].to_string(),
            to: w[1].to_string(),
            line: graph.edges[w[0]][w[1]],
        })
        .collect()
}

/// The top-level module a file belongs to: `plan/rules/quorum/mod.rs` → `plan`, `metrics.rs`
/// → `metrics`, the crate roots → themselves.
fn top_module(file: &str) -> &str {
    let first = file.split('/').next().unwrap_or(file);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The edges that go up the layers (`layers` lists top-level modules, lowest layer first;
/// a file may use its own layer and the ones below). An error names a file whose module is in
/// no layer.
pub fn upward_edges(graph: &Graph, layers: &[&[&str]]) -> Result<Vec<Edge>, String> {
    let layer_of = |file: &str| {
        let module = top_module(file);
        layers
            .iter()
            .position(|l| l.contains(&module))
            .ok_or_else(|| format!("{file}: its module `{module}` is in no layer"))
    };
    let mut up = Vec::new();
    for file in &graph.files {
        layer_of(file)?;
    }
    for (from, out) in &graph.edges {
        for (to, line) in out {
            if layer_of(to)? > layer_of(from)? {
                up.push(Edge {
                    from: from.clone(),
                    to: to.clone(),
                    line: *line,
                });
            }
        }
    }
    Ok(up)
}

/// The graph of the crate whose sources are in `src` (a directory).
pub fn crate_graph_at(src: &Path, root: &str) -> Result<Graph, String> {
    crate_graph(root, &|f| std::fs::read_to_string(src.join(f)).ok())
}

#[cfg(test)]
mod tests;
