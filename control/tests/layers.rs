//! The control crate's layering, checked from its source: every `crate::`, `super::` and
//! `self::` path in `control/src` is an edge from the module whose file holds it to the module
//! it names. Only production code counts: comments, string literals and `#[cfg(test)]` items
//! are skipped (a test may use whatever it exercises). The tests fail on
//!
//! - a cycle between top-level modules, or between the submodules of one directory module
//!   (edges between a directory module's own file and its children do not count: a parent
//!   re-exports its children, and children use the parent's shared types);
//! - a top-level module that uses one in its own or a higher layer of [`LAYERS`].
//!
//! Each failure names the modules and, for every edge, the file and line that makes it. Paths
//! through a re-export are seen as the module that re-exports (`crate::offsets::TopicPartition`
//! is an edge to `offsets`, not to `model`); the binary (`main.rs`) is not part of the graph.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `control/src`, top layer first. A module may use modules of lower
/// layers only; modules of one layer do not use each other.
const LAYERS: &[&[&str]] = &[
    &["commands"],
    &["run"],
    &["api", "duties"],
    &["verify"],
    &["plan"],
    &["store"],
    &["cluster", "offsets"],
    &["group"],
    &["config"],
    &["mm2"],
    &["model", "time"],
];

/// A module path inside the crate (`["duties", "topics"]`); the crate root is empty.
type ModPath = Vec<String>;

/// Where an edge was seen.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Site {
    file: String,
    line: usize,
    path: String,
}

/// Module dependencies: for each (from, to) the first place that makes the edge.
#[derive(Debug, Default)]
struct Graph {
    modules: BTreeSet<ModPath>,
    edges: BTreeMap<(ModPath, ModPath), Site>,
}

/// The module a source file defines, from its path relative to `src/` (`None` for `main.rs`).
fn module_of(rel: &Path) -> Option<ModPath> {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let (last, dirs) = parts.split_last()?;
    let stem = last.strip_suffix(".rs")?;
    let mut m: ModPath = dirs.to_vec();
    match (dirs.is_empty(), stem) {
        (true, "main") => return None,
        (true, "lib") | (_, "mod") => {}
        _ => m.push(stem.to_string()),
    }
    Some(m)
}

/// `text` with comments removed and string and character literals emptied, line breaks kept
/// (so that line numbers still hold).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if let Some((prefix, hashes)) = raw_string_start(rest) {
            // r"..." or r#"..."#: skip to the quote followed by the same number of hashes.
            i += prefix + hashes + 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while i < b.len() && !b[i..].starts_with(&close) {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if let Some(len) = char_literal_len(&text[i..]) {
            i += len;
            out.push_str("' '");
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A raw string literal starting here (`r"`, `r#"`, `br"`...): the length of its prefix (`r` or
/// `br`) and its number of `#`.
fn raw_string_start(rest: &[u8]) -> Option<(usize, usize)> {
    let prefix = if rest.starts_with(b"br") { 2 } else { 1 };
    let r = rest.strip_prefix(&b"br"[2 - prefix..])?;
    let hashes = r.iter().take_while(|&&c| c == b'#').count();
    (r.get(hashes) == Some(&b'"')).then_some((prefix, hashes))
}

/// The length in bytes of a character literal starting at the start of `rest`; `None` when
/// there is none (a lifetime, or anything else).
fn char_literal_len(rest: &str) -> Option<usize> {
    let body = rest.strip_prefix('\'')?;
    let ch = body.chars().next()?;
    if ch == '\\' {
        // An escape: up to the next quote (`'\n'`, `'\''`, `'\u{1F600}'`).
        let end = body.get(2..)?.find('\'')?;
        return Some(1 + 2 + end + 1);
    }
    body[ch.len_utf8()..]
        .starts_with('\'')
        .then_some(1 + ch.len_utf8() + 1)
}

/// Every path that starts with `crate::`, `super::` or `self::` in `code`, with use-groups
/// (`crate::{a, b::{c, d}}`) expanded, and the line it is on.
fn paths_in(code: &str) -> Vec<(usize, Vec<String>)> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_cfg_test(&tokens[i..]) {
            i = skip_item(&tokens, i + CFG_TEST.len());
            continue;
        }
        let (line, tok) = &tokens[i];
        let is_root = matches!(tok.as_str(), "crate" | "super" | "self");
        let after_path = i > 0 && tokens[i - 1].1 == "::";
        if is_root && !after_path && tokens.get(i + 1).is_some_and(|t| t.1 == "::") {
            let mut paths = Vec::new();
            i = use_tree(&tokens, i, Vec::new(), &mut paths);
            out.extend(paths.into_iter().map(|p| (*line, p)));
        } else {
            i += 1;
        }
    }
    out
}

/// `#[cfg(test)]` as tokens.
const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];

