//! The figures the READMEs quote, generated (`strait-bench readme`, which `scripts/readme-tables`
//! runs): marked blocks of `README.md` and `perf/README.md` are rewritten from the result files,
//! the newest full run in `tests/faults/RESULTS.md` and the newest result of each scenario in
//! `perf/results/*.json`, so that every such number is one named run's (commit, date, command)
//! and cannot drift from it. `--check` (in `scripts/test.sh`) fails when a block is not what the
//! files give.
//!
//! A block is the lines between `<!-- BEGIN generated: NAME ... -->` and
//! `<!-- END generated: NAME -->`; the BEGIN line's indentation is the block's (so that a block
//! can sit inside a list item).
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::report::{self, Latest};

const BEGIN: &str = "<!-- BEGIN generated: ";
const END: &str = "<!-- END generated: ";
/// Generated prose is wrapped at this width (tables are not).
const WIDTH: usize = 100;

/// One row of a fault-suite results table: the scenario and the cells the README quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    pub scenario: String,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    /// As written: seconds, or a word such as `none`.
    pub recovery_s: String,
}

/// A run of the fault suite as `tests/faults/RESULTS.md` records it.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRun {
    /// The section's heading, without `## ` (it names the profile and the date).
    pub heading: String,
    /// The commands of the section's first code block, as written.
    pub commands: Vec<String>,
    pub rows: Vec<FaultRow>,
}

/// The newest full-profile run: the first `## ` section whose heading says "full profile" (the
/// file lists runs newest first), its first code block and its first table with a `scenario`
/// column. Columns are found by their header, so that columns added later change nothing.
pub fn newest_full_fault_run(results_md: &str) -> Result<FaultRun> {
    let mut lines = results_md.lines().peekable();
    let heading = loop {
        let Some(l) = lines.next() else {
            bail!("no `## ` section about a full profile run");
        };
        if let Some(h) = l.strip_prefix("## ")
            && h.to_ascii_lowercase().contains("full profile")
        {
            break h.trim().to_string();
        }
    };
    let section: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
    let mut commands = Vec::new();
    let mut fence = section.iter().skip_while(|l| !l.starts_with("```"));
    if fence.next().is_some() {
        commands = fence
            .take_while(|l| !l.starts_with("```"))
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
    }
    let rows = fault_rows(&heading, &section)?;
    Ok(FaultRun {
        heading,
        commands,
        rows,
    })
}

/// The rows of the first table of `section` whose first column is `scenario`.
fn fault_rows(heading: &str, section: &[&str]) -> Result<Vec<FaultRow>> {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut table = section
        .iter()
        .skip_while(|l| {
            !(l.starts_with('|')
                && cells(l)
                    .first()
                    .is_some_and(|c| c.eq_ignore_ascii_case("scenario")))
        })
        .take_while(|l| l.starts_with('|'));
    let Some(header) = table.next().map(|l| cells(l)) else {
        bail!("the section `{heading}` has no table with a `scenario` column");
    };
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .with_context(|| format!("the table of `{heading}` has no `{name}` column"))
    };
    let (c_lost, c_dup, c_order, c_rec) = (
        column("lost")?,
        column("duplicated")?,
        column("out of order")?,
        column("recovery s")?,
    );
    let mut rows = Vec::new();
    for l in table {
        let c = cells(l);
        if c.iter()
            .all(|x| x.chars().all(|ch| matches!(ch, '-' | ':')))
        {
            continue;
        }
        let num = |i: usize, what: &str| -> Result<u64> {
            let cell = c.get(i).map(String::as_str).unwrap_or("");
            cell.replace([' ', ','], "").parse().with_context(|| {
                format!("`{heading}`, row {}: {what} `{cell}` is not a count", c[0])
            })
        };
        rows.push(FaultRow {
            scenario: c[0].clone(),
            lost: num(c_lost, "lost")?,
            duplicated: num(c_dup, "duplicated")?,
            out_of_order: num(c_order, "out of order")?,
            recovery_s: c.get(c_rec).cloned().unwrap_or_default(),
        });
    }
    if rows.is_empty() {
        bail!("the table of `{heading}` has no rows");
    }
    Ok(rows)
}

