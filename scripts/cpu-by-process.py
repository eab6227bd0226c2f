#!/usr/bin/env python3
"""CPU time by process kind while something runs: `scripts/cpu-by-process.py > out.txt &`,
run the test, then `kill -INT` it; it prints seconds of CPU per kind, most first.

It reads /proc every half second and adds each process's user+system time since the last
read. A process is counted from when it is first seen (so start this before the test); the
last half second of a process that exits is lost, and a process that lives less than that is
not seen (its CPU shows in its parent's "reaped children" line instead).

Kinds: the executable's name; `etcd` split into `etcd member` and `etcd control-plane` by
its data directory; kube-sandbox and etcd-operator by their subcommand; python and node by
their script.
"""
import collections
import os
import signal
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
seen, seen_children, kinds = {}, {}, {}
cpu, reaped = collections.Counter(), collections.Counter()


def arg_value(args, flag):
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
        if a == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def kind(pid):
    try:
        raw = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return "?"
    args = [a.decode(errors="replace") for a in raw if a]
    if not args:
        return "?"
    exe = os.path.basename(args[0])
    if (exe.startswith("python") or exe == "node") and len(args) > 1:
        return f"{exe} {os.path.basename(args[1])}"
    if exe == "etcd":
        data = arg_value(args, "--data-dir") or ""
        return "etcd control-plane" if "control-plane" in data else "etcd member"
    if exe in ("kube-sandbox", "etcd-operator") and len(args) > 1:
        return f"{exe} {args[1]}"
    return exe


def scan(count):
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        own = int(fields[11]) + int(fields[12])
        children = int(fields[13]) + int(fields[14])
        key = (d, fields[19])  # pid and start time: a reused pid is another process
        if key not in kinds:
            kinds[key] = kind(d)
        if count:
            cpu[kinds[key]] += own - seen.get(key, 0)
            reaped[kinds[key]] += children - seen_children.get(key, 0)
        seen[key], seen_children[key] = own, children


def report(*_):
    total = sum(cpu.values()) or 1
    for name, ticks in cpu.most_common(30):
        print(f"{ticks / HZ:9.1f} s  {100 * ticks / total:5.1f} %  {name}")
    print(f"total {total / HZ:.1f} s of CPU in the processes seen")
    print("reaped children's CPU, by parent (short-lived processes show here):")
    for name, ticks in reaped.most_common(8):
        print(f"{ticks / HZ:9.1f} s  {name}")
    sys.exit(0)


signal.signal(signal.SIGINT, report)
signal.signal(signal.SIGTERM, report)
scan(False)  # what ran before us is not counted
while True:
    time.sleep(0.5)
    scan(True)
