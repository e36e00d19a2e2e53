//! MirrorMaker 2's topic, group and topic-config filters (reference §4), with Java regular
//! expressions run by Rust engines.
//!
//! A filter list is a ConfigDef `LIST`: trimmed, split on `\s*,\s*`, an empty value is an
//! empty list. The elements are joined with `|` and compiled once; a name matches when the
//! whole name matches (Java's `matcher(name).matches()`). An empty include list matches
//! nothing; an empty exclude list excludes nothing.
//!
//! Java syntax is translated where the engines differ (`\w`, `\d`, `\s` are ASCII in Java,
//! `\Q…\E` quoting, POSIX `\p{Alpha}` classes, `\e`, `\cX`, octal escapes). The pattern runs
//! on `regex` when it compiles there and on `fancy-regex` when it needs look-around,
//! backreferences, atomic groups or possessive quantifiers; anything else is an error.

use std::fmt;

/// `topics` default.
pub const TOPICS_DEFAULT: &str = ".*";
/// `topics.exclude` default (`DefaultTopicFilter`).
pub const TOPICS_EXCLUDE_DEFAULT: &str = r".*[\-\.]internal, .*\.replica, __.*";
/// `groups` default.
pub const GROUPS_DEFAULT: &str = ".*";
/// `groups.exclude` default (`DefaultGroupFilter`).
pub const GROUPS_EXCLUDE_DEFAULT: &str = "console-consumer-.*, connect-.*, __.*";
/// `config.properties.exclude` default (`DefaultConfigPropertyFilter`).
pub const CONFIG_PROPERTIES_EXCLUDE_DEFAULT: &str = concat!(
    r"follower\.replication\.throttled\.replicas, ",
    r"leader\.replication\.throttled\.replicas, ",
    r"message\.timestamp\.difference\.max\.ms, ",
    r"message\.timestamp\.type, ",
    r"unclean\.leader\.election\.enable, ",
    r"min\.insync\.replicas"
);
/// `use.defaults.from` default.
pub const USE_DEFAULTS_FROM_DEFAULT: &str = "target";

/// Backtracking budget for `fancy-regex` patterns, per match.
const FANCY_BACKTRACK_LIMIT: usize = 1_000_000;

/// Why a filter could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The joined pattern of a list does not compile.
    #[error("invalid regular expression in `{key}`{}: {reason}", culprit.as_ref().map(|c| format!(" (element `{c}`)")).unwrap_or_default())]
    InvalidRegex {
        /// The config key the list came from (`topics`, `groups.exclude`...).
        key: String,
        /// The first element that does not compile alone, when one can be named.
        culprit: Option<String>,
        reason: String,
    },
    /// `use.defaults.from` is neither `source` nor `target`.
    #[error("`use.defaults.from` must be `source` or `target`, not `{value}`")]
    InvalidUseDefaultsFrom { value: String },
}

/// Why a Java regular expression cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    /// Java syntax strait does not translate (or that Java refuses too).
    #[error("{0}")]
    Syntax(String),
    /// Neither engine compiles the translated pattern: their reason.
    #[error("{0}")]
    Engine(String),
}

/// Parses a ConfigDef `LIST` value the way Kafka does: Java `trim()` (every character up
/// to U+0020), then split on `\s*,\s*` keeping empty elements; a blank value is empty.
pub fn java_list(value: &str) -> Vec<String> {
    let trimmed = value.trim_matches(|c: char| c <= ' ');
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed
        .split(',')
        .map(|part| part.trim_matches(is_java_space).to_string())
        .collect()
}

/// Java regex `\s`: `[ \t\n\x0B\f\r]`.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// A compiled Java regular expression that must match a whole input.
#[derive(Clone)]
pub struct JavaRegex {
    source: String,
    engine: Engine,
}

#[derive(Clone)]
enum Engine {
    Linear(regex::Regex),
    Backtracking(Box<fancy_regex::Regex>),
}

