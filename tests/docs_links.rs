//! Every relative link of the documentation resolves: in `README.md` and in the user guide's
//! chapters (`docs/src/**/*.md`), each link or image to a relative path names a file or
//! directory that exists, and each `#anchor` (in the same file or after a path to a Markdown
//! file) matches a heading of that file, slugged as mdBook makes heading ids (lower case,
//! letters, digits, `_` and `-` kept, white space turned into `-`, everything else dropped;
//! a repeated heading gets `-1`, `-2`, ...). Links with a scheme (`https:`, `mailto:`) are not
//! followed. Code blocks and code spans are skipped, so a command's `[--flag](...)`-like text
//! is not a link. Every chapter file under `docs/src` must also be listed in `SUMMARY.md`.
//!
//! The checker is plain std: the test needs no network, no mdBook and no built `vta`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// One link found in a Markdown file: its line and its target as written.
#[derive(Debug, Clone, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The text of a Markdown file with fenced code blocks blanked (lines kept, so line numbers
/// stay right) and inline code spans removed.
fn prose_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(f) = &fence {
            if trimmed.starts_with(f.as_str()) {
                fence = None;
            }
            out.push(String::new());
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker: String = trimmed
                .chars()
                .take_while(|&c| c == '`' || c == '~')
                .collect();
            fence = Some(marker);
            out.push(String::new());
            continue;
        }
        out.push(strip_code_spans(line));
    }
    out
}

