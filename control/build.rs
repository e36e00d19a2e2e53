//! Puts the git commit the binary is built from into `STRAIT_GIT_COMMIT` (`strait --version`):
//! the short hash of HEAD, `-dirty` when tracked files differ from it, else `unknown` (a build
//! outside a git checkout, or without git). `STRAIT_GIT_COMMIT` set in the build's environment wins: a container build, whose
//! context leaves `.git` out, passes it in.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=STRAIT_GIT_COMMIT");
    let commit = match std::env::var("STRAIT_GIT_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => from_git().unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=STRAIT_GIT_COMMIT={commit}");
}

/// `git` in the package's directory, its output trimmed, `None` when it fails.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_git() -> Option<String> {
    let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
    watch_git_state();
    // Tracked files only: a build leaves untracked files (target/) that are no change.
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// Reruns this script when HEAD moves (checkout, commit: HEAD itself, the branch's loose ref,
/// packed-refs), when the index changes (`git add`, stash, reset), and when the sources change,
/// so that `-dirty` follows edits. Paths come from git, so a worktree (whose `.git` is a file)
/// or a separate git dir is watched where it really is.
fn watch_git_state() {
    let mut paths: Vec<PathBuf> = ["HEAD", "index", "packed-refs"]
        .iter()
        .filter_map(|p| git_path(p))
        .collect();
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.extend(git_path(&head_ref));
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    paths.push(manifest.join("src"));
    paths.push(manifest.join("Cargo.toml"));
    if let Some(root) = manifest.parent() {
        paths.extend(
            [
                "dataplane/src",
                "dataplane/Cargo.toml",
                "Cargo.toml",
                "Cargo.lock",
            ]
            .map(|p| root.join(p)),
        );
    }
    for p in paths {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

/// `git rev-parse --git-path`, made absolute.
fn git_path(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(git(&["rev-parse", "--git-path", name])?);
    if p.is_absolute() {
        return Some(p);
    }
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    Some(Path::new(&dir).join(p))
}