fn is_cfg_test(tokens: &[(usize, String)]) -> bool {
    tokens.len() >= CFG_TEST.len() && tokens.iter().zip(CFG_TEST).all(|(t, c)| t.1 == c)
}

/// The index after the item starting at `tokens[i]`: its `;` or its closing brace (a `;` or
/// `}` inside parentheses or brackets does not end it).
fn skip_item(tokens: &[(usize, String)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i].1.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ";" if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Identifiers, `::` and single punctuation characters, with their line numbers.
fn tokenize(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_alphanumeric() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push((n + 1, chars[start..i].iter().collect()));
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                out.push((n + 1, "::".to_string()));
                i += 2;
            } else {
                if !c.is_whitespace() {
                    out.push((n + 1, c.to_string()));
                }
                i += 1;
            }
        }
    }
    out
}

/// Reads a path or use-tree starting at `tokens[i]`, appending every complete path (prefixed by
/// `prefix`) to `out`. Returns the index after it.
fn use_tree(
    tokens: &[(usize, String)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i).map(|t| t.1.as_str()) {
            Some("{") => {
                i += 1;
                loop {
                    if tokens.get(i).is_some_and(|t| t.1 == "}") {
                        return i + 1;
                    }
                    i = use_tree(tokens, i, prefix.clone(), out);
                    match tokens.get(i).map(|t| t.1.as_str()) {
                        Some(",") => i += 1,
                        Some("}") => return i + 1,
                        _ => return i,
                    }
                }
            }
            Some(t) if is_ident(t) => {
                prefix.push(t.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t.1 == "::") {
                    i += 1;
                    continue;
                }
                out.push(prefix);
                return i;
            }
            Some("*") => {
                out.push(prefix);
                return i + 1;
            }
            _ => {
                if !prefix.is_empty() {
                    out.push(prefix);
                }
                return i;
            }
        }
    }
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The module `path` (as written in module `from`) names: the longest prefix of its absolute
/// form that is a module of the crate.
fn resolve(from: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let (first, rest) = path.split_first()?;
    let mut abs: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => from.clone(),
        "super" => {
            let mut m = from.clone();
            m.pop()?;
            m
        }
        _ => return None,
    };
    let mut segments = rest.iter().peekable();
    while segments.peek().is_some_and(|s| s.as_str() == "super") {
        segments.next();
        abs.pop()?;
    }
    let mut best = abs.clone();
    for s in segments {
        abs.push(s.clone());
        if modules.contains(&abs) {
            best = abs.clone();
        } else {
            break;
        }
    }
    Some(best)
}

/// The module graph of the crate whose sources are `files` (path relative to `src/`, text).
fn graph(files: &BTreeMap<PathBuf, String>) -> Graph {
    let mut g = Graph::default();
    let owned: Vec<(ModPath, &PathBuf, &String)> = files
        .iter()
        .filter_map(|(p, t)| module_of(p).map(|m| (m, p, t)))
        .collect();
    g.modules = owned.iter().map(|(m, _, _)| m.clone()).collect();
    for (from, file, text) in &owned {
        for (line, path) in paths_in(&code_only(text)) {
            let Some(to) = resolve(from, &path, &g.modules) else {
                continue;
            };
            if &to != from {
                g.edges.entry((from.clone(), to)).or_insert_with(|| Site {
                    file: format!("control/src/{}", file.display()),
                    line,
                    path: path.join("::"),
                });
            }
        }
    }
    g
}

