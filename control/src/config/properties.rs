//! A Java `.properties` reader that follows `java.util.Properties.load` rule for rule, and
//! remembers where every key came from.
//!
//! The rules (from the `Properties.load(Reader)` contract and its `LineReader`):
//! - natural lines end in `\n`, `\r` or `\r\n`; a natural line ending in an odd number of
//!   backslashes continues on the next one, whose leading spaces, tabs and form feeds are
//!   dropped;
//! - blank lines and lines whose first non-blank character is `#` or `!` are ignored; a
//!   comment never continues, and `#` in the middle of a value is part of the value;
//! - the key ends at the first unescaped `=`, `:`, space, tab or form feed; blanks around the
//!   separator are skipped, and one `=` or `:` after blank separators is skipped too;
//! - escapes: `\t \n \r \f`, `\uXXXX`, and `\x` for any other `x` means `x` itself;
//! - a duplicate key replaces the earlier value (we also report it).
//!
//! MirrorMaker reads its file through `Properties.load(InputStream)`, i.e. as ISO-8859-1.
//! strait decodes UTF-8 and falls back to ISO-8859-1 when the bytes are not valid UTF-8; the
//! result says which, so the caller can warn when the two readings would differ.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One effective `key=value` of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key with escapes decoded.
    pub key: String,
    /// The value with escapes decoded and continuations joined.
    pub value: String,
    /// 1-based natural line on which the key starts.
    pub line: u32,
}

/// A key given more than once: the later line wins, as in Java.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// The key.
    pub key: String,
    /// Line of the overridden occurrence.
    pub earlier_line: u32,
    /// Line of the occurrence that wins.
    pub later_line: u32,
}

/// A line Java would reject (`Properties.load` throws on it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    /// 1-based line where the logical line starts.
    pub line: u32,
    /// What Java would reject.
    pub message: String,
}

/// How the bytes were decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Valid UTF-8 (plain ASCII included).
    Utf8,
    /// Not valid UTF-8: every byte read as the character of the same number.
    Latin1,
}

/// The parsed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Properties {
    /// Effective entries (the last occurrence of each key), ordered by line.
    pub entries: Vec<Entry>,
    /// Every overridden occurrence.
    pub duplicates: Vec<Duplicate>,
    /// Lines Java would reject; they are skipped, the rest of the file is still read.
    pub errors: Vec<SyntaxError>,
    /// How the bytes were decoded.
    pub encoding: Encoding,
    /// The file started with a UTF-8 byte order mark (stripped; Java would keep it as part of
    /// the first key).
    pub had_bom: bool,
    /// First line holding a character outside ASCII, where MirrorMaker's ISO-8859-1 reading
    /// differs from a UTF-8 reading.
    pub first_non_ascii_line: Option<u32>,
    /// More logical lines than the limit given to [`parse_bytes_bounded`]: the rest of the
    /// file was not read.
    pub truncated: bool,
}

impl Properties {
    /// The effective entries as a map from key to entry.
    pub fn map(&self) -> BTreeMap<&str, &Entry> {
        self.entries.iter().map(|e| (e.key.as_str(), e)).collect()
    }

    /// The effective value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    }
}

/// Decodes file bytes: UTF-8 when valid, ISO-8859-1 otherwise. A leading UTF-8 byte order mark
/// is removed; the flag says whether there was one.
pub fn decode(bytes: &[u8]) -> (String, Encoding, bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) => match s.strip_prefix('\u{feff}') {
            Some(rest) => (rest.to_string(), Encoding::Utf8, true),
            None => (s.to_string(), Encoding::Utf8, false),
        },
        // ISO-8859-1 maps byte n to U+00nn, so this cannot fail.
        Err(_) => (
            bytes.iter().map(|&b| char::from(b)).collect(),
            Encoding::Latin1,
            false,
        ),
    }
}

