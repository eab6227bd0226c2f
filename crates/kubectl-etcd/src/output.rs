//! What a command prints: an aligned table (kubectl's columns: upper-case headers, three spaces
//! between columns) or lines of text, and the same facts as JSON or YAML for `-o`.

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Format {
    /// Aligned columns (the default).
    #[default]
    Table,
    Json,
    Yaml,
}

/// The result of one command.
#[derive(Debug, Default)]
pub struct Printed {
    /// Everything `-o json|yaml` prints.
    pub value: Value,
    /// The table the default output shows, if any.
    pub table: Option<Table>,
    /// Lines printed after the table (or alone).
    pub lines: Vec<String>,
    /// The exit code (0 unless the command reports a degraded state).
    pub code: i32,
}

#[derive(Debug, Default, Clone)]
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Self {
        Self {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as kubectl prints it: every column as wide as its widest cell, three spaces
    /// apart, no trailing spaces.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                text.push_str(cell);
                if i + 1 < cells.len() {
                    let pad = widths[i] - cell.chars().count() + 3;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(self.headers.clone(), &mut out);
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect(), &mut out);
        }
        out
    }
}

impl Printed {
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let mut text = serde_json::to_string_pretty(&self.value).unwrap_or_default();
                text.push('\n');
                text
            }
            Format::Yaml => serde_yaml::to_string(&self.value).unwrap_or_default(),
            Format::Table => {
                let mut text = self.table.as_ref().map(Table::render).unwrap_or_default();
                for line in &self.lines {
                    text.push_str(line);
                    text.push('\n');
                }
                text
            }
        }
    }
}

/// Bytes as etcdctl prints them (`25 kB`, `2.1 MB`: powers of 1000).
pub fn bytes(n: i64) -> String {
    let n = n.max(0) as f64;
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{} B", n as i64)
    } else if value < 10.0 {
        format!("{value:.1} {}", units[unit])
    } else {
        format!("{value:.0} {}", units[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let mut table = Table::new(&["NAME", "ID", "LEADER"]);
        table.push(vec![
            "main-0".into(),
            "8e9e05c52164694d".into(),
            "true".into(),
        ]);
        table.push(vec!["m-1".into(), "1".into(), "false".into()]);
        assert_eq!(
            table.render(),
            "NAME     ID                 LEADER\nmain-0   8e9e05c52164694d   true\nm-1      1                  false\n"
        );
    }

    #[test]
    fn sizes_read_like_etcdctl() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(20480), "20 kB");
        assert_eq!(bytes(2_147_483_648), "2.1 GB");
    }
}