/// For each directory module (the root included), the edges between its children: `(parent,
/// from child, to child)` with the site of one edge that makes it.
fn child_edges(g: &Graph) -> BTreeMap<ModPath, BTreeMap<(String, String), Site>> {
    let mut out: BTreeMap<ModPath, BTreeMap<(String, String), Site>> = BTreeMap::new();
    for ((from, to), site) in &g.edges {
        // The deepest module containing both ends; the edge joins two of its children.
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        let (Some(a), Some(b)) = (from.get(common), to.get(common)) else {
            continue;
        };
        out.entry(from[..common].to_vec())
            .or_default()
            .entry((a.clone(), b.clone()))
            .or_insert_with(|| site.clone());
    }
    out
}

/// The cycles of a directed graph: for each strongly connected component of more than one
/// node, one shortest cycle through it and the component's nodes.
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<(Vec<String>, BTreeSet<String>)> {
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for (a, b) in edges {
                if *a == n && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for &n in &nodes {
        if done.contains(n) || !reach(n).contains(n) {
            continue;
        }
        // Breadth-first from n back to n gives a shortest cycle.
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([n.clone()]);
        'search: while let Some(m) = queue.pop_front() {
            for (a, b) in edges.iter().filter(|(a, _)| *a == m) {
                if b == n {
                    parent.insert(n.clone(), a.clone());
                    break 'search;
                }
                if !parent.contains_key(b) {
                    parent.insert(b.clone(), a.clone());
                    queue.push_back(b.clone());
                }
            }
        }
        let mut cycle = vec![n.clone()];
        let mut at = parent[n].clone();
        while at != *n {
            cycle.push(at.clone());
            at = parent[&at].clone();
        }
        cycle.push(n.clone());
        cycle.reverse();
        let component: BTreeSet<String> = reach(n)
            .into_iter()
            .filter(|m| reach(m).contains(n))
            .collect();
        done.extend(component.iter().cloned());
        out.push((cycle, component));
    }
    out
}

/// The cycles among the children of every directory module, described with their edges.
fn cycle_report(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (parent, edges) in child_edges(g) {
        let keys: BTreeSet<(String, String)> = edges.keys().cloned().collect();
        for (cycle, component) in cycles(&keys) {
            let scope = if parent.is_empty() {
                "top-level modules".to_string()
            } else {
                format!("the submodules of {}", parent.join("::"))
            };
            let mut text = format!("cycle between {scope}: {}", cycle.join(" -> "));
            if component.len() + 1 > cycle.len() {
                let all: Vec<&str> = component.iter().map(String::as_str).collect();
                text.push_str(&format!(
                    " (all of {} depend on each other)",
                    all.join(", ")
                ));
            }
            for w in cycle.windows(2) {
                let s = &edges[&(w[0].clone(), w[1].clone())];
                text.push_str(&format!(
                    "\n    {} -> {}: {}:{} uses {}",
                    w[0], w[1], s.file, s.line, s.path
                ));
            }
            out.push(text);
        }
    }
    out
}

/// Edges between top-level modules that do not point to a lower layer of `layers`.
fn layer_report(g: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let rank = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut out = Vec::new();
    let top: BTreeMap<(String, String), Site> =
        child_edges(g).remove(&Vec::new()).unwrap_or_default();
    for ((a, b), s) in &top {
        match (rank(a), rank(b)) {
            (Some(ra), Some(rb)) if ra < rb => {}
            (None, _) | (_, None) => out.push(format!(
                "{a} -> {b}: a top-level module missing from LAYERS ({}:{} uses {})",
                s.file, s.line, s.path
            )),
            _ => out.push(format!(
                "{a} -> {b}: {a} may use only lower layers ({}:{} uses {})",
                s.file, s.line, s.path
            )),
        }
    }
    out
}