impl fmt::Debug for JavaRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let engine = match self.engine {
            Engine::Linear(_) => "regex",
            Engine::Backtracking(_) => "fancy-regex",
        };
        write!(f, "JavaRegex({:?} on {engine})", self.source)
    }
}

impl PartialEq for JavaRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for JavaRegex {}

impl JavaRegex {
    /// Compiles `pattern` (Java syntax) for whole-input matching.
    pub fn full_match(pattern: &str) -> Result<JavaRegex, RegexError> {
        let translated = translate_java_regex(pattern)?;
        let anchored = format!("^(?:{translated})$");
        // `regex` reads Java's possessive `a*+` as a nested repetition `(a*)+`, with another
        // meaning; those patterns must go to the backtracking engine.
        let linear = if has_possessive_quantifier(&translated) {
            Err(None)
        } else {
            regex::Regex::new(&anchored).map_err(Some)
        };
        match linear {
            Ok(re) => Ok(JavaRegex {
                source: pattern.to_string(),
                engine: Engine::Linear(re),
            }),
            Err(linear_err) => {
                let mut builder = fancy_regex::RegexBuilder::new(&anchored);
                builder.backtrack_limit(FANCY_BACKTRACK_LIMIT);
                match builder.build() {
                    Ok(re) => Ok(JavaRegex {
                        source: pattern.to_string(),
                        engine: Engine::Backtracking(Box::new(re)),
                    }),
                    Err(fancy_err) => Err(RegexError::Engine(describe_regex_error(
                        linear_err.as_ref(),
                        &fancy_err,
                    ))),
                }
            }
        }
    }

    /// The Java pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `s` matches. `None` when a backtracking pattern ran out of its
    /// budget, so the caller can decide which way to err.
    pub fn matches(&self, s: &str) -> Option<bool> {
        match &self.engine {
            Engine::Linear(re) => Some(re.is_match(s)),
            Engine::Backtracking(re) => re.is_match(s).ok(),
        }
    }
}