/// Parses raw file bytes (see [`decode`]).
pub fn parse_bytes(bytes: &[u8]) -> Properties {
    parse_bytes_bounded(bytes, usize::MAX)
}

/// Parses raw file bytes, reading at most `max_entries` logical lines.
pub fn parse_bytes_bounded(bytes: &[u8], max_entries: usize) -> Properties {
    let (text, encoding, had_bom) = decode(bytes);
    let mut props = parse_str_bounded(&text, max_entries);
    props.encoding = encoding;
    props.had_bom = had_bom;
    props
}

/// Parses already decoded text.
pub fn parse_str(text: &str) -> Properties {
    parse_str_bounded(text, usize::MAX)
}

fn parse_str_bounded(text: &str, max_entries: usize) -> Properties {
    let chars: Vec<char> = text.chars().collect();
    let mut all: Vec<Entry> = Vec::new();
    let mut errors = Vec::new();
    let mut truncated = false;
    for (n, logical) in LineReader::new(&chars).enumerate() {
        if n >= max_entries {
            truncated = true;
            break;
        }
        match split_line(&logical.chars) {
            Ok((key, value)) => all.push(Entry {
                key,
                value,
                line: logical.line,
            }),
            Err(e) => errors.push(SyntaxError {
                line: logical.line,
                message: e.to_string(),
            }),
        }
    }
    let first_non_ascii_line = first_non_ascii_line(&chars);

    let mut last: BTreeMap<String, usize> = BTreeMap::new();
    let mut duplicates = Vec::new();
    for (i, e) in all.iter().enumerate() {
        if let Some(prev) = last.insert(e.key.clone(), i) {
            duplicates.push(Duplicate {
                key: e.key.clone(),
                earlier_line: all[prev].line,
                later_line: e.line,
            });
        }
    }
    let mut keep: Vec<usize> = last.into_values().collect();
    keep.sort_unstable();
    let entries = keep.into_iter().map(|i| all[i].clone()).collect();
    Properties {
        entries,
        duplicates,
        errors,
        encoding: Encoding::Utf8,
        had_bom: false,
        first_non_ascii_line,
        truncated,
    }
}

fn first_non_ascii_line(chars: &[char]) -> Option<u32> {
    let mut line = 1u32;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !c.is_ascii() {
            return Some(line);
        }
        if c == '\n' || (c == '\r' && chars.get(i + 1) != Some(&'\n')) {
            line = line.saturating_add(1);
        }
        i += 1;
    }
    None
}

/// One logical line: the characters (continuations joined, the escaping backslash of the
/// line end removed) and the natural line where it starts.
struct LogicalLine {
    chars: Vec<char>,
    line: u32,
}

/// Splits text into logical lines exactly like Java's `Properties.LineReader`.
struct LineReader<'a> {
    chars: &'a [char],
    pos: usize,
    /// Natural line number of `chars[pos]`.
    line: u32,
}

impl<'a> LineReader<'a> {
    fn new(chars: &'a [char]) -> Self {
        LineReader {
            chars,
            pos: 0,
            line: 1,
        }
    }

    /// Takes the next character, with the natural line it sits on.
    fn bump(&mut self) -> Option<(char, u32)> {
        let c = *self.chars.get(self.pos)?;
        let line = self.line;
        self.pos += 1;
        // `\r\n` is one line end: the `\r` of a pair does not count.
        if c == '\n' || (c == '\r' && self.chars.get(self.pos) != Some(&'\n')) {
            self.line = self.line.saturating_add(1);
        }
        Some((c, line))
    }
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\u{c}'
}