/// Every `.rs` file under `dir`, by path relative to it.
fn sources(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read control/src") {
            let p = entry.expect("directory entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(dir).expect("under src").to_path_buf();
                out.insert(
                    rel,
                    std::fs::read_to_string(&p).expect("read a source file"),
                );
            }
        }
    }
    out
}

fn control_graph() -> Graph {
    graph(&sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")))
}

#[test]
fn no_module_cycles() {
    let g = control_graph();
    assert!(
        g.modules.len() > 30 && g.edges.len() > 60,
        "the checker sees too little of control/src ({} modules, {} edges)",
        g.modules.len(),
        g.edges.len()
    );
    let report = cycle_report(&g);
    assert!(report.is_empty(), "\n{}\n", report.join("\n"));
}

#[test]
fn top_level_modules_use_lower_layers_only() {
    let report = layer_report(&control_graph(), LAYERS);
    assert!(report.is_empty(), "\n{}\n", report.join("\n"));
}

/// A crate of `(path, text)` files.
fn crate_of(files: &[(&str, &str)]) -> Graph {
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    graph(&files)
}

#[test]
fn a_planted_top_level_cycle_is_found_and_printed() {
    let g = crate_of(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("a.rs", "use crate::b::Thing;\n"),
        ("b/mod.rs", "pub mod inner;\n"),
        ("b/inner.rs", "fn f() {\n    crate::c::g();\n}\n"),
        ("c.rs", "use crate::{model::X, a::{self, Y}};\n"),
    ]);
    let report = cycle_report(&g);
    assert_eq!(report.len(), 1, "{report:?}");
    let text = &report[0];
    assert!(
        text.starts_with("cycle between top-level modules: a -> b -> c -> a"),
        "{text}"
    );
    assert!(
        text.contains("b -> c: control/src/b/inner.rs:2 uses crate::c::g"),
        "{text}"
    );
    assert!(
        text.contains("c -> a: control/src/c.rs:1 uses crate::a"),
        "{text}"
    );
    // The same crate breaks the layering too.
    let layers: &[&[&str]] = &[&["a"], &["b"], &["c"]];
    let broken = layer_report(&g, layers);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].starts_with("c -> a:"), "{broken:?}");
}

#[test]
fn a_planted_cycle_between_submodules_is_found() {
    let g = crate_of(&[
        ("lib.rs", "pub mod d;\n"),
        ("d/mod.rs", "pub mod x;\npub mod y;\npub use x::X;\n"),
        ("d/x.rs", "use super::y::Y;\n"),
        (
            "d/y.rs",
            "pub struct Y;\nfn f() { let _ = crate::d::x::X; }\n",
        ),
    ]);
    let report = cycle_report(&g);
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(
        report[0].starts_with("cycle between the submodules of d: x -> y -> x"),
        "{report:?}"
    );
}

#[test]
fn comments_strings_and_parents_are_not_edges() {
    let g = crate_of(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        (
            "a/mod.rs",
            "//! See [`crate::b`].\npub mod k;\nfn f() { let s = \"crate::b::x\"; let r = r#\"crate::b\"#; }\n/* crate::b::y */\n",
        ),
        (
            "a/k.rs",
            "use super::*;\nfn g<'a>(c: char) -> bool { c == '\"' }\n#[cfg(test)]\nmod tests {\n    use crate::b::T;\n}\n",
        ),
        ("b.rs", "use crate::a::k;\n"),
    ]);
    assert!(cycle_report(&g).is_empty(), "{:?}", g.edges);
    let edges: Vec<_> = g.edges.keys().collect();
    assert_eq!(
        edges,
        vec![
            &(
                vec!["a".to_string(), "k".to_string()],
                vec!["a".to_string()]
            ),
            &(
                vec!["b".to_string()],
                vec!["a".to_string(), "k".to_string()]
            ),
        ]
    );
}
