"""tools/timeline-phases.py: the durations it reads from a timeline, on a
timeline written here with known times, and on one a real job wrote."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "timeline-phases.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("timeline_phases", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def activity(pid, name, start, end, inner=()):
    events = [{"name": name, "ph": "B", "pid": pid, "tid": 0, "ts": start}]
    for e in inner:
        events += e
    events.append({"ph": "E", "pid": pid, "tid": 0, "ts": end})
    return events


def test_nested_activities_each_get_their_own_duration():
    tool = load_tool()
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "t"}}]
    # Tensor 1: three allreduces of 100, 200 and 400 us, each holding a QUEUE
    # of 10 us that ends as the device step begins, and the step.
    for k, (start, length) in enumerate([(0, 100), (1000, 200), (2000, 400)]):
        events += activity(1, "ALLREDUCE", start, start + length, [
            activity(1, "QUEUE", start, start + 10),
            activity(1, "CUDA_IPC_ONESHOT_ALLREDUCE", start + 10, start + length - 5),
        ])
    # Tensor 2, interleaved in time with tensor 1 in the file: one of 50 us.
    events += activity(2, "ALLREDUCE", 5, 55)
    got = tool.durations(events)
    assert sorted(got["ALLREDUCE"]) == [50, 100, 200, 400]
    assert got["QUEUE"] == [10, 10, 10]
    assert got["CUDA_IPC_ONESHOT_ALLREDUCE"] == [85, 185, 385]
    rows = {r[0]: r for r in tool.summary(got)}
    # Nearest rank: the median of 4 values is the 2nd, the 90th percentile the 4th.
    assert rows["ALLREDUCE"][1:] == (4, 100, 400, 187.5)
    # Leaving out each tensor's first collective drops tensor 1's first and
    # tensor 2's only one, with what they held.
    skipped = tool.durations(events, skip=1)
    assert sorted(skipped["ALLREDUCE"]) == [200, 400]
    assert skipped["QUEUE"] == [10, 10]


def test_a_file_that_is_not_a_timeline_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    done = subprocess.run([sys.executable, str(TOOL), str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "not a list of events" in done.stderr


def test_a_real_jobs_timeline(tmp_path):
    ringletrun = os.environ.get("RINGLET_TEST_RINGLETRUN", "ringletrun")
    bench = pathlib.Path(ringletrun).resolve().parent / "ringlet-bench"
    if not bench.exists():
        pytest.skip(f"no ringlet-bench beside {ringletrun}")
    timeline = tmp_path / "timeline.json"
    env = dict(os.environ, HOROVOD_TIMELINE=str(timeline))
    subprocess.run([ringletrun, "-np", "2", str(bench), "allreduce", "--tensors", "2", "-b", "1K",
                    "-e", "4K", "-f", "4", "-n", "10", "-w", "2"],
                   env=env, check=True, capture_output=True, timeout=120)
    done = subprocess.run([sys.executable, str(TOOL), str(timeline), "--csv"],
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "activity,count,p50_us,p90_us,mean_us"
    rows = {line.split(",")[0]: line.split(",") for line in lines[1:]}
    # 2 sizes x (2 warm-up + 10 timed) iterations x 2 tensors, as rank 0 saw them.
    assert int(rows["ALLREDUCE"][1]) >= 2 * 12 * 2
    events = json.loads(timeline.read_text())
    assert int(rows["ALLREDUCE"][1]) == sum(
        1 for e in events if e.get("ph") == "B" and e.get("name") == "ALLREDUCE")
    assert all(float(r[2]) >= 0 for r in rows.values())
