//! The two lists that say which failing cases are known: `allowed.txt`
//! (injection artifacts, and syscalls not injected at all, each with its
//! reason) and `expected-failures.txt` (defects being fixed, each naming its
//! issue item, removed once the fix lands).
//!
//! A line is `PATTERN VIOLATIONS ...`: PATTERN is
//! `SCENARIO/SYSCALL/ERRNO/WHEN`, each field `*` or a comma-separated list;
//! VIOLATIONS is `*` or a comma-separated list of violation kinds (see
//! `case::Kind`). `#` starts a comment line.

use std::fs;
use std::path::Path;

/// A case's coordinates, as patterns match them.
pub struct CaseId<'a> {
    pub scenario: &'a str,
    pub syscall: &'a str,
    pub errno: &'a str,
    pub when: u32,
}

impl CaseId<'_> {
    pub fn text(&self) -> String {
        format!("{}/{}/{}/{}", self.scenario, self.syscall, self.errno, self.when)
    }
}

#[derive(Debug)]
pub struct Rule {
    fields: [Vec<String>; 4],
    kinds: Vec<String>,
    /// `#N` (issue 18 item) or `new` for expected failures; `skip`/`allow`.
    pub tag: String,
    pub reason: String,
    /// The line in its file, to name the rule in the summary.
    pub line: usize,
    pub text: String,
}

impl Rule {
    pub fn matches_case(&self, id: &CaseId) -> bool {
        let when = id.when.to_string();
        let values = [id.scenario, id.syscall, id.errno, when.as_str()];
        self.fields.iter().zip(values).all(|(alts, v)| alts.iter().any(|a| a == "*" || a == v))
    }

    pub fn covers(&self, id: &CaseId, kind: &str) -> bool {
        self.matches_case(id) && self.kinds.iter().any(|k| k == "*" || k == kind)
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(str::to_string).collect()
}

/// Parse `allowed.txt` (`KIND PATTERN VIOLATIONS REASON`, KIND `skip` or
/// `allow`) or `expected-failures.txt` (`PATTERN VIOLATIONS ITEM REASON`).
pub fn load(path: &Path, allowed_format: bool) -> Vec<Rule> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut words = trimmed.split_whitespace();
        let mut next = |what: &str| {
            words.next().unwrap_or_else(|| panic!("{}:{}: missing {what}", path.display(), n + 1)).to_string()
        };
        let (tag, pattern, kinds) = if allowed_format {
            let tag = next("kind (skip or allow)");
            assert!(tag == "skip" || tag == "allow", "{}:{}: kind must be skip or allow", path.display(), n + 1);
            let pattern = next("pattern");
            (tag, pattern, next("violations"))
        } else {
            let pattern = next("pattern");
            let kinds = next("violations");
            (next("issue item"), pattern, kinds)
        };
        let reason: Vec<&str> = words.collect();
        assert!(!reason.is_empty(), "{}:{}: every entry needs its reason", path.display(), n + 1);
        let parts: Vec<&str> = pattern.split('/').collect();
        assert!(parts.len() == 4, "{}:{}: pattern must be SCENARIO/SYSCALL/ERRNO/WHEN", path.display(), n + 1);
        rules.push(Rule {
            fields: [split_list(parts[0]), split_list(parts[1]), split_list(parts[2]), split_list(parts[3])],
            kinds: split_list(&kinds),
            tag,
            reason: reason.join(" "),
            line: n + 1,
            text: trimmed.to_string(),
        });
    }
    rules
}