/// `line` without its code spans (a run of backticks up to the same run).
fn strip_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '`' {
            let mut n = 0;
            while i + n < chars.len() && chars[i + n] == '`' {
                n += 1;
            }
            // Find the closing run of exactly n backticks.
            let mut j = i + n;
            let mut closed = None;
            while j < chars.len() {
                if chars[j] == '`' {
                    let mut m = 0;
                    while j + m < chars.len() && chars[j + m] == '`' {
                        m += 1;
                    }
                    if m == n {
                        closed = Some(j + m);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            match closed {
                Some(end) => {
                    out.push(' ');
                    i = end;
                }
                None => {
                    out.extend(&chars[i..i + n]);
                    i += n;
                }
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Every inline link and image target (`[text](target)`, `![alt](target "title")`) and
/// reference definition (`[label]: target`) of a Markdown file.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (idx, line) in prose_lines(text).iter().enumerate() {
        let line_no = idx + 1;
        let t = line.trim_start();
        if t.starts_with('[') {
            if let Some(close) = t.find("]:") {
                if !t[..close].contains('(') {
                    let target = t[close + 2..].split_whitespace().next().unwrap_or("");
                    if !target.is_empty() {
                        found.push(Link {
                            line: line_no,
                            target: target.trim_matches(['<', '>']).to_string(),
                        });
                    }
                    continue;
                }
            }
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while let Some(pos) = line[i..].find("](") {
            let start = i + pos + 2;
            // The target runs to the matching ')' (balanced parentheses) or the first space.
            let mut depth = 0usize;
            let mut end = start;
            while end < bytes.len() {
                match bytes[end] {
                    b'(' => depth += 1,
                    b')' if depth == 0 => break,
                    b')' => depth -= 1,
                    b' ' => break,
                    _ => {}
                }
                end += 1;
            }
            let target = line[start..end].trim_matches(['<', '>']).to_string();
            if !target.is_empty() {
                found.push(Link {
                    line: line_no,
                    target,
                });
            }
            i = end.max(start);
        }
    }
    found
}

/// A heading's id as mdBook 0.5 makes it from the heading's text.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The text a heading's line renders to: code spans keep their text without backticks,
/// links their label, emphasis markers (`*`) go.
fn heading_text(raw: &str) -> String {
    let mut s = raw
        .trim()
        .trim_end_matches('#')
        .trim()
        .replace(['`', '*'], "");
    // [label](target) -> label
    while let Some(open) = s.find('[') {
        let Some(mid) = s[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = s[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        s = format!("{}{}{}", &s[..open], &s[open + 1..mid], &s[close + 1..]);
    }
    s
}

/// The ids of every ATX heading of a Markdown file, outside code blocks.
fn anchors(text: &str) -> HashSet<String> {
    let mut used = HashSet::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence || !t.starts_with('#') {
            continue;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if hashes > 6 || !t[hashes..].starts_with(' ') {
            continue;
        }
        let id = slug(&heading_text(&t[hashes..]));
        if !used.insert(id.clone()) {
            let mut n = 1;
            while !used.insert(format!("{id}-{n}")) {
                n += 1;
            }
        }
    }
    used
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The problems of the links of `files` (paths relative to `root`), one line each:
/// `FILE:LINE: link TARGET: what is wrong`.
fn check(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut anchor_cache: BTreeMap<PathBuf, HashSet<String>> = BTreeMap::new();
    for file in files {
        let text = match fs::read_to_string(root.join(file)) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{}: cannot be read: {e}", file.display()));
                continue;
            }
        };
        for link in links(&text) {
            let t = link.target.as_str();
            if t.contains("://") || t.starts_with("mailto:") || t.starts_with("tel:") {
                continue;
            }
            let (path_part, anchor) = match t.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (t, None),
            };
            let target_file = if path_part.is_empty() {
                file.clone()
            } else if path_part.starts_with('/') {
                problems.push(format!(
                    "{}:{}: link {t}: an absolute path; write it relative to the file",
                    file.display(),
                    link.line
                ));
                continue;
            } else {
                normalize(&file.parent().unwrap_or(Path::new("")).join(path_part))
            };
            if !root.join(&target_file).exists() {
                problems.push(format!(
                    "{}:{}: link {t}: {} does not exist",
                    file.display(),
                    link.line,
                    target_file.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target_file.extension().and_then(|e| e.to_str()) != Some("md") {
                problems.push(format!(
                    "{}:{}: link {t}: an anchor into {}, which is not a Markdown file",
                    file.display(),
                    link.line,
                    target_file.display()
                ));
                continue;
            }
            let ids = anchor_cache.entry(target_file.clone()).or_insert_with(|| {
                anchors(&fs::read_to_string(root.join(&target_file)).unwrap_or_default())
            });
            if !ids.contains(anchor) {
                problems.push(format!(
                    "{}:{}: link {t}: {} has no heading whose id is '{anchor}'",
                    file.display(),
                    link.line,
                    target_file.display()
                ));
            }
        }
    }
    problems
}

/// Every `.md` file under `dir` (relative to `root`), not following symbolic links.
fn markdown_under(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(kind) = e.file_type() else { continue };
        let rel = dir.join(e.file_name());
        if kind.is_dir() {
            markdown_under(root, &rel, out);
        } else if kind.is_file() && rel.extension().and_then(|x| x.to_str()) == Some("md") {
            out.push(rel);
        }
    }
}

#[test]
fn readme_and_guide_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![PathBuf::from("README.md")];
    markdown_under(root, Path::new("docs/src"), &mut files);
    assert!(
        files.len() > 5,
        "expected the guide's chapters under docs/src, found {files:?}"
    );
    let problems = check(root, &files);
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_chapter_is_in_the_summary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary =
        fs::read_to_string(root.join("docs/src/SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let listed: HashSet<PathBuf> = links(&summary)
        .into_iter()
        .map(|l| normalize(&Path::new("docs/src").join(l.target.split('#').next().unwrap())))
        .collect();
    let mut files = Vec::new();
    markdown_under(root, Path::new("docs/src"), &mut files);
    let orphans: Vec<_> = files
        .iter()
        .filter(|f| f.file_name().unwrap() != "SUMMARY.md" && !listed.contains(*f))
        .collect();
    assert!(
        orphans.is_empty(),
        "chapters not in docs/src/SUMMARY.md (mdBook would not build them): {orphans:?}"
    );
}

/// The checker itself finds a missing file, a missing anchor and an anchor into a non-Markdown
/// file, and accepts what mdBook would resolve (duplicate headings, code in headings, links
/// inside code left alone).
#[test]
fn the_checker_catches_broken_links() {
    let dir = std::env::temp_dir().join(format!("vta-docs-links-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let root = dir.as_path();
    fs::create_dir_all(root.join("docs/src/sub")).unwrap();
    fs::write(root.join("docs/src/notes.txt"), "x").unwrap();
    fs::write(
        root.join("docs/src/sub/a.md"),
        "# Title\n\n## `ALU_LUT`: a table (Co-design)\n\n## Again\n\n## Again\n",
    )
    .unwrap();
    fs::write(
        root.join("docs/src/b.md"),
        "# B\n\
         [ok](sub/a.md) [ok](sub/a.md#alu_lut-a-table-co-design) [ok](sub/a.md#again-1) [ok](#b)\n\
         [ok](notes.txt) [ok](https://example.org/x#y) `[not a link](nowhere.md)`\n\
         ```sh\n[not a link either](nowhere.md)\n```\n\
         [missing file](sub/c.md)\n\
         [missing anchor](sub/a.md#again-2)\n\
         [anchor into text](notes.txt#x)\n\
         [missing here](#nothing)\n\
         ![missing image](img/x.svg)\n\
         [ref]: ../../nowhere.md\n",
    )
    .unwrap();
    let problems = check(root, &[PathBuf::from("docs/src/b.md")]);
    let lines: Vec<&str> = problems
        .iter()
        .map(|p| p.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "docs/src/b.md:7",
            "docs/src/b.md:8",
            "docs/src/b.md:9",
            "docs/src/b.md:10",
            "docs/src/b.md:11",
            "docs/src/b.md:12"
        ],
        "{problems:#?}"
    );
    assert!(
        problems[1].contains("no heading whose id is 'again-2'"),
        "{problems:#?}"
    );
    fs::remove_dir_all(&dir).unwrap();
}