/// The README's paragraph about a fault run.
pub fn faults_block(run: &FaultRun) -> String {
    let rows = &run.rows;
    let sum = |f: fn(&FaultRow) -> u64| rows.iter().map(f).sum::<u64>();
    let nonzero = |f: fn(&FaultRow) -> u64| {
        let v: Vec<String> = rows
            .iter()
            .filter(|r| f(r) > 0)
            .map(|r| format!("{} {}", r.scenario, f(r)))
            .collect();
        if v.is_empty() {
            String::new()
        } else {
            format!(" ({})", v.join(", "))
        }
    };
    let mut t = format!(
        "Figures of the newest full run of the fault suite, \"{}\" in \
         [`tests/faults/RESULTS.md`](tests/faults/RESULTS.md)",
        run.heading.trim_end_matches('.')
    );
    if !run.commands.is_empty() {
        let cmds: Vec<String> = run.commands.iter().map(|c| format!("`{c}`")).collect();
        let _ = write!(t, ", run with {}", cmds.join(" and "));
    }
    let _ = write!(
        t,
        ": {} scenarios, {} records lost{}, {} out of order{}, {} duplicated{}. Seconds from the \
         fault's end (from the kill, for killed brokers) until replication was back: {}.",
        rows.len(),
        sum(|r| r.lost),
        nonzero(|r| r.lost),
        sum(|r| r.out_of_order),
        nonzero(|r| r.out_of_order),
        sum(|r| r.duplicated),
        nonzero(|r| r.duplicated),
        rows.iter()
            .map(|r| format!("{} {}", r.scenario, r.recovery_s))
            .collect::<Vec<_>>()
            .join(", ")
    );
    wrap(&t, WIDTH)
}

/// The newest result of each scenario (but `smoke`, CI's own) against MM2, for both READMEs.
pub fn perf_block(latest: &Latest) -> String {
    let mut t = String::from(
        "| scenario | result file (date, commit) | measure | strait | MM2 | targets met |\n\
         |---|---|---|---:|---:|---|\n",
    );
    for name in report::in_order(latest) {
        if name == "smoke" {
            continue;
        }
        let (date, file, v) = &latest[name];
        let commit = v["commit"].as_str().unwrap_or("?");
        let (hash, dirty) = commit.split_at(commit.find('-').unwrap_or(commit.len()));
        let run = format!(
            "`{file}` ({}, {}{dirty})",
            date.get(..10).unwrap_or(date),
            hash.get(..7).unwrap_or(hash)
        );
        let empty = Vec::new();
        let entries = v["entries"].as_array().unwrap_or(&empty);
        let latency = report::is_latency_scenario(name);
        let (measure, key) = if latency {
            ("p99 ms", "p99_ms")
        } else {
            ("wall s", "wall_s")
        };
        for (variant, checks) in report::target_checks(name, entries) {
            let figure = |tool: &str| {
                entries
                    .iter()
                    .find(|e| e["tool"] == tool && e["variant"] == variant)
                    .map_or("-".to_string(), |e| {
                        if e["complete"].as_bool() == Some(true) {
                            format!("{:.1}", e[key].as_f64().unwrap_or(0.0))
                        } else {
                            "did not finish".to_string()
                        }
                    })
            };
            let met = checks.map_or("no complete run of both".to_string(), |c| {
                format!("{} of {}", c.iter().filter(|c| c.met()).count(), c.len())
            });
            let label = if entries.iter().any(|e| e["variant"] != "none") {
                format!("{name} [{variant}]")
            } else {
                name.clone()
            };
            let _ = writeln!(
                t,
                "| {label} | {run} | {measure} | {} | {} | {met} |",
                figure("strait"),
                figure("mm2")
            );
        }
    }
    t.push_str(
        "\nThe targets (issue 6) and every other figure of these runs: \
         [`perf/RESULTS.md`](perf/RESULTS.md).",
    );
    t
}