/// Whether a (translated) pattern holds a possessive quantifier (`*+`, `++`, `?+`, `}+`)
/// outside a character class.
fn has_possessive_quantifier(p: &str) -> bool {
    let chars: Vec<char> = p.chars().collect();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            // `(?+...)` does not exist, so a `?` after `(` is never a quantifier.
            '*' | '+' | '?' | '}'
                if depth == 0
                    && chars.get(i + 1) == Some(&'+')
                    && !(chars[i] == '?' && i > 0 && chars[i - 1] == '(') =>
            {
                return true;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

fn describe_regex_error(linear: Option<&regex::Error>, fancy: &fancy_regex::Error) -> String {
    // The `regex` message is a multi-line caret diagram; its last line names the problem.
    let linear_msg = linear.map(|e| e.to_string()).unwrap_or_default();
    let linear_line = linear_msg
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .trim_start_matches("error: ")
        .to_string();
    // Positions refer to the anchored, translated pattern, not to what the user wrote.
    let fancy_full = fancy.to_string();
    let fancy_msg = match fancy_full.split_once(": ") {
        Some((head, tail)) if head.starts_with("Parsing error at position") => tail.to_string(),
        _ => fancy_full,
    };
    if fancy_msg.is_empty() {
        linear_line
    } else if linear_line.is_empty() || linear_line == fancy_msg {
        fancy_msg
    } else {
        format!("{fancy_msg} ({linear_line})")
    }
}

/// Rewrites Java-only syntax into syntax both Rust engines read with Java's meaning.
pub fn translate_java_regex(p: &str) -> Result<String, RegexError> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 8);
    let mut class_depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '[' => {
                class_depth += 1;
                out.push('[');
                // A `]` right after `[` or `[^` is a literal in both engines; copy it so it
                // does not close the class in our depth count.
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(']');
            }
            '\\' => {
                let Some(&e) = chars.get(i) else {
                    return Err(RegexError::Syntax(
                        "pattern ends with a lone backslash".into(),
                    ));
                };
                i += 1;
                i += translate_escape(e, &chars[i..], class_depth > 0, &mut out)?;
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Translates the escape `\<e>` followed by `rest`, appending to `out`; returns how many
/// characters of `rest` it used. `inside` says whether it stands in a character class.
fn translate_escape(
    e: char,
    rest: &[char],
    inside: bool,
    out: &mut String,
) -> Result<usize, RegexError> {
    let mut used = 0;
    match e {
        'Q' => {
            // Quote until `\E` or the end.
            while used < rest.len() {
                if rest[used] == '\\' && rest.get(used + 1) == Some(&'E') {
                    used += 2;
                    break;
                }
                push_literal(out, rest[used]);
                used += 1;
            }
        }
        'E' => {} // A stray `\E` is ignored by Java.
        'w' => push_class(out, "0-9A-Za-z_", false, inside),
        'W' => push_class(out, "0-9A-Za-z_", true, inside),
        'd' => push_class(out, "0-9", false, inside),
        'D' => push_class(out, "0-9", true, inside),
        's' => push_class(out, r"\t\n\x0B\x0C\r ", false, inside),
        'S' => push_class(out, r"\t\n\x0B\x0C\r ", true, inside),
        'h' => push_class(out, JAVA_H, false, inside),
        'H' => push_class(out, JAVA_H, true, inside),
        'v' => push_class(out, JAVA_V, false, inside),
        'V' => push_class(out, JAVA_V, true, inside),
        'e' => out.push_str(r"\x1B"),
        'a' => out.push_str(r"\x07"),
        'c' => {
            let Some(&x) = rest.first() else {
                return Err(RegexError::Syntax("`\\c` needs a control letter".into()));
            };
            used = 1;
            out.push_str(&format!(r"\x{{{:X}}}", (x as u32) ^ 64));
        }
        '0' => used = java_octal(rest, out)?,
        'p' | 'P' => used = java_property(e, rest, inside, out)?,
        'R' => out.push_str(r"(?:\r\n|[\n\x0B\x0C\r\x{85}\x{2028}\x{2029}])"),
        'Z' => out.push_str(r"(?:\n?\z)"),
        // Java: escaped `<`/`>` are literals; `regex`: word boundaries.
        '<' | '>' => out.push(e),
        other => {
            out.push('\\');
            out.push(other);
        }
    }
    Ok(used)
}

/// Java's octal escape after `\0`: `\0n`, `\0nn`, `\0mnn` with m <= 3. Returns the digits used.
fn java_octal(rest: &[char], out: &mut String) -> Result<usize, RegexError> {
    let mut value = 0u32;
    let mut n = 0;
    while n < 3 {
        match rest.get(n).and_then(|d| d.to_digit(8)) {
            Some(d) if n < 2 || value <= 0o37 => {
                value = value * 8 + d;
                n += 1;
            }
            _ => break,
        }
    }
    if n == 0 {
        return Err(RegexError::Syntax("illegal octal escape `\\0`".into()));
    }
    out.push_str(&format!(r"\x{{{value:X}}}"));
    Ok(n)
}

/// `\p{Name}` or `\P{Name}` (`e` says which): POSIX classes spelled out, Unicode properties
/// kept, Java-only classes refused. Returns the characters of `rest` used.
fn java_property(
    e: char,
    rest: &[char],
    inside: bool,
    out: &mut String,
) -> Result<usize, RegexError> {
    let (name, used) = property_name(rest)?;
    let negated = e == 'P';
    match posix_class(&name) {
        Some(set) => push_class(out, set, negated, inside),
        None => {
            let rust_name = name.strip_prefix("Is").unwrap_or(&name);
            if name.starts_with("java") || name.starts_with("In") {
                return Err(RegexError::Syntax(format!(
                    "`\\{e}{{{name}}}` (Java-only character class) is not supported"
                )));
            }
            out.push_str(&format!("\\{e}{{{rust_name}}}"));
        }
    }
    Ok(used)
}

/// Java `\h`.
const JAVA_H: &str = r" \t\x{A0}\x{1680}\x{180e}\x{2000}-\x{200a}\x{202f}\x{205f}\x{3000}";
/// Java `\v` (Java 8+: vertical whitespace, not the vertical tab alone).
const JAVA_V: &str = r"\n\x0B\x0C\r\x{85}\x{2028}\x{2029}";

fn push_literal(out: &mut String, c: char) {
    // `regex` reads `\<` and `\>` as word boundaries, so those two stay bare.
    if c.is_ascii_alphanumeric() || !c.is_ascii() || matches!(c, ' ' | '_' | '<' | '>') {
        out.push(c);
    } else if c.is_ascii_graphic() {
        out.push('\\');
        out.push(c);
    } else {
        out.push_str(&format!(r"\x{{{:X}}}", c as u32));
    }
}

fn push_class(out: &mut String, set: &str, negated: bool, inside_class: bool) {
    match (negated, inside_class) {
        (false, true) => out.push_str(set),
        (false, false) => {
            out.push('[');
            out.push_str(set);
            out.push(']');
        }
        (true, _) => {
            out.push_str("[^");
            out.push_str(set);
            out.push(']');
        }
    }
}

/// Reads the name after `\p`: `{Name}` or a single letter.
fn property_name(rest: &[char]) -> Result<(String, usize), RegexError> {
    match rest.first() {
        Some('{') => {
            let end = rest
                .iter()
                .position(|&c| c == '}')
                .ok_or_else(|| RegexError::Syntax("unclosed `\\p{`".into()))?;
            Ok((rest[1..end].iter().collect(), end + 1))
        }
        Some(&c) => Ok((c.to_string(), 1)),
        None => Err(RegexError::Syntax("`\\p` needs a class name".into())),
    }
}

/// Java's US-ASCII POSIX classes.
fn posix_class(name: &str) -> Option<&'static str> {
    Some(match name {
        "Lower" => "a-z",
        "Upper" => "A-Z",
        "ASCII" => r"\x00-\x7F",
        "Alpha" => "a-zA-Z",
        "Digit" => "0-9",
        "Alnum" => "a-zA-Z0-9",
        "Punct" => r"!-/:-@\[-`{-~",
        "Graph" => r"!-~",
        "Print" => r" -~",
        "Blank" => r" \t",
        "Cntrl" => r"\x00-\x1F\x7F",
        "XDigit" => "0-9a-fA-F",
        "Space" => r" \t\n\x0B\x0C\r",
        _ => return None,
    })
}

/// A compiled MM2 pattern list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternList {
    /// The list elements, as configured.
    pub elements: Vec<String>,
    matcher: Option<JavaRegex>,
}

