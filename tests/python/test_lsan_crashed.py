"""tools/sanitizers/lsan_crashed.py: a ctest log whose failed tests all failed
only because LeakSanitizer's tracer crashed is told from one with a real
failure (which tools/asan.sh must never run again)."""

import pathlib
import subprocess
import sys

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "sanitizers" / "lsan_crashed.py"

CRASHED = """[0]<stderr>:Tracer caught signal 11: addr=0x1090 pc=0x7feb404e80f0 sp=0x7feb3a2f0d10
[0]<stderr>:==2206==LeakSanitizer has encountered a fatal error.
[0]<stderr>:==2206==HINT: LeakSanitizer does not work under ptrace (strace, gdb, etc)
ringletrun: rank 0 exited with status 67"""
LEAKED = """[0]<stderr>:==2206==ERROR: LeakSanitizer: detected memory leaks
[0]<stderr>:Direct leak of 64 byte(s) in 1 object(s) allocated from:"""


def block(number, name, output, verdict):
    return f"""{number}/897 Testing: {name}
{number}/897 Test: {name}
Command: "/usr/bin/cmake" "-DEXPECT_EXIT=0"
Directory: /tmp/build-asan/tests/api
"{name}" start time: Dec 05 07:23 UTC
Output:
----------------------------------------------------------
running: ringletrun -np 2 {name}
{output}
<end of output>
Test time =   0.28 sec
----------------------------------------------------------
Test {verdict}.
"{name}" end time: Dec 05 07:23 UTC
----------------------------------------------------------
"""


def run(tmp_path, *blocks):
    log = tmp_path / "LastTest.log"
    log.write_text("Start testing: Dec 05 07:23 UTC\n" + "".join(blocks) + "End testing\n")
    return subprocess.run([sys.executable, str(TOOL), str(log)], capture_output=True, text=True)


def test_only_tracer_crashes_are_run_again(tmp_path):
    done = run(tmp_path, block(1, "passes", "all fine", "Passed"),
               block(2, "api_c_abi_peer_lost_ucx", CRASHED, "Failed"))
    assert done.returncode == 0
    assert "api_c_abi_peer_lost_ucx: LeakSanitizer's tracer crashed" in done.stdout
    assert "passes" not in done.stdout


def test_a_leak_report_is_a_real_failure(tmp_path):
    done = run(tmp_path, block(1, "crashed", CRASHED, "Failed"),
               block(2, "leaked", LEAKED, "Failed"))
    assert done.returncode == 1
    assert done.stdout == ""


def test_nothing_failed_is_not_a_crash(tmp_path):
    assert run(tmp_path, block(1, "passes", "all fine", "Passed")).returncode == 1