/// Greedy word wrap (a word longer than the width gets a line of its own).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// `doc` with the block `name` replaced by `body` (indented as its BEGIN line).
pub fn replace_block(doc: &str, name: &str, body: &str) -> Result<String> {
    let begin = format!("{BEGIN}{name} ");
    let end = format!("{END}{name} -->");
    let lines: Vec<&str> = doc.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim_start().starts_with(&begin))
        .collect();
    let [b] = starts[..] else {
        bail!(
            "{} BEGIN markers of the block `{name}` (one expected)",
            starts.len()
        );
    };
    let Some(e) = (b + 1..lines.len()).find(|&i| lines[i].trim() == end) else {
        bail!("the block `{name}` has no `{end}` line");
    };
    let indent = &lines[b][..lines[b].len() - lines[b].trim_start().len()];
    let mut out: Vec<String> = lines[..=b].iter().map(|l| l.to_string()).collect();
    out.extend(body.lines().map(|l| {
        if l.is_empty() {
            String::new()
        } else {
            format!("{indent}{l}")
        }
    }));
    out.extend(lines[e..].iter().map(|l| l.to_string()));
    let mut text = out.join("\n");
    if doc.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Every generated block of the repository at `repo`: (file, its text now, its text with the
/// blocks regenerated).
pub fn regenerate(repo: &Path) -> Result<Vec<(PathBuf, String, String)>> {
    let read = |rel: &str| -> Result<String> {
        let path = repo.join(rel);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let faults = newest_full_fault_run(&read("tests/faults/RESULTS.md")?)
        .context("tests/faults/RESULTS.md")?;
    let latest = report::latest_results(&repo.join("perf/results"))?;
    let perf = perf_block(&latest);
    let mut out = Vec::new();
    let readme = read("README.md")?;
    let mut new = replace_block(&readme, "faults", &faults_block(&faults)).context("README.md")?;
    new = replace_block(&new, "perf", &perf).context("README.md")?;
    out.push((repo.join("README.md"), readme, new));
    let perf_readme = read("perf/README.md")?;
    // perf/README.md links relative to perf/.
    let local = perf.replace("](perf/RESULTS.md)", "](RESULTS.md)");
    let new = replace_block(&perf_readme, "perf", &local).context("perf/README.md")?;
    out.push((repo.join("perf/README.md"), perf_readme, new));
    Ok(out)
}

/// The documents whose links must stay inside the repository and resolve.
const LINKED_DOCS: &[&str] = &[
    "README.md",
    "docs/ARCHITECTURE.md",
    "perf/README.md",
    "fuzz/README.md",
];

/// The relative link targets of a markdown text (`[text](target)`), without `#anchors`;
/// web and mail links and in-page anchors are left out.
pub fn relative_links(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else {
            break;
        };
        let whole = &rest[..end];
        if whole.contains(char::is_whitespace) {
            // Not a link (`x](y` in code, or prose): look on from here.
            continue;
        }
        let target = whole.split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
        rest = &rest[end..];
    }
    out
}

/// What is wrong with the design document and the links of the READMEs: a link that leaves the
/// repository (the design once lived in `../shared/`, which users of strait do not have) or
/// points at nothing, and a top-level module of either crate that `docs/ARCHITECTURE.md` does
/// not name (its module map must follow the code).
pub fn check_docs(repo: &Path) -> Result<Vec<String>> {
    let root = repo
        .canonicalize()
        .with_context(|| format!("{}", repo.display()))?;
    let mut problems = Vec::new();
    for rel in LINKED_DOCS {
        let path = root.join(rel);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let dir = path.parent().unwrap_or(&root);
        for target in relative_links(&text) {
            match dir.join(&target).canonicalize() {
                Ok(p) if p.starts_with(&root) => {}
                Ok(_) => problems.push(format!("{rel}: the link {target} leaves the repository")),
                Err(_) => problems.push(format!("{rel}: the link {target} points at nothing")),
            }
        }
    }
    let design = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md"))
        .context("reading docs/ARCHITECTURE.md")?;
    let words: std::collections::BTreeSet<&str> = design
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for src in ["control/src", "dataplane/src"] {
        let entries = std::fs::read_dir(root.join(src)).with_context(|| src.to_string())?;
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let module = name.strip_suffix(".rs").unwrap_or(&name).to_string();
                (e.path().is_dir() || name.ends_with(".rs")).then_some(module)
            })
            .filter(|m| m != "lib" && m != "main")
            .collect();
        names.sort();
        names.dedup();
        for m in names {
            if !words.contains(m.as_str()) {
                problems.push(format!(
                    "docs/ARCHITECTURE.md does not name the module {src}/{m} (its module map must follow the code)"
                ));
            }
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RESULTS: &str = "# Fault suite results\n\n\
        ## Short profile, 2026-12-05\n\n\
        | scenario | produced | lost | duplicated | out of order | recovery s |\n\
        |---|---|---|---|---|---|\n\
        | rolling-restart | 10 | 0 | 0 | 0 | 9.9 |\n\n\
        ## Full profile, 2026-12-04: 3 of 3 pass\n\n\
        ```\n\
        scripts/faults.sh --full   # at abc1234\n\
        ```\n\n\
        Prose with | a bar.\n\n\
        | scenario | produced | source | lost | duplicated | out of order | recovery s | new column |\n\
        |---|---|---|---|---|---|---|---|\n\
        | leader-moves | 120000 | 120000 | 0 | 0 | 0 | 0.1 | x |\n\
        | sigterm-in-target-outage | 90000 | 90000 | 0 | 1 518 | 0 | 1.2 | y |\n\
        | target-broker-killed | 120000 | 120000 | 0 | 0 | 0 | none | z |\n\n\
        ## Full profile, 2026-12-03\n\n\
        | scenario | lost | duplicated | out of order | recovery s |\n\
        |---|---|---|---|---|\n\
        | old | 7 | 0 | 0 | 1.0 |\n";

    #[test]
    fn the_newest_full_run_is_read_by_column_names() {
        let run = newest_full_fault_run(RESULTS).unwrap();
        assert_eq!(run.heading, "Full profile, 2026-12-04: 3 of 3 pass");
        assert_eq!(run.commands, ["scripts/faults.sh --full   # at abc1234"]);
        assert_eq!(run.rows.len(), 3);
        assert_eq!(
            run.rows[1],
            FaultRow {
                scenario: "sigterm-in-target-outage".into(),
                lost: 0,
                duplicated: 1518,
                out_of_order: 0,
                recovery_s: "1.2".into(),
            }
        );
        let text = faults_block(&run);
        assert!(
            text.lines().all(|l| l.len() <= WIDTH || !l.contains(' ')),
            "{text}"
        );
        let one = text.replace('\n', " ");
        for part in [
            "\"Full profile, 2026-12-04: 3 of 3 pass\"",
            "`scripts/faults.sh --full # at abc1234`",
            "3 scenarios, 0 records lost, 0 out of order, 1518 duplicated (sigterm-in-target-outage 1518)",
            "leader-moves 0.1, sigterm-in-target-outage 1.2, target-broker-killed none.",
        ] {
            assert!(one.contains(part), "no `{part}` in:\n{text}");
        }
    }

    #[test]
    fn a_results_file_without_what_is_quoted_is_an_error() {
        assert!(newest_full_fault_run("## Short profile\n").is_err());
        let no_column = "## Full profile, x\n\n| scenario | lost |\n|---|---|\n| a | 0 |\n";
        let e = newest_full_fault_run(no_column).unwrap_err().to_string();
        assert!(e.contains("duplicated"), "{e}");
        let bad = "## Full profile\n\n| scenario | lost | duplicated | out of order | recovery s |\n\
                   |---|---|---|---|---|\n| a | many | 0 | 0 | 1 |\n";
        let e = format!("{:#}", newest_full_fault_run(bad).unwrap_err());
        assert!(e.contains("lost `many`"), "{e}");
    }

    #[test]
    fn blocks_are_replaced_in_place_and_keep_their_indentation() {
        let doc = "# T\n\n- item\n  <!-- BEGIN generated: faults (do not edit) -->\n  old\n  \
                   <!-- END generated: faults -->\n- next\n";
        let new = replace_block(doc, "faults", "line 1\n\nline 2").unwrap();
        assert_eq!(
            new,
            "# T\n\n- item\n  <!-- BEGIN generated: faults (do not edit) -->\n  line 1\n\n  line 2\n  \
             <!-- END generated: faults -->\n- next\n"
        );
        assert_eq!(
            replace_block(&new, "faults", "line 1\n\nline 2").unwrap(),
            new
        );
        assert!(replace_block(doc, "perf", "x").is_err());
        let twice = format!("{doc}{doc}");
        assert!(replace_block(&twice, "faults", "x").is_err());
        let open = "<!-- BEGIN generated: faults -->\nold\n";
        assert!(replace_block(open, "faults", "x").is_err());
    }

    #[test]
    fn relative_links_are_found() {
        let doc = "See [a](docs/A.md#x), [b](../shared/B.md), [web](https://x.y/z), \
                   [here](#top), `x](y` and [c](perf/README.md).";
        assert_eq!(
            relative_links(doc),
            ["docs/A.md", "../shared/B.md", "perf/README.md"]
        );
    }

    #[test]
    fn the_design_document_and_the_links_are_checked() {
        let base = std::env::temp_dir().join(format!("strait-readme-docs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("repo");
        for d in ["docs", "perf", "fuzz", "control/src/run", "dataplane/src"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        for f in [
            "control/src/lib.rs",
            "control/src/plan.rs",
            "dataplane/src/lib.rs",
        ] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        std::fs::write(dir.join("perf/README.md"), "[r](../README.md)").unwrap();
        std::fs::write(dir.join("fuzz/README.md"), "").unwrap();
        std::fs::write(
            dir.join("docs/ARCHITECTURE.md"),
            "`run` and `plan`, [readme](../README.md)",
        )
        .unwrap();
        std::fs::write(
            dir.join("README.md"),
            "[design](docs/ARCHITECTURE.md), [shared](../shared/ARCHITECTURE.md), [gone](docs/gone.md)",
        )
        .unwrap();
        std::fs::create_dir_all(base.join("shared")).unwrap();
        std::fs::write(base.join("shared/ARCHITECTURE.md"), "").unwrap();
        let problems = check_docs(&dir).unwrap();
        assert_eq!(
            problems,
            [
                "README.md: the link ../shared/ARCHITECTURE.md leaves the repository",
                "README.md: the link docs/gone.md points at nothing",
            ],
            "{problems:?}"
        );
        std::fs::write(dir.join("control/src/newmod.rs"), "").unwrap();
        let problems = check_docs(&dir).unwrap();
        assert!(
            problems.iter().any(|p| p.contains("control/src/newmod")),
            "{problems:?}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_perf_table_shows_each_scenario_and_variant_with_its_run() {
        let e = |tool: &str, variant: &str, wall: f64, p99: f64| {
            json!({"tool": tool, "variant": variant, "complete": true, "gib": 1.0,
                   "cpu_s": 1.0, "cpu_s_per_gib": 1.0, "peak_rss_mib": 10.0,
                   "wall_s": wall, "p99_ms": p99})
        };
        let mut latest = Latest::new();
        latest.insert(
            "catch-up".into(),
            (
                "2026-12-04T03:12:41Z".into(),
                "2026-12-04-catch-up.json".into(),
                json!({"commit": "1ee26abe88e80ca7", "entries": [e("strait", "none", 5.8, 1.0), e("mm2", "none", 17.0, 1.0)]}),
            ),
        );
        latest.insert(
            "steady".into(),
            (
                "2026-11-30T01:38:54Z".into(),
                "s.json".into(),
                json!({"commit": "6f1fcf36193304ed-dirty", "entries": [e("strait", "lz4", 60.0, 5.0), e("mm2", "lz4", 60.0, 10.9)]}),
            ),
        );
        latest.insert(
            "smoke".into(),
            ("d".into(), "x.json".into(), json!({"entries": []})),
        );
        let t = perf_block(&latest);
        assert!(
            t.contains("| catch-up | `2026-12-04-catch-up.json` (2026-12-04, 1ee26ab) | wall s | 5.8 | 17.0 | 0 of 4 |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| steady [lz4] | `s.json` (2026-11-30, 6f1fcf3-dirty) | p99 ms | 5.0 | 10.9 |"
            ),
            "{t}"
        );
        assert!(!t.contains("smoke"), "{t}");
    }
}