impl Iterator for LineReader<'_> {
    type Item = LogicalLine;

    fn next(&mut self) -> Option<LogicalLine> {
        let mut buf: Vec<char> = Vec::new();
        let mut start = 0u32;
        let mut skip_white = true;
        let mut appended_line_begin = false;
        let mut preceding_backslash = false;
        let mut skip_lf = false;
        loop {
            let Some((c, line)) = self.bump() else {
                if buf.is_empty() {
                    return None;
                }
                if preceding_backslash {
                    buf.pop();
                }
                return Some(LogicalLine {
                    chars: buf,
                    line: start,
                });
            };
            if skip_lf {
                skip_lf = false;
                if c == '\n' {
                    continue;
                }
            }
            if skip_white {
                if is_blank(c) {
                    continue;
                }
                if !appended_line_begin && (c == '\r' || c == '\n') {
                    continue;
                }
                skip_white = false;
                appended_line_begin = false;
            }
            if buf.is_empty() && (c == '#' || c == '!') {
                // A comment runs to the end of its natural line and never continues.
                while let Some((c2, _)) = self.bump() {
                    if c2 == '\n' || c2 == '\r' {
                        break;
                    }
                }
                skip_white = true;
                continue;
            }
            if c != '\n' && c != '\r' {
                if buf.is_empty() {
                    start = line;
                }
                buf.push(c);
                preceding_backslash = c == '\\' && !preceding_backslash;
                continue;
            }
            // End of a natural line.
            if buf.is_empty() {
                skip_white = true;
                continue;
            }
            if self.pos >= self.chars.len() {
                if preceding_backslash {
                    buf.pop();
                }
                return Some(LogicalLine {
                    chars: buf,
                    line: start,
                });
            }
            if preceding_backslash {
                // The backslash joins this natural line to the next one.
                buf.pop();
                skip_white = true;
                appended_line_begin = true;
                preceding_backslash = false;
                if c == '\r' {
                    skip_lf = true;
                }
            } else {
                return Some(LogicalLine {
                    chars: buf,
                    line: start,
                });
            }
        }
    }
}

/// A `\uXXXX` escape Java's `Properties.load` refuses (it throws `IllegalArgumentException`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum EscapeError {
    #[error("malformed \\uxxxx encoding (fewer than 4 hex digits)")]
    Short,
    #[error("malformed \\uxxxx encoding (not a hex digit)")]
    NotHex,
    #[error("\\u{0:04X} is a lone UTF-16 surrogate, not a character")]
    LoneSurrogate(u32),
    #[error("invalid \\u surrogate pair")]
    BadPair,
}

