//! Container output in the CRI log format (`<RFC 3339 time> <stream> <P|F> <text>`), one file
//! per run, and reading it back with the options of `pods/log`.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use tokio::io::AsyncReadExt;
use tokio_stream::wrappers::ReceiverStream;

/// Longer lines are split into partial (`P`) records, as container runtimes do.
const MAX_RECORD: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// Writes one run's output, keeping an unfinished line per stream until its end arrives.
///
/// The file is opened for each piece of output (in append mode) and closed after, not held:
/// the runtime runs every Pod of a node, and of all the nodes, in one process, and a kept log
/// descriptor per container counted against the process's open-file limit (docs/testing.md,
/// "Thousands of Pods"). Containers write little; an open per read of their pipes is cheap.
pub(crate) struct LogWriter {
    path: PathBuf,
    pending: [Vec<u8>; 2],
    /// Records made of the current piece of output, written together.
    out: Vec<u8>,
}

impl LogWriter {
    pub(crate) fn create(path: &Path) -> io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        File::create(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            pending: [Vec::new(), Vec::new()],
            out: Vec::new(),
        })
    }

    pub(crate) fn write(&mut self, stream: Stream, mut data: &[u8]) -> io::Result<()> {
        let index = stream as usize;
        while let Some(newline) = data.iter().position(|byte| *byte == b'\n') {
            let mut line = std::mem::take(&mut self.pending[index]);
            line.extend_from_slice(&data[..newline]);
            self.record(stream, &line, true);
            data = &data[newline + 1..];
        }
        self.pending[index].extend_from_slice(data);
        while self.pending[index].len() >= MAX_RECORD {
            let chunk: Vec<u8> = self.pending[index].drain(..MAX_RECORD).collect();
            self.record(stream, &chunk, false);
        }
        self.flush()
    }

    /// The stream ended: an unfinished last line is written as complete.
    pub(crate) fn finish(&mut self, stream: Stream) -> io::Result<()> {
        let line = std::mem::take(&mut self.pending[stream as usize]);
        if !line.is_empty() {
            self.record(stream, &line, true);
        }
        self.flush()
    }

    fn record(&mut self, stream: Stream, text: &[u8], complete: bool) {
        self.out.extend_from_slice(
            format!(
                "{} {} {} ",
                Timestamp::now(),
                stream.name(),
                if complete { 'F' } else { 'P' }
            )
            .as_bytes(),
        );
        self.out.extend_from_slice(text);
        self.out.push(b'\n');
    }

    /// Appends the records made since the last flush to the file.
    fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)?
            .write_all(&out)
    }
}

/// The options of `GET pods/{name}/log` that concern the content.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// `previous`: the run before the current one.
    pub previous: bool,
    pub tail_lines: Option<usize>,
    pub timestamps: bool,
    pub since_time: Option<Timestamp>,
    pub limit_bytes: Option<usize>,
}

struct Record<'a> {
    time: &'a str,
    timestamp: Option<Timestamp>,
    complete: bool,
    text: &'a [u8],
}

fn parse(log: &[u8]) -> Vec<Record<'_>> {
    log.split(|byte| *byte == b'\n')
        .filter_map(|line| {
            let mut fields = line.splitn(4, |byte| *byte == b' ');
            let time = std::str::from_utf8(fields.next()?).ok()?;
            let _stream = fields.next()?;
            let tag = fields.next()?;
            let text = fields.next().unwrap_or_default();
            Some(Record {
                time,
                timestamp: time.parse().ok(),
                complete: tag != b"P",
                text,
            })
        })
        .collect()
}

/// The log as `kubectl logs` shows it: the text of each line, optionally prefixed with its
/// time, restricted by `since_time`, `tail_lines` and `limit_bytes`.
pub fn render(log: &[u8], options: &LogOptions) -> Vec<u8> {
    let mut records = parse(log);
    if let Some(since) = options.since_time {
        records.retain(|record| record.timestamp.is_none_or(|time| time >= since));
    }
    if let Some(tail) = options.tail_lines {
        let mut complete_seen = 0;
        let mut start = records.len();
        while start > 0 {
            if records[start - 1].complete {
                if complete_seen == tail {
                    break;
                }
                complete_seen += 1;
            }
            start -= 1;
        }
        records.drain(..start);
    }
    let mut output = Vec::new();
    let mut line_start = true;
    for record in records {
        if options.timestamps && line_start {
            output.extend_from_slice(record.time.as_bytes());
            output.push(b' ');
        }
        output.extend_from_slice(record.text);
        if record.complete {
            output.push(b'\n');
        }
        line_start = record.complete;
    }
    if let Some(limit) = options.limit_bytes {
        output.truncate(limit);
    }
    output
}

