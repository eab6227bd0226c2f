//! The files of a crate and which of them use which, read from the source: the `mod` lines
//! give the module tree (which file is which module), the `use` lines and the paths in the
//! code give the edges. The test at the bottom keeps `crates/operator` and `crates/api`
//! without import circles (issue 31): a circle means two files that cannot be understood,
//! changed or moved one without the other, and it is how a pure layer (`plan`) ends up
//! depending on the I/O above it.
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
//! glob imports of our own modules (`use crate::x::*`) count as a use of the module's file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// A token of Rust source, as much as the graph needs.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A number; it only needs to be something else than an identifier.
    Number,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

/// Splits source into tokens, dropping comments, lifetimes and the contents of character
/// literals (string contents are kept for `#[path = "..."]`).
fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((len, hashes)) = raw_string_start(&c, i) {
            // r"..", r#".."#, br"..": ends at a quote followed by as many hashes.
            let start_line = line;
            let mut j = i + len;
            let body_start = j;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    break;
                }
                if c[j] == '\n' {
                    line += 1;
                }
                j += 1;
            }
            out.push(Token {
                tok: Tok::Str(c[body_start..j.min(c.len())].iter().collect()),
                line: start_line,
            });
            i = j + 1 + hashes;
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && at(i + 1) == '"') {
            let start_line = line;
            let mut j = if ch == '"' { i + 1 } else { i + 2 };
            let mut text = String::new();
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' {
                    j += 1;
                }
                if at(j) == '\n' {
                    line += 1;
                }
                text.push(at(j));
                j += 1;
            }
            out.push(Token {
                tok: Tok::Str(text),
                line: start_line,
            });
            i = j + 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == '\'' { i } else { i + 1 };
            if at(q + 1) == '\\' {
                // An escaped character literal: up to the closing quote.
                let mut j = q + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                // A lifetime or a label.
                let mut j = q + 1;
                while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
                    j += 1;
                }
                i = j;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let mut j = i;
            if ch == 'r' && at(i + 1) == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
                j = i + 2; // a raw identifier
            }
            let start = j;
            while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
                j += 1;
            }
            out.push(Token {
                tok: Tok::Ident(c[start..j].iter().collect()),
                line,
            });
            i = j;
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Number,
                line,
            });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line,
            });
            i += 1;
        }
    }
    out
}

/// At `i`, the start of a raw string (`r"`, `r#"`, `br"`, ...): its prefix's length and its
/// number of hashes.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c.get(j) == Some(&'b') || c.get(j) == Some(&'c') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

/// One name a `use` line brings into a module.
#[derive(Clone, Debug)]
struct UseItem {
    /// The path as written (`crate`, `super`, `self` or a name first).
    path: Vec<String>,
    /// The name it is known by in the module; `None` for a glob.
    name: Option<String>,
    /// `pub use` (any visibility): a re-export, not a use of its own.
    public: bool,
    line: usize,
}

/// A path written in the code (not in a `use` line), or a name a `use` brought in.
#[derive(Clone, Debug)]
struct Mention {
    path: Vec<String>,
    line: usize,
}

/// What one module (a file, or an inline `mod x { .. }` in it) says.
#[derive(Clone, Debug, Default)]
struct Module {
    file: String,
    uses: Vec<UseItem>,
    mentions: Vec<Mention>,
    /// Children declared with `mod x;`: their name and `#[path]`, if any.
    declared: Vec<(String, Option<String>)>,
}

