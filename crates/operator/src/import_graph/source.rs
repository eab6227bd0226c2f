//! Reading one file of Rust source, as much as the graph needs: its tokens (comments, strings
//! and lifetimes out of the way), its `mod` lines, its `use` trees and the paths in its code,
//! with `#[cfg(test)]` items left out.

use std::collections::BTreeMap;

/// A token of Rust source, as much as the graph needs.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A number; it only needs to be something else than an identifier.
    Number,
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    tok: Tok,
    line: usize,
}

/// Splits source into tokens, dropping comments, lifetimes and the contents of character
/// literals (string contents are kept for `#[path = "..."]`).
pub(super) fn tokenize(src: &str) -> Vec<Token> {
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
pub(super) fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
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
pub(super) struct UseItem {
    /// The path as written (`crate`, `super`, `self` or a name first).
    pub(super) path: Vec<String>,
    /// The name it is known by in the module; `None` for a glob.
    pub(super) name: Option<String>,
    /// `pub use` (any visibility): a re-export, not a use of its own.
    pub(super) public: bool,
    pub(super) line: usize,
}

/// A path written in the code (not in a `use` line), or a name a `use` brought in.
#[derive(Clone, Debug)]
pub(super) struct Mention {
    pub(super) path: Vec<String>,
    pub(super) line: usize,
}

/// What one module (a file, or an inline `mod x { .. }` in it) says.
#[derive(Clone, Debug, Default)]
pub(super) struct Module {
    pub(super) file: String,
    pub(super) uses: Vec<UseItem>,
    pub(super) mentions: Vec<Mention>,
    /// Children declared with `mod x;`: their name and `#[path]`, if any.
    pub(super) declared: Vec<(String, Option<String>)>,
}

/// What the parse of one file gives: its module and the inline modules in it, by path
/// relative to the file's module.
pub(super) fn parse_file(file: &str, src: &str) -> BTreeMap<Vec<String>, Module> {
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
            if let [a, b, c] = attr
                && a.tok == Tok::Ident("path".into())
                && b.tok == Tok::Punct('=')
                && let Tok::Str(s) = &c.tok
            {
                path_attr = Some(s.clone());
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
pub(super) fn is_cfg_test(attr: &[Token]) -> bool {
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
pub(super) fn matching(toks: &[Token], open: usize, o: char, c: char) -> usize {
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
pub(super) fn item_end(toks: &[Token], i: usize) -> usize {
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
pub(super) fn use_tree(
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