impl PatternList {
    /// Compiles the elements joined with `|`, as `MirrorUtils.compilePatternList` does.
    pub fn compile(key: &str, elements: &[String]) -> Result<PatternList, FilterError> {
        if elements.is_empty() {
            return Ok(PatternList {
                elements: Vec::new(),
                matcher: None,
            });
        }
        let joined = elements.join("|");
        match JavaRegex::full_match(&joined) {
            Ok(re) => Ok(PatternList {
                elements: elements.to_vec(),
                matcher: Some(re),
            }),
            Err(reason) => {
                let culprit = elements
                    .iter()
                    .find(|e| JavaRegex::full_match(e).is_err())
                    .cloned();
                Err(FilterError::InvalidRegex {
                    key: key.to_string(),
                    culprit,
                    reason: reason.to_string(),
                })
            }
        }
    }

    /// Compiles a raw list value (see [`java_list`]).
    pub fn parse(key: &str, value: &str) -> Result<PatternList, FilterError> {
        PatternList::compile(key, &java_list(value))
    }

    /// Whether `name` matches; an empty list matches nothing. `None` when a backtracking
    /// pattern ran out of budget.
    pub fn matches(&self, name: &str) -> Option<bool> {
        match &self.matcher {
            None => Some(false),
            Some(re) => re.matches(name),
        }
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }
}