/// What the parse of one file gives: its module and the inline modules in it, by path
/// relative to the file's module.
fn parse_file(file: &str, src: &str) -> BTreeMap<Vec<String>, Module> {
    let toks = tokenize(src);
    let mut modules: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let new_module = || Module {
        file: file.to_string(),
        ..Module::default()
    };
    modules.insert(Vec::new(), new_module());
    // The inline modules we are in, with the brace depth each opened at.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let mut test_only = false;
    let mut path_attr: Option<String> = None;
    let ident = |i: usize| match toks.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let punct =
        |i: usize, p: char| matches!(toks.get(i).map(|t| &t.tok), Some(Tok::Punct(q)) if *q == p);
    let is_sep = |i: usize| matches!(toks.get(i).map(|t| &t.tok), Some(Tok::PathSep));
    while i < toks.len() {
        let here: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
        // Attributes: `#[cfg(test)]` takes the next item out, `#![cfg(test)]` the file.
        if punct(i, '#') && (punct(i + 1, '[') || (punct(i + 1, '!') && punct(i + 2, '['))) {
            let inner = punct(i + 1, '!');
            let open = if inner { i + 2 } else { i + 1 };
            let close = matching(&toks, open, '[', ']');
            let attr = &toks[open + 1..close];
            if is_cfg_test(attr) {
                if inner {
                    if scope.is_empty() {
                        return BTreeMap::new();
                    }
                } else {
                    test_only = true;
                }
            }
            if let [a, b, c] = attr {
                if a.tok == Tok::Ident("path".into()) && b.tok == Tok::Punct('=') {
                    if let Tok::Str(s) = &c.tok {
                        path_attr = Some(s.clone());
                    }
                }
            }
            i = close + 1;
            continue;
        }
        if test_only {
            i = item_end(&toks, i);
            test_only = false;
            path_attr = None;
            continue;
        }
        match &toks[i].tok {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if scope.last().is_some_and(|(_, d)| *d > depth) {
                    scope.pop();
                }
                i += 1;
            }
            Tok::Ident(kw) if kw == "pub" && punct(i + 1, '(') => {
                // `pub(crate)`, `pub(in crate::x)`: not a path of the code.
                i = matching(&toks, i + 1, '(', ')') + 1;
            }
            Tok::Ident(kw) if kw == "mod" && ident(i + 1).is_some() => {
                let name = ident(i + 1).unwrap_or_default().to_string();
                if punct(i + 2, ';') {
                    let m = modules.entry(here.clone()).or_insert_with(new_module);
                    m.declared.push((name, path_attr.take()));
                    i += 3;
                } else if punct(i + 2, '{') {
                    depth += 1;
                    let mut inner = here.clone();
                    inner.push(name.clone());
                    modules.entry(inner).or_insert_with(new_module);
                    scope.push((name, depth));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let public = i > 0 && matches!(&toks[i - 1].tok, Tok::Ident(p) if p == "pub")
                    || i > 0 && punct(i - 1, ')') && {
                        // `pub(crate) use`: find the `pub` before the group.
                        let mut j = i - 1;
                        while j > 0 && !punct(j, '(') {
                            j -= 1;
                        }
                        j > 0 && matches!(&toks[j - 1].tok, Tok::Ident(p) if p == "pub")
                    };
                let line = toks[i].line;
                let mut items = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut items);
                let m = modules.entry(here.clone()).or_insert_with(new_module);
                for (path, name) in items {
                    m.uses.push(UseItem {
                        path,
                        name,
                        public,
                        line,
                    });
                }
                i = end + 1;
            }
            Tok::Ident(first) => {
                // A path: `a::b::c` (a name alone is recorded too: it may be a `use`d one).
                if i > 0 && (is_sep(i - 1) || punct(i - 1, '.')) {
                    i += 1;
                    continue;
                }
                let line = toks[i].line;
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while is_sep(j) {
                    match ident(j + 1) {
                        Some(s) => {
                            path.push(s.to_string());
                            j += 2;
                        }
                        None => break,
                    }
                }
                let m = modules.entry(here.clone()).or_insert_with(new_module);
                m.mentions.push(Mention { path, line });
                i = j;
            }
            _ => i += 1,
        }
    }
    modules
}

/// Whether an attribute's tokens (inside `#[..]`) are `cfg(test)` or `cfg(all(test, ..))`.
fn is_cfg_test(attr: &[Token]) -> bool {
    let words: Vec<String> = attr
        .iter()
        .filter_map(|t| match &t.tok {
            Tok::Ident(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    match words.as_slice() {
        [cfg, test] => cfg == "cfg" && test == "test",
        [cfg, all, rest @ ..] => cfg == "cfg" && all == "all" && rest.iter().any(|w| w == "test"),
        _ => false,
    }
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[Token], open: usize, o: char, c: char) -> usize {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct(p) if p == o => depth += 1,
            Tok::Punct(p) if p == c => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index after the item starting at `i`: its `;`, or the `}` closing its first block.
fn item_end(toks: &[Token], i: usize) -> usize {
    let mut j = i;
    while j < toks.len() {
        match toks[j].tok {
            Tok::Punct(';') => return j + 1,
            Tok::Punct('{') => return matching(toks, j, '{', '}') + 1,
            Tok::Punct('#') => {
                // Another attribute of the same item.
                if matches!(toks.get(j + 1).map(|t| &t.tok), Some(Tok::Punct('['))) {
                    j = matching(toks, j + 1, '[', ']') + 1;
                    continue;
                }
                j += 1;
            }
            _ => j += 1,
        }
    }
    j
}

/// Reads a use tree from `i` with the path so far; returns the index of its `;` (or of the
/// token that ends it inside braces).
fn use_tree(
    toks: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    items: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    if matches!(toks.get(i).map(|t| &t.tok), Some(Tok::PathSep)) {
        // `use ::x`: another crate.
        prefix.push("::".into());
        i += 1;
    }
    loop {
        match toks.get(i).map(|t| &t.tok) {
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.tok) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, prefix.clone(), items),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                items.push((prefix, None));
                return i + 1;
            }
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                i += 1;
                if s == "self" && !prefix.is_empty() {
                    // `use a::{self, ..}`: the module `a` itself.
                } else {
                    prefix.push(s);
                }
                if matches!(toks.get(i).map(|t| &t.tok), Some(Tok::PathSep)) {
                    i += 1;
                    continue;
                }
                let mut name = prefix.last().cloned();
                if matches!(toks.get(i).map(|t| &t.tok), Some(Tok::Ident(a)) if a == "as") {
                    if let Some(Tok::Ident(alias)) = toks.get(i + 1).map(|t| &t.tok) {
                        name = Some(alias.clone());
                    }
                    i += 2;
                }
                items.push((prefix, name));
                return i;
            }
            _ => return i,
        }
    }
}

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
            if let Some(to) = target {
                if to != module.file {
                    let e = graph.edges.entry(module.file.clone()).or_default();
                    let l = e.entry(to).or_insert(line);
                    *l = (*l).min(line);
                }
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
    if let Some(name) = path.get(n) {
        if let Some(u) = module
            .uses
            .iter()
            .find(|u| u.name.as_deref() == Some(name.as_str()))
        {
            return match absolute(modules, &path[..n], &u.path, hops + 1) {
                Some(target) => resolve(modules, &[&target[..], &path[n + 1..]].concat(), hops + 1),
                // Re-exported from another crate.
                None => None,
            };
        }
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
mod tests {
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
        let files: BTreeMap<String, String> =
            [("lib.rs".to_string(), "mod gone;".to_string())].into();
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
}