/// The log file of run `run` of a container.
pub(crate) fn run_log_path(dir: &Path, run: u32) -> PathBuf {
    dir.join(format!("{run}.log"))
}

/// Follows a log file as it grows, until `ended` reports the run is over and all is read.
pub(crate) fn follow(
    path: PathBuf,
    options: LogOptions,
    mut ended: tokio::sync::watch::Receiver<bool>,
) -> ReceiverStream<io::Result<Bytes>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        };
        let mut buffer = Vec::new();
        let mut first = true;
        let mut sent_bytes = 0usize;
        loop {
            let finished = *ended.borrow_and_update();
            let mut chunk = Vec::new();
            if let Err(error) = file.read_to_end(&mut chunk).await {
                let _ = sender.send(Err(error)).await;
                return;
            }
            buffer.extend_from_slice(&chunk);
            // Only whole records: a record still being written waits for the next turn.
            let whole = buffer
                .iter()
                .rposition(|byte| *byte == b'\n')
                .map_or(0, |end| end + 1);
            if whole > 0 {
                let mut step = options.clone();
                if !first {
                    step.tail_lines = None;
                }
                step.limit_bytes = options
                    .limit_bytes
                    .map(|limit| limit.saturating_sub(sent_bytes));
                let text = render(&buffer[..whole], &step);
                buffer.drain(..whole);
                first = false;
                sent_bytes += text.len();
                if !text.is_empty() && sender.send(Ok(Bytes::from(text))).await.is_err() {
                    return;
                }
            }
            let limit_reached = options.limit_bytes.is_some_and(|limit| sent_bytes >= limit);
            if finished || limit_reached {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), ended.changed()).await;
        }
    });
    ReceiverStream::new(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &[u8] = b"2024-05-01T10:00:00.000000001Z stdout F first\n\
2024-05-01T10:00:01Z stderr P par\n\
2024-05-01T10:00:01.5Z stderr F tial\n\
2024-05-01T10:00:02Z stdout F third\n";

    #[test]
    fn renders_lines_joining_partial_records() {
        assert_eq!(
            render(LOG, &LogOptions::default()),
            b"first\npartial\nthird\n"
        );
    }

    #[test]
    fn tail_counts_whole_lines() {
        let options = LogOptions {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(render(LOG, &options), b"partial\nthird\n");
        let none = LogOptions {
            tail_lines: Some(0),
            ..Default::default()
        };
        assert_eq!(render(LOG, &none), b"");
    }

    #[test]
    fn timestamps_since_and_limit() {
        let options = LogOptions {
            timestamps: true,
            since_time: Some("2024-05-01T10:00:02Z".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(render(LOG, &options), b"2024-05-01T10:00:02Z third\n");
        let limited = LogOptions {
            limit_bytes: Some(3),
            ..Default::default()
        };
        assert_eq!(render(LOG, &limited), b"fir");
    }

    #[test]
    fn writer_splits_lines_and_long_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let mut writer = LogWriter::create(&path).unwrap();
        writer.write(Stream::Stdout, b"hello\nwor").unwrap();
        writer.write(Stream::Stderr, b"oops\n").unwrap();
        writer.write(Stream::Stdout, b"ld\n").unwrap();
        writer
            .write(Stream::Stdout, &vec![b'x'; MAX_RECORD + 10])
            .unwrap();
        writer.finish(Stream::Stdout).unwrap();
        let log = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&log);
        assert!(
            text.lines().nth(1).unwrap().contains(" stderr F oops"),
            "{text}"
        );
        assert!(
            text.lines().nth(3).unwrap().contains(" stdout P xxx"),
            "{text}"
        );
        let rendered = render(&log, &LogOptions::default());
        let expected = [
            b"hello\noops\nworld\n".to_vec(),
            vec![b'x'; MAX_RECORD + 10],
            b"\n".to_vec(),
        ]
        .concat();
        assert_eq!(rendered, expected);
    }

    /// The runtime holds no descriptor per container for its log (one process runs every Pod).
    #[test]
    fn the_log_is_not_held_open_between_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let open_on = |path: &Path| {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .any(|target| target == path)
        };
        let mut writer = LogWriter::create(&path).unwrap();
        assert!(!open_on(&path), "open after create");
        writer.write(Stream::Stdout, b"one\ntw").unwrap();
        assert!(!open_on(&path), "open after a write");
        writer.finish(Stream::Stdout).unwrap();
        assert!(!open_on(&path), "open after the end");
        let log = std::fs::read(&path).unwrap();
        assert_eq!(render(&log, &LogOptions::default()), b"one\ntw\n");
    }
}