/// Include and exclude lists: a name passes when it is included and not excluded. When a
/// pattern cannot decide (backtracking budget exhausted) the name does not pass: strait
/// would rather skip a name than replicate one the user meant to exclude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeExclude {
    pub include: PatternList,
    pub exclude: PatternList,
}

impl IncludeExclude {
    fn passes(&self, name: &str) -> bool {
        self.include.matches(name).unwrap_or(false) && !self.exclude.matches(name).unwrap_or(true)
    }
}

/// `DefaultTopicFilter`: `topics` and `topics.exclude`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicFilter(pub IncludeExclude);

impl TopicFilter {
    /// Builds the filter from list elements.
    pub fn new(include: &[String], exclude: &[String]) -> Result<TopicFilter, FilterError> {
        Ok(TopicFilter(IncludeExclude {
            include: PatternList::compile("topics", include)?,
            exclude: PatternList::compile("topics.exclude", exclude)?,
        }))
    }

    /// MM2's defaults.
    pub fn mm2_default() -> TopicFilter {
        TopicFilter::new(
            &java_list(TOPICS_DEFAULT),
            &java_list(TOPICS_EXCLUDE_DEFAULT),
        )
        .expect("the default topic patterns are valid regexes")
    }

    /// `shouldReplicateTopic`.
    pub fn should_replicate_topic(&self, topic: &str) -> bool {
        self.0.passes(topic)
    }
}

/// `DefaultGroupFilter`: `groups` and `groups.exclude`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFilter(pub IncludeExclude);

impl GroupFilter {
    /// Builds the filter from list elements.
    pub fn new(include: &[String], exclude: &[String]) -> Result<GroupFilter, FilterError> {
        Ok(GroupFilter(IncludeExclude {
            include: PatternList::compile("groups", include)?,
            exclude: PatternList::compile("groups.exclude", exclude)?,
        }))
    }

    /// MM2's defaults.
    pub fn mm2_default() -> GroupFilter {
        GroupFilter::new(
            &java_list(GROUPS_DEFAULT),
            &java_list(GROUPS_EXCLUDE_DEFAULT),
        )
        .expect("the default group patterns are valid regexes")
    }

    /// `shouldReplicateGroup`.
    pub fn should_replicate_group(&self, group: &str) -> bool {
        self.0.passes(group)
    }
}

/// Whose defaults to apply when syncing a topic config that has its default value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseDefaultsFrom {
    /// Delete the property on the target topic (the target's default applies). MM2 default.
    Target,
    /// Set the source's default value on the target topic.
    Source,
}

impl UseDefaultsFrom {
    /// Parses the value. MM2 only tests for exactly `source`; any other string means target,
    /// but strait rejects anything other than the two words.
    pub fn parse(value: &str) -> Result<UseDefaultsFrom, FilterError> {
        match value.trim_matches(|c: char| c <= ' ') {
            "source" => Ok(UseDefaultsFrom::Source),
            "target" => Ok(UseDefaultsFrom::Target),
            _ => Err(FilterError::InvalidUseDefaultsFrom {
                value: value.to_string(),
            }),
        }
    }
}

/// `DefaultConfigPropertyFilter`: `config.properties.exclude` and `use.defaults.from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPropertyFilter {
    pub exclude: PatternList,
    pub use_defaults_from: UseDefaultsFrom,
}

impl ConfigPropertyFilter {
    /// Builds the filter from list elements.
    pub fn new(
        exclude: &[String],
        use_defaults_from: UseDefaultsFrom,
    ) -> Result<Self, FilterError> {
        Ok(ConfigPropertyFilter {
            exclude: PatternList::compile("config.properties.exclude", exclude)?,
            use_defaults_from,
        })
    }

    /// MM2's defaults.
    pub fn mm2_default() -> ConfigPropertyFilter {
        ConfigPropertyFilter::new(
            &java_list(CONFIG_PROPERTIES_EXCLUDE_DEFAULT),
            UseDefaultsFrom::Target,
        )
        .expect("the default config property patterns are valid regexes")
    }

    /// `shouldReplicateConfigProperty`: not excluded.
    pub fn should_replicate_config_property(&self, property: &str) -> bool {
        !self.exclude.matches(property).unwrap_or(true)
    }