/// Splits a logical line into its decoded key and value (`Properties.load0`).
fn split_line(line: &[char]) -> Result<(String, String), EscapeError> {
    let limit = line.len();
    let mut key_len = 0;
    let mut value_start = limit;
    let mut has_sep = false;
    let mut preceding_backslash = false;
    while key_len < limit {
        let c = line[key_len];
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_sep = true;
            break;
        } else if is_blank(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while value_start < limit {
        let c = line[value_start];
        if !is_blank(c) {
            if !has_sep && (c == '=' || c == ':') {
                has_sep = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    let key = unescape(&line[..key_len])?;
    let value = unescape(&line[value_start.min(limit)..])?;
    Ok((key, value))
}

/// Decodes `\t \n \r \f \uXXXX` and `\x` → `x`, as `Properties.loadConvert` does. Surrogate
/// pairs written as two `\u` escapes are joined; a lone surrogate is an error because it is
/// not a character.
fn unescape(chars: &[char]) -> Result<String, EscapeError> {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = chars.get(i) else {
            // Only reachable through an even/odd mix Java never produces; drop it.
            break;
        };
        i += 1;
        match e {
            'u' => {
                let unit = hex4(chars, i)?;
                i += 4;
                if (0xD800..0xDC00).contains(&unit) {
                    // High surrogate: a low one must follow as another `\u` escape.
                    let low = if chars.get(i) == Some(&'\\') && chars.get(i + 1) == Some(&'u') {
                        hex4(chars, i + 2).ok()
                    } else {
                        None
                    };
                    match low {
                        Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                            i += 6;
                            let cp = 0x10000 + ((unit - 0xD800) << 10) + (lo - 0xDC00);
                            match char::from_u32(cp) {
                                Some(ch) => out.push(ch),
                                None => return Err(EscapeError::BadPair),
                            }
                        }
                        _ => {
                            return Err(EscapeError::LoneSurrogate(unit));
                        }
                    }
                } else {
                    match char::from_u32(unit) {
                        Some(ch) => out.push(ch),
                        None => {
                            return Err(EscapeError::LoneSurrogate(unit));
                        }
                    }
                }
            }
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'n' => out.push('\n'),
            'f' => out.push('\u{c}'),
            other => out.push(other),
        }
    }
    Ok(out)
}

fn hex4(chars: &[char], at: usize) -> Result<u32, EscapeError> {
    let digits = chars.get(at..at + 4).ok_or(EscapeError::Short)?;
    let mut v = 0u32;
    for d in digits {
        let n = d
            .to_digit(16)
            .filter(|_| d.is_ascii())
            .ok_or(EscapeError::NotHex)?;
        v = (v << 4) | n;
    }
    Ok(v)
}

/// Writes a key so that [`parse_str`] reads it back unchanged (`Properties.store` rules).
pub fn escape_key(key: &str) -> String {
    escape(key, true)
}

/// Writes a value so that [`parse_str`] reads it back unchanged (`Properties.store` rules).
pub fn escape_value(value: &str) -> String {
    escape(value, false)
}

fn escape(s: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if i == 0 || is_key => out.push_str("\\ "),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{u:04X}");
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(text: &str) -> Vec<(String, String, u32)> {
        let p = parse_str(text);
        assert!(p.errors.is_empty(), "unexpected errors {:?}", p.errors);
        p.entries
            .into_iter()
            .map(|e| (e.key, e.value, e.line))
            .collect()
    }

    fn kv(text: &str) -> Vec<(String, String)> {
        pairs(text).into_iter().map(|(k, v, _)| (k, v)).collect()
    }

    fn one(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.to_string(), v.to_string())]
    }

    #[test]
    fn javadoc_separator_examples() {
        // The three forms from the Properties.load Javadoc.
        assert_eq!(kv("Truth = Beauty\n"), one("Truth", "Beauty"));
        assert_eq!(kv("  Truth:Beauty\n"), one("Truth", "Beauty"));
        assert_eq!(
            kv("Truth                    :Beauty"),
            one("Truth", "Beauty")
        );
        assert_eq!(kv("Truth Beauty"), one("Truth", "Beauty"));
        assert_eq!(kv("Truth\t=\tBeauty"), one("Truth", "Beauty"));
        assert_eq!(kv("cheeses\n"), one("cheeses", ""));
        assert_eq!(kv("cheeses="), one("cheeses", ""));
    }

    #[test]
    fn javadoc_continuation_example() {
        let text = "fruits                           apple, banana, pear, \\\n                                  cantaloupe, watermelon, \\\n                                  kiwi, mango\n";
        assert_eq!(
            pairs(text),
            vec![(
                "fruits".to_string(),
                "apple, banana, pear, cantaloupe, watermelon, kiwi, mango".to_string(),
                1
            )]
        );
    }

    #[test]
    fn only_one_separator_char_is_eaten() {
        assert_eq!(kv("a = = b"), one("a", "= b"));
        assert_eq!(kv("a :: b"), one("a", ": b"));
        assert_eq!(kv("a b = c"), one("a", "b = c"));
        assert_eq!(kv("a  =b"), one("a", "b"));
        // Trailing blanks of the value are kept.
        assert_eq!(kv("a = b  "), one("a", "b  "));
    }

    #[test]
    fn escaped_separators_in_keys() {
        assert_eq!(kv("a\\=b = c"), one("a=b", "c"));
        assert_eq!(kv("a\\:b:c"), one("a:b", "c"));
        assert_eq!(kv("a\\ b c"), one("a b", "c"));
        assert_eq!(kv("\\#notacomment = x"), one("#notacomment", "x"));
        assert_eq!(kv("key\\\\=v"), one("key\\", "v"));
    }

    #[test]
    fn escapes_in_values() {
        assert_eq!(kv("k=a\\tb\\nc\\rd\\fe"), one("k", "a\tb\nc\rd\u{c}e"));
        assert_eq!(kv("k=\\u0041\\u00e9\\u002E"), one("k", "Aé."));
        assert_eq!(kv("k=\\q\\\"x\\\""), one("k", "q\"x\""));
        assert_eq!(kv("k=c:\\\\dir"), one("k", "c:\\dir"));
        assert_eq!(kv("k=\\uD83D\\uDE00"), one("k", "😀"));
        // A value that starts with an escaped blank keeps it.
        assert_eq!(kv("k=\\  x"), one("k", "  x"));
    }

    #[test]
    fn malformed_unicode_is_an_error_with_line() {
        let p = parse_str("a=1\nb=\\u12G4\nc=3\nd=\\u12");
        assert_eq!(p.errors.len(), 2);
        assert_eq!(p.errors[0].line, 2);
        assert_eq!(p.errors[1].line, 4);
        assert_eq!(p.entries.len(), 2);
        let lone = parse_str("x=\\uD800z");
        assert_eq!(lone.errors.len(), 1);
    }

    #[test]
    fn comments_and_blank_lines() {
        let text =
            "# comment\n! other comment\n   # indented comment\n\n \t \na=1 # not a comment\n";
        assert_eq!(
            pairs(text),
            vec![("a".into(), "1 # not a comment".into(), 6)]
        );
        // A comment line ending in a backslash does not continue.
        assert_eq!(kv("# c \\\nb=2"), one("b", "2"));
    }

    #[test]
    fn continuation_details() {
        // Odd number of backslashes continues, even does not.
        assert_eq!(
            kv("a=x\\\\\nb=y"),
            vec![("a".into(), "x\\".into()), ("b".into(), "y".into())]
        );
        assert_eq!(kv("a=x\\\\\\\n  y"), one("a", "x\\y"));
        // A continued line may look like a comment: it is still data.
        assert_eq!(kv("a=x\\\n  # y"), one("a", "x# y"));
        // A blank line after a continuation ends the logical line.
        assert_eq!(
            kv("a=x\\\n\nb=y"),
            vec![("a".into(), "x".into()), ("b".into(), "y".into())]
        );
        // A backslash at the end of the file is dropped.
        assert_eq!(kv("a=x\\"), one("a", "x"));
        // CRLF and lone CR line ends.
        assert_eq!(
            pairs("a=1\r\nb=2\rc=3\\\r\n   4\r\nd=5"),
            vec![
                ("a".into(), "1".into(), 1),
                ("b".into(), "2".into(), 2),
                ("c".into(), "34".into(), 3),
                ("d".into(), "5".into(), 5)
            ]
        );
        // The key itself can span lines.
        assert_eq!(kv("ab\\\n   cd=1"), one("abcd", "1"));
    }

    #[test]
    fn line_numbers_are_where_the_key_starts() {
        let text =
            "\n\n# c\n  clusters = A, B\nA.bootstrap.servers = a:1,\\\n   a:2\nA->B.enabled=true\n";
        let got = pairs(text);
        assert_eq!(
            got,
            vec![
                ("clusters".into(), "A, B".into(), 4),
                ("A.bootstrap.servers".into(), "a:1,a:2".into(), 5),
                ("A->B.enabled".into(), "true".into(), 7)
            ]
        );
    }

    #[test]
    fn duplicates_last_wins_and_are_reported() {
        let p = parse_str("a=1\nb=2\na=3\na=4\n");
        assert_eq!(p.get("a"), Some("4"));
        assert_eq!(
            p.duplicates,
            vec![
                Duplicate {
                    key: "a".into(),
                    earlier_line: 1,
                    later_line: 3
                },
                Duplicate {
                    key: "a".into(),
                    earlier_line: 3,
                    later_line: 4
                },
            ]
        );
        assert_eq!(
            p.entries.iter().map(|e| e.line).collect::<Vec<_>>(),
            vec![2, 4]
        );
    }

    #[test]
    fn decoding_utf8_then_latin1() {
        let p = parse_bytes("k=caf\u{e9}\n".as_bytes());
        assert_eq!(p.encoding, Encoding::Utf8);
        assert_eq!(p.get("k"), Some("café"));
        assert_eq!(p.first_non_ascii_line, Some(1));
        let p = parse_bytes(b"x=1\nk=caf\xe9\n");
        assert_eq!(p.encoding, Encoding::Latin1);
        assert_eq!(p.get("k"), Some("café"));
        assert_eq!(p.first_non_ascii_line, Some(2));
        let p = parse_bytes(b"\xef\xbb\xbfclusters=A");
        assert!(p.had_bom);
        assert_eq!(p.get("clusters"), Some("A"));
        let p = parse_bytes(b"a=1");
        assert_eq!(p.first_non_ascii_line, None);
    }

    #[test]
    fn bounded_parsing_stops() {
        let p = parse_bytes_bounded(b"a=1\nb=2\nc=3\n", 2);
        assert!(p.truncated);
        assert_eq!(p.entries.len(), 2);
        assert!(!parse_bytes_bounded(b"a=1\nb=2\n", 2).truncated);
    }

    #[test]
    fn escape_matches_store_examples() {
        assert_eq!(escape_key("a b=c:d"), "a\\ b\\=c\\:d");
        assert_eq!(escape_value(" lead"), "\\ lead");
        assert_eq!(escape_value("é\n"), "\\u00E9\\n");
        assert_eq!(escape_value("😀"), "\\uD83D\\uDE00");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_str(&s);
        }

        #[test]
        fn never_panics_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_bytes(&b);
        }

        #[test]
        fn never_panics_on_properties_alphabet(s in "[ a=:\\\\\\n\\r\\t#!uD0-9]{0,64}") {
            let _ = parse_str(&s);
        }

        #[test]
        fn store_then_load_round_trips(
            map in proptest::collection::btree_map(".{1,12}", ".{0,16}", 0..8)
        ) {
            let mut text = String::from("# generated\n");
            for (k, v) in &map {
                text.push_str(&escape_key(k));
                text.push('=');
                text.push_str(&escape_value(v));
                text.push('\n');
            }
            let p = parse_str(&text);
            prop_assert!(p.errors.is_empty());
            let got: BTreeMap<String, String> =
                p.entries.into_iter().map(|e| (e.key, e.value)).collect();
            prop_assert_eq!(got, map);
        }

        #[test]
        fn continuation_anywhere_is_transparent(
            value in "[a-zA-Z0-9,.:;=\"-]{0,40}",
            cut in 0usize..41,
            indent in "[ \\t]{0,6}",
        ) {
            // Break the escaped value at a character boundary that is not inside an escape.
            let escaped = escape_value(&value);
            let cut = cut.min(escaped.len());
            let safe = !escaped[..cut].ends_with('\\')
                || escaped[..cut].chars().rev().take_while(|&c| c == '\\').count() % 2 == 0;
            prop_assume!(safe);
            // Leading blanks on the continued line are dropped, so a value part that starts
            // with a blank cannot be split there.
            prop_assume!(!escaped[cut..].starts_with([' ', '\t']));
            let text = format!("k={}\\\n{}{}\n", &escaped[..cut], indent, &escaped[cut..]);
            let p = parse_str(&text);
            prop_assert!(p.errors.is_empty());
            prop_assert_eq!(p.get("k"), Some(value.as_str()));
        }
    }
}
