"""Where ``toolswap report --out`` and ``explore --html`` may write: checked before the work.

The page goes only to a regular file (replaced whole) or a new name.  Anything
else is refused with one line and exit 2, and left as it was: as root, a
rename over ``/dev/null`` would replace the device.  A folder the page cannot
be written to is refused before minutes of exploring, not after them.

Every test replaces the exploring with a tripwire, so "before any work" is
what it checks and the page builder's own speed does not matter.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator

import pytest

from toolswap.cli import explore as explore_cli
from toolswap.cli import main
from toolswap.cli.report import write_page
from toolswap.errors import UsageError
from toolswap.report import model


class _Explored(Exception):
    """Raised by the tripwire: the work started."""


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> None:
    def explored(*args: object, **kwargs: object) -> None:
        raise _Explored

    monkeypatch.setattr(model, "build", explored)
    monkeypatch.setattr(explore_cli.explorer, "explore", explored)


def _fifo(path: pathlib.Path) -> None:
    os.mkfifo(path)


def _device(path: pathlib.Path) -> None:
    try:  # a node of the null device, in the test's own folder
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("cannot make a device node here (not root, or no CAP_MKNOD)")


def _socket(path: pathlib.Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()  # the entry stays


def _directory(path: pathlib.Path) -> None:
    path.mkdir()


def _symlink(path: pathlib.Path) -> None:
    (path.parent / "target.html").write_text("kept\n")
    path.symlink_to("target.html")


NOT_REGULAR: dict[str, tuple[Callable[[pathlib.Path], None], str]] = {
    "character device": (_device, "a character device"),
    "fifo": (_fifo, "a FIFO"),
    "socket": (_socket, "a socket"),
    "directory": (_directory, "a directory"),
    "symlink": (_symlink, "a symlink"),
}


@pytest.fixture(params=sorted(NOT_REGULAR))
def not_regular(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    make, kind = NOT_REGULAR[request.param]
    target = tmp_path / "out.html"
    make(target)
    yield kind


def _mode(path: pathlib.Path) -> int:
    return os.lstat(path).st_mode


@pytest.mark.usefixtures("tripwire")
def test_report_refuses_an_out_that_is_not_a_regular_file_and_leaves_it(
    not_regular: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.html"
    before = _mode(target)
    assert main(["report", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"it is {not_regular}" in err
    assert _mode(target) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("target")) == [
        "out.html"
    ]


@pytest.mark.usefixtures("tripwire")
def test_explore_html_refuses_an_out_that_is_not_a_regular_file_before_exploring(
    not_regular: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.html"
    before = _mode(target)
    argv = ["explore", "--variant", "counter-restart", "--html", str(target)]
    assert main(argv) == 2
    assert f"it is {not_regular}" in capsys.readouterr().err
    assert _mode(target) == before


def _file_as_parent(tmp: pathlib.Path) -> pathlib.Path:
    (tmp / "a-file").write_text("not a folder\n")
    return tmp / "a-file" / "r.html"


UNWRITABLE: dict[str, tuple[Callable[[pathlib.Path], pathlib.Path], str]] = {
    "missing folder": (lambda tmp: tmp / "missing" / "r.html", "no folder"),
    "parent is a file": (_file_as_parent, "is not a folder"),
}


@pytest.mark.usefixtures("tripwire")
@pytest.mark.parametrize("case", sorted(UNWRITABLE))
def test_a_full_report_to_an_unwritable_place_fails_before_exploring(
    case: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where, message = UNWRITABLE[case]
    assert main(["report", "--out", str(where(tmp_path))]) == 2  # a full report: no --quick
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


_WITHOUT_OVERRIDE = """
import sys
from toolswap.cli import main
from toolswap.report import model

def explored(*args, **kwargs):
    sys.exit(99)

model.build = explored
sys.exit(main(["report", "--out", sys.argv[1]]))
"""


@pytest.fixture
def readonly_folder() -> Iterator[pathlib.Path]:
    """A folder its owner may enter but not write."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="toolswap-readonly-"))
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_a_full_report_to_a_folder_without_write_permission_fails_before_exploring(
    readonly_folder: pathlib.Path,
) -> None:
    # Root passes permission bits through CAP_DAC_OVERRIDE: the command runs as root
    # without it (dropped from the bounding set), so the bits hold for it too.  Not as
    # another user: that user may not reach this interpreter's packages.
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv is missing: cannot drop CAP_DAC_OVERRIDE")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    done = subprocess.run(
        [*prefix, sys.executable, "-c", _WITHOUT_OVERRIDE, str(readonly_folder / "r.html")],
        capture_output=True,
        text=True,
        cwd=readonly_folder,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "cannot write" in done.stderr and "Permission denied" in done.stderr


def test_the_writer_refuses_a_target_that_stopped_being_a_regular_file(
    tmp_path: pathlib.Path,
) -> None:
    # as if the FIFO appeared while the page was being built, after the first check
    target = tmp_path / "out.html"
    os.mkfifo(target)
    with pytest.raises(UsageError, match="it is a FIFO"):
        write_page(str(target), "<p>page</p>")
    assert stat.S_ISFIFO(_mode(target))
    assert [p.name for p in tmp_path.iterdir()] == ["out.html"]  # no temporary left


@pytest.mark.usefixtures("tripwire")
def test_the_probe_and_the_writer_leave_only_the_page_in_the_folder(
    tmp_path: pathlib.Path,
) -> None:
    target = tmp_path / "out.html"
    target.write_text("old page\n")
    assert main(["report", "--out", str(target)]) == 1  # probe passed; the tripwire fired
    write_page(str(target), "<p>new page</p>")
    assert target.read_text() == "<p>new page</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["out.html"]
