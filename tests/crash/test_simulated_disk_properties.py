"""Property: whatever the program and the crash choices, a crash keeps only what may survive.

A random program of creates, appends, renames, unlinks, fsyncs and directory
fsyncs runs on the simulated disk; a crash in a random mode, driven by a
Hypothesis draw, follows.  Every surviving file's bytes lie between what was
synced and what was written (as prefixes), synced files with durable names
keep all synced bytes, and no name appears that was never written.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from toolswap.faultinject.disk import CRASH_MODES, SimulatedDisk

D = "/d"
NAMES = ["a", "b", "c"]
step = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(NAMES), st.integers(1, 5000)),
    st.tuples(st.just("fsync"), st.sampled_from(NAMES)),
    st.tuples(st.just("fsync_dir")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("unlink"), st.sampled_from(NAMES)),
)


def _run(disk: SimulatedDisk, program: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Run the program; return the volatile snapshot after every step."""
    counter = 0
    seen = [disk.snapshot()]
    for op in program:
        seen.append(disk.snapshot())
        try:
            if op[0] == "append":
                counter += 1
                handle = disk.open_append(f"{D}/{op[1]}")
                disk.write(handle, bytes([65 + counter % 26]) * op[2])
                disk.close(handle)
            elif op[0] == "fsync":
                handle = disk.open_read(f"{D}/{op[1]}")
                disk.fsync(handle)
                disk.close(handle)
            elif op[0] == "fsync_dir":
                disk.fsync_dir(D)
            elif op[0] == "rename":
                disk.rename(f"{D}/{op[1]}", f"{D}/{op[2]}")
            else:
                disk.unlink(f"{D}/{op[1]}")
        except FileNotFoundError:
            continue
    seen.append(disk.snapshot())
    return seen


@given(
    program=st.lists(step, max_size=25),
    mode=st.sampled_from(CRASH_MODES),
    data=st.data(),
)
def test_a_crash_keeps_only_what_may_survive(
    program: list[tuple[Any, ...]], mode: str, data: st.DataObject
) -> None:
    disk = SimulatedDisk()
    disk.makedirs(D)
    history = _run(disk, program)
    durable = disk.snapshot(durable=True)
    # every name and byte string ever visible, to bound what may survive
    names = {path for snap in history for path in snap}
    ever = [v for snap in history for v in snap.values() if isinstance(v, bytes)]

    disk.crash(mode, lambda n: data.draw(st.integers(0, n - 1)))
    after = disk.snapshot()
    for path, content in after.items():
        if path == D:
            continue
        assert path in names, path
        assert isinstance(content, bytes)
        # the bytes are a prefix of some content that was written
        assert any(w.startswith(content) for w in ever), path
    if mode == "drop":
        assert after == durable
    if mode == "torn":  # names are exactly the durable ones; data at least the synced part
        assert set(after) == set(durable)
        for path, content in durable.items():
            assert isinstance(content, bytes | None)
            if isinstance(content, bytes):
                got = after[path]
                assert isinstance(got, bytes) and got.startswith(content)