    /// `shouldReplicateSourceDefault`: only with `use.defaults.from=source`.
    pub fn should_replicate_source_default(&self, _property: &str) -> bool {
        self.use_defaults_from == UseDefaultsFrom::Source
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn list_parsing_like_configdef() {
        assert_eq!(java_list(""), Vec::<String>::new());
        assert_eq!(java_list("   "), Vec::<String>::new());
        assert_eq!(java_list("a"), list(&["a"]));
        assert_eq!(java_list(" a , b,c ,  d "), list(&["a", "b", "c", "d"]));
        assert_eq!(java_list("a,,b"), list(&["a", "", "b"]));
        assert_eq!(java_list("a,"), list(&["a", ""]));
        assert_eq!(java_list("a\t,\nb"), list(&["a", "b"]));
        assert_eq!(
            java_list("foobar-topic, quux-.*"),
            list(&["foobar-topic", "quux-.*"])
        );
    }

    #[test]
    fn default_topic_filter() {
        let f = TopicFilter::mm2_default();
        for t in ["orders", "A.orders", "internal-data", "replicas"] {
            assert!(f.should_replicate_topic(t), "{t}");
        }
        for t in [
            "mm2-offsets.A.internal",
            "connect-configs-internal",
            "orders.replica",
            "__consumer_offsets",
            "mm2-offset-syncs.B.internal",
        ] {
            assert!(!f.should_replicate_topic(t), "{t}");
        }
    }

    #[test]
    fn default_group_filter() {
        let f = GroupFilter::mm2_default();
        assert!(f.should_replicate_group("orders-app"));
        assert!(!f.should_replicate_group("console-consumer-4711"));
        assert!(!f.should_replicate_group("connect-mm2"));
        assert!(!f.should_replicate_group("__strait"));
    }

    #[test]
    fn default_config_property_filter() {
        let f = ConfigPropertyFilter::mm2_default();
        for p in [
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "message.timestamp.difference.max.ms",
            "message.timestamp.type",
            "unclean.leader.election.enable",
            "min.insync.replicas",
        ] {
            assert!(!f.should_replicate_config_property(p), "{p}");
        }
        assert!(f.should_replicate_config_property("retention.ms"));
        assert!(f.should_replicate_config_property("cleanup.policy"));
        // Escaped dots: a different character in their place does not match.
        assert!(f.should_replicate_config_property("min_insync_replicas"));
        assert!(!f.should_replicate_source_default("retention.ms"));
        let src = ConfigPropertyFilter::new(&[], UseDefaultsFrom::Source).expect("valid");
        assert!(src.should_replicate_source_default("retention.ms"));
        assert!(src.should_replicate_config_property("min.insync.replicas"));
    }

    #[test]
    fn empty_lists() {
        let f = TopicFilter::new(&[], &[]).expect("valid");
        assert!(!f.should_replicate_topic("anything"));
        let f = TopicFilter::new(&list(&[".*"]), &[]).expect("valid");
        assert!(f.should_replicate_topic("__consumer_offsets"));
    }

    #[test]
    fn full_match_not_find() {
        let f = TopicFilter::new(&list(&["foo"]), &[]).expect("valid");
        assert!(f.should_replicate_topic("foo"));
        assert!(!f.should_replicate_topic("foobar"));
        assert!(!f.should_replicate_topic("xfoo"));
        // Joining with `|` and anchoring the whole alternation.
        let f = TopicFilter::new(&list(&["a", "b.*"]), &list(&["bad"])).expect("valid");
        assert!(f.should_replicate_topic("a"));
        assert!(f.should_replicate_topic("bob"));
        assert!(!f.should_replicate_topic("bad"));
        assert!(!f.should_replicate_topic("ab"));
    }

    #[test]
    fn java_only_syntax() {
        let cases: &[(&str, &str, bool)] = &[
            (r"\w+", "abc_1", true),
            // Java's \w is ASCII-only.
            (r"\w+", "café", false),
            (r"[\w-]+", "a-b_c", true),
            (r"[^\W]+", "abc", true),
            (r"\d{3}", "123", true),
            (r"\d", "٣", false),
            (r"\Qa.b\E", "a.b", true),
            (r"\Qa.b\E", "axb", false),
            (r"x\Q*", "x*", true),
            (r"\p{Alpha}+", "abc", true),
            (r"\p{Alpha}+", "é", false),
            (r"\P{Digit}+", "abc", true),
            (r"[\p{Lower}0-9]+", "a1", true),
            (r"\p{IsLatin}+", "é", true),
            (r"\p{Lu}", "A", true),
            (r"a\sb", "a b", true),
            (r"\0101", "A", true),
            (r"\cA", "\u{1}", true),
            (r"\e", "\u{1b}", true),
            (r"a\<b\>", "a<b>", true),
            // Look-around and backreferences go to fancy-regex.
            (r"(?!internal).*", "orders", true),
            (r"(?!internal).*", "internal", false),
            (r"(?!internal$).*", "internals", true),
            (r"(a)\1", "aa", true),
            (r"(?<=a)b|ab", "ab", true),
            (r"(?>a|ab)c", "ac", true),
            (r"a*+a", "aaa", false),
            // Inline flags stay scoped like in Java.
            (r"(?i)foo", "FOO", true),
            (r"[]a]+", "]a", true),
        ];
        for (pattern, input, want) in cases {
            let re = JavaRegex::full_match(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(re.matches(input), Some(*want), "{pattern} vs {input:?}");
        }
    }

    #[test]
    fn invalid_patterns_are_errors_naming_the_element() {
        let err = TopicFilter::new(&list(&["ok.*", "bad[", "fine"]), &[]).expect_err("invalid");
        match err {
            FilterError::InvalidRegex { key, culprit, .. } => {
                assert_eq!(key, "topics");
                assert_eq!(culprit.as_deref(), Some("bad["));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(JavaRegex::full_match(r"\p{javaLowerCase}").is_err());
        assert!(JavaRegex::full_match(r"\p{InGreek}").is_err());
        assert!(JavaRegex::full_match("a\\").is_err());
        assert!(JavaRegex::full_match("(").is_err());
        // Java accepts a group split across two elements; so do we.
        assert!(TopicFilter::new(&list(&["(a", "b)"]), &[]).is_ok());
    }

    #[test]
    fn use_defaults_from_values() {
        assert_eq!(
            UseDefaultsFrom::parse("source"),
            Ok(UseDefaultsFrom::Source)
        );
        assert_eq!(
            UseDefaultsFrom::parse(" target "),
            Ok(UseDefaultsFrom::Target)
        );
        assert!(UseDefaultsFrom::parse("Source").is_err());
    }

    proptest! {
        #[test]
        fn literal_lists_match_exactly_their_names(
            names in proptest::collection::btree_set("[a-zA-Z0-9_-]{1,12}", 1..6),
            probe in "[a-zA-Z0-9_-]{1,12}",
        ) {
            let elements: Vec<String> = names.iter().cloned().collect();
            let value = elements.join(" , ");
            let pl = PatternList::parse("topics", &value).expect("literals compile");
            prop_assert_eq!(pl.matches(&probe), Some(names.contains(&probe)));
        }

        #[test]
        fn quoted_literals_match_themselves(s in "\\PC{0,20}") {
            prop_assume!(!s.contains("\\E"));
            let re = JavaRegex::full_match(&format!("\\Q{s}\\E")).expect("quoted literal compiles");
            prop_assert_eq!(re.matches(&s), Some(true));
        }

        #[test]
        fn translation_never_panics(s in "\\PC{0,30}") {
            let _ = JavaRegex::full_match(&s);
        }

        #[test]
        fn list_round_trips_through_join(elements in proptest::collection::vec("[a-z.*]{1,8}", 1..5)) {
            prop_assert_eq!(java_list(&elements.join(", ")), elements);
        }
    }
}
